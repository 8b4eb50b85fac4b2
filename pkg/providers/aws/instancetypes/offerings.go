package instancetypes

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// compute builds the class's list without the overlay: every type offered
// in a zone of the class, with base offerings.
func (p *Provider) compute(ctx context.Context, nc *awsv1.EC2NodeClass, infos []ec2types.InstanceTypeInfo, offered map[string]map[string]bool) ([]*scheduling.InstanceType, error) {
	zones := classZones(nc)
	// One requirements value per zone, shared by every offering there:
	// offerings imply their zone's ID, and read-only maps can be shared.
	zoneReqs := make(map[string]scheduling.Requirements, len(zones))
	for _, z := range zones {
		if z.ID != "" {
			zoneReqs[z.Name] = scheduling.NewRequirements(scheduling.NewRequirement(awsv1.LabelTopologyZoneID, scheduling.OpIn, z.ID))
		}
	}
	out := make([]*scheduling.InstanceType, 0, len(infos))
	var firstErr error
	failed := 0
	for _, info := range infos {
		if !supportsClass(info, nc) {
			continue
		}
		name := string(info.InstanceType)
		var typeZones []instancetype.Zone
		for _, z := range zones {
			if offered[name][z.Name] {
				typeZones = append(typeZones, z)
			}
		}
		// A type no zone of the class offers cannot launch at all; upstream
		// leaves it out rather than list it with only unavailable offerings.
		if len(typeZones) == 0 {
			continue
		}
		it, err := instancetype.New(info, nc, p.opts.Region, typeZones, p.opts.Settings)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			failed++
			continue
		}
		it.Offerings = p.offerings(info, nc, zones, offered[name], zoneReqs)
		out = append(out, it)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, fmt.Errorf("computing instance types for EC2NodeClass %s: %w", nc.Name, firstErr)
	}
	if failed > 0 {
		log.FromContext(ctx).Error(firstErr, "skipping instance types that cannot be computed", "EC2NodeClass", nc.Name, "count", failed)
	}
	return out, nil
}

// offerings are the ways to buy one type for the class: each subnet zone ×
// each capacity type the type is sold as, then one per reservation of the
// class for this type. Available means offered in the zone, compatible
// with the class, and priced; the overlay can still veto it.
func (p *Provider) offerings(info ec2types.InstanceTypeInfo, nc *awsv1.EC2NodeClass, zones []instancetype.Zone, offered map[string]bool, zoneReqs map[string]scheduling.Requirements) []scheduling.Offering {
	name := string(info.InstanceType)
	compatible := compatible(info, nc)
	var capacityTypes []string
	for _, ct := range []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot} {
		for _, uc := range info.SupportedUsageClasses {
			if uc == ct {
				capacityTypes = append(capacityTypes, string(ct))
			}
		}
	}
	out := make([]scheduling.Offering, 0, len(zones)*len(capacityTypes))
	for _, z := range zones {
		for _, ct := range capacityTypes {
			var price float64
			var priced bool
			if ct == scheduling.CapacityTypeSpot {
				price, priced = p.pricing.SpotPrice(name, z.Name)
			} else {
				price, priced = p.pricing.OnDemandPrice(name)
			}
			out = append(out, scheduling.Offering{
				Zone: z.Name, CapacityType: ct, Price: price,
				Available:    compatible && priced && offered[z.Name],
				Requirements: zoneReqs[z.Name],
			})
		}
	}
	inClass := map[string]bool{}
	for _, z := range zones {
		inClass[z.Name] = true
	}
	od, odPriced := p.pricing.OnDemandPrice(name)
	for _, r := range nc.Status.CapacityReservations {
		if r.InstanceType != name {
			continue
		}
		rt := r.ReservationType
		if rt == "" {
			rt = awsv1.CapacityReservationTypeDefault
		}
		reqs := scheduling.NewRequirements(
			scheduling.NewRequirement(scheduling.LabelReservationID, scheduling.OpIn, r.ID),
			scheduling.NewRequirement(awsv1.LabelCapacityReservationType, scheduling.OpIn, string(rt)),
			scheduling.NewRequirement(awsv1.LabelCapacityReservationInterruptible, scheduling.OpIn, strconv.FormatBool(r.Interruptible)),
		)
		if zr, ok := zoneReqs[r.AvailabilityZone]; ok {
			reqs.Add(zr.Get(awsv1.LabelTopologyZoneID))
		}
		out = append(out, scheduling.Offering{
			Zone: r.AvailabilityZone, CapacityType: scheduling.CapacityTypeReserved,
			Price: od / reservedPriceDivisor,
			// The remaining count is laid over per call; a capacity block
			// about to end takes no new instances.
			Available:     compatible && odPriced && inClass[r.AvailabilityZone] && offered[r.AvailabilityZone] && r.State != awsv1.CapacityReservationStateExpiring,
			ReservationID: r.ID,
			Requirements:  reqs,
		})
	}
	return out
}

// compatible reports whether the class can run the type at all; an
// incompatible type keeps its offerings, all unavailable, so a pod that
// asks for it is told why. AL2023 has no a1 (Graviton 1) support.
func compatible(info ec2types.InstanceTypeInfo, nc *awsv1.EC2NodeClass) bool {
	if nc.AMIFamily() == awsv1.AMIFamilyAL2023 && strings.HasPrefix(string(info.InstanceType), "a1.") {
		return false
	}
	return true
}

// applyOverlay lays the insufficient-capacity cache, reservation counts,
// zonal shifts and the memory capacity real nodes reported over the base
// list. Types they do not touch are shared with the base; touched ones are
// copied with fresh offerings.
func (e *entry) applyOverlay(unavailable []cloudprovider.OfferingKey, counts map[string]int, shifted map[string]bool, memory map[string]resource.Quantity) []*scheduling.InstanceType {
	touched := map[int]bool{}
	for name := range memory {
		if i, ok := e.byName[name]; ok {
			touched[i] = true
		}
	}
	for _, k := range unavailable {
		if i, ok := e.byName[k.InstanceType]; ok {
			touched[i] = true
		}
	}
	for i, it := range e.base {
		for j := range it.Offerings {
			if it.Offerings[j].ReservationID != "" || shifted[it.Offerings[j].Zone] {
				touched[i] = true
				break
			}
		}
	}
	if len(touched) == 0 {
		return e.base
	}
	ice := make(map[cloudprovider.OfferingKey]bool, len(unavailable))
	for _, k := range unavailable {
		ice[k] = true
	}
	out := make([]*scheduling.InstanceType, len(e.base))
	copy(out, e.base)
	for i := range touched {
		cp := *e.base[i]
		if m, ok := memory[cp.Name]; ok {
			// Upstream replaces only the capacity; the overhead stays what
			// the estimate gave.
			cp.Capacity = maps.Clone(cp.Capacity)
			cp.Capacity[corev1.ResourceMemory] = m
		}
		cp.Offerings = append([]scheduling.Offering(nil), cp.Offerings...)
		for j := range cp.Offerings {
			o := &cp.Offerings[j]
			if ice[cloudprovider.Key(&cp, o)] || shifted[o.Zone] {
				o.Available = false
			}
			if o.ReservationID != "" {
				n := counts[o.ReservationID] // unknown counts as exhausted
				o.ReservationCapacity = n
				if n <= 0 {
					o.Available = false
				}
			}
		}
		out[i] = &cp
	}
	return out
}

// supportsClass: the type can carry the class's launch settings, as
// upstream filters them: connection tracking needs a Nitro type, and
// nested virtualization one whose processor lists the feature.
func supportsClass(info ec2types.InstanceTypeInfo, nc *awsv1.EC2NodeClass) bool {
	if nc.Spec.ConnectionTracking != nil && info.Hypervisor != ec2types.InstanceTypeHypervisorNitro {
		return false
	}
	if o := nc.Spec.CPUOptions; o != nil && aws.ToString(o.NestedVirtualization) == string(ec2types.NestedVirtualizationSpecificationEnabled) {
		if info.ProcessorInfo == nil {
			return false
		}
		for _, f := range info.ProcessorInfo.SupportedFeatures {
			if f == ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization {
				return true
			}
		}
		return false
	}
	return true
}

// DedicatedPrice is the on-demand price of a dedicated-tenancy instance of
// the type, when the provider's pricing knows it (pricing.Provider does
// after an on-demand refresh from the Pricing API).
func (p *Provider) DedicatedPrice(name string) (float64, bool) {
	dp, ok := p.pricing.(interface {
		DedicatedPrice(string) (float64, bool)
	})
	if !ok {
		return 0, false
	}
	return dp.DedicatedPrice(name)
}
