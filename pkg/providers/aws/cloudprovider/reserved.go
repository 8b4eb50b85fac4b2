package cloudprovider

import (
	"context"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// reservedOffering is a reserved offering a launch may target: the type,
// the offering, the class status's entry for its reservation and the room
// the tracker reports in it.
type reservedOffering struct {
	it    *scheduling.InstanceType
	o     *scheduling.Offering
	res   awsv1.CapacityReservation
	count int
}

func (r reservedOffering) reservationType() string {
	if r.res.ReservationType == "" {
		return instance.ReservationTypeDefault
	}
	return string(r.res.ReservationType)
}

// selectReserved is what a reserved launch targets, cheapest first, as
// upstream filters it: the available reserved offerings the NodeClaim
// allows on types that fit its requests, in a zone with a subnet, whose
// reservation the class status selects and the tracker has room in; then
// only the reservation type of the cheapest (EC2 takes one kind per
// fleet); of capacity blocks only the cheapest (one block per request);
// of ordinary reservations the one with the most room per zone (one
// reservation per zone). Empty means no reserved launch.
func selectReserved(its []*scheduling.InstanceType, reqs scheduling.Requirements, requests corev1.ResourceList, nodeClass *awsv1.EC2NodeClass, subnetOf map[string]string, tracker Reservations) []reservedOffering {
	var cands []reservedOffering
	for _, it := range its {
		if reqs.Intersects(it.Requirements) != nil || !scheduling.Fits(requests, cloudprovider.Allocatable(it)) {
			continue
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.ReservationID == "" || !o.Available || !scheduling.OfferingCompatible(o, reqs) {
				continue
			}
			if _, ok := subnetOf[o.Zone]; !ok {
				continue
			}
			res := reservationOf(nodeClass, o.ReservationID)
			if res == nil || res.InstanceType != it.Name || res.AvailabilityZone != o.Zone {
				continue
			}
			n, ok := tracker.Available(o.ReservationID)
			if !ok || n <= 0 {
				continue
			}
			cands = append(cands, reservedOffering{it: it, o: o, res: *res, count: n})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cheaper(cands[i], cands[j]) })
	kind := cands[0].reservationType()
	if kind == instance.ReservationTypeCapacityBlock {
		return cands[:1]
	}
	best := map[string]int{} // zone → index in out
	var out []reservedOffering
	for _, c := range cands {
		if c.reservationType() != kind {
			continue
		}
		i, ok := best[c.o.Zone]
		switch {
		case !ok:
			best[c.o.Zone] = len(out)
			out = append(out, c)
		case c.count > out[i].count:
			out[i] = c
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return cheaper(out[i], out[j]) })
	return out
}

// cheaper orders reserved offerings by price, then ordinary reservations
// before capacity blocks, then reservation ID, so equal prices choose the
// same way every time.
func cheaper(a, b reservedOffering) bool {
	if a.o.Price != b.o.Price {
		return a.o.Price < b.o.Price
	}
	if a.reservationType() != b.reservationType() {
		return a.reservationType() == instance.ReservationTypeDefault
	}
	return a.o.ReservationID < b.o.ReservationID
}

// reservedLaunchConfigs is one launch template per reservation, targeting
// it, whose only override is the reservation's type in its zone's subnet.
// The templates' user data labels the node with the reservation.
func (c *CloudProvider) reservedLaunchConfigs(ctx context.Context, nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, reqs scheduling.Requirements, reserved []reservedOffering, subnetOf map[string]string, pg *placementgroup.PlacementGroup) ([]instance.LaunchConfig, error) {
	var launches []launchtemplate.Launch
	var kept []reservedOffering
	var images []string
	for _, r := range reserved {
		image, ok := imageFor(nodeClass, r.it)
		if !ok {
			continue
		}
		pods := r.it.Capacity[corev1.ResourcePods]
		extra := reservedLabels(r.res.ID, r.reservationType(), &r.res)
		extra[scheduling.LabelCapacityType] = scheduling.CapacityTypeReserved
		launches = append(launches, c.launch(nc, nodeClass, reqs, image, pods.Value(), extra,
			launchtemplate.CapacityReservation{ID: r.res.ID, Type: r.reservationType()}, pg))
		kept = append(kept, r)
		images = append(images, image)
	}
	if len(launches) == 0 {
		return nil, cloudprovider.NewCreateError(errNoImage(nodeClass), "NoCompatibleImage", "No AMI of the EC2NodeClass matches the instance types")
	}
	lts, err := c.ensureTemplates(ctx, nodeClass, launches)
	if err != nil {
		return nil, err
	}
	zoneIDOf := zoneIDs(nodeClass)
	configs := make([]instance.LaunchConfig, 0, len(kept))
	for i, r := range kept {
		configs = append(configs, instance.LaunchConfig{
			LaunchTemplateName:    lts[i].Name,
			ImageID:               images[i],
			SecurityGroupIDs:      lts[i].SecurityGroupIDs,
			CapacityReservationID: r.res.ID,
			Overrides:             []instance.Override{{InstanceType: r.it.Name, Zone: r.o.Zone, ZoneID: zoneIDOf[r.o.Zone], SubnetID: subnetOf[r.o.Zone], Price: r.o.Price, PriceOverlaid: r.o.PriceOverlaid}},
		})
	}
	return configs, nil
}

// plannedReservation reads the reservation the provisioner planned a
// reserved NodeClaim on, written under karpenter.k8s.aws/capacity-reservation-id
// (the CRD refuses karpenter.sh/reservation-id in spec.requirements), into
// the solver's key, so that only that reservation's offerings are
// compatible, as upstream's cloudprovider.ReservationIDLabel does.
func plannedReservation(reqs scheduling.Requirements) scheduling.Requirements {
	r, ok := reqs[awsv1.LabelCapacityReservationID]
	if !ok || reqs.Has(scheduling.LabelReservationID) {
		return reqs
	}
	out := reqs.Copy()
	out.Add(scheduling.NewRequirement(scheduling.LabelReservationID, r.Operator(), r.Values()...))
	return out
}

// reservationOf is the class status's entry for the reservation, or nil.
func reservationOf(nodeClass *awsv1.EC2NodeClass, id string) *awsv1.CapacityReservation {
	if nodeClass == nil || id == "" {
		return nil
	}
	for i := range nodeClass.Status.CapacityReservations {
		if nodeClass.Status.CapacityReservations[i].ID == id {
			return &nodeClass.Status.CapacityReservations[i]
		}
	}
	return nil
}

// reservedLabels are the labels of a node in the reservation: the core's
// reservation ID, upstream AWS's (its ReservationIDLabel, which pods and
// the interruption controller select on), the type, and, when the status
// says (res), whether it is interruptible.
func reservedLabels(id, reservationType string, res *awsv1.CapacityReservation) map[string]string {
	if res != nil && res.ReservationType != "" {
		reservationType = string(res.ReservationType)
	}
	if reservationType == "" {
		reservationType = instance.ReservationTypeDefault
	}
	out := map[string]string{
		scheduling.LabelReservationID:      id,
		awsv1.LabelCapacityReservationID:   id,
		awsv1.LabelCapacityReservationType: reservationType,
	}
	if res != nil {
		out[awsv1.LabelCapacityReservationInterruptible] = strconv.FormatBool(res.Interruptible)
	}
	return out
}
