package cloudprovider_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	coreoptions "github.com/karpenter-go/karpenter/pkg/operator/options"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// tracker is an in-memory reservation tracker: the room it believes each
// reservation has, and what it was told.
type tracker struct {
	mu                              sync.Mutex
	room                            map[string]int
	launched, terminated, exhausted []string
}

func newTracker() *tracker { return &tracker{room: map[string]int{}} }

func (r *tracker) Available(id string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.room[id]
	return n, ok
}

func (r *tracker) MarkLaunched(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.launched = append(r.launched, id)
	if r.room[id] > 0 {
		r.room[id]--
	}
}

func (r *tracker) MarkTerminated(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated = append(r.terminated, id)
	r.room[id]++
}

func (r *tracker) MarkUnavailable(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exhausted = append(r.exhausted, id)
	r.room[id] = 0
}

func (r *tracker) calls() (launched, terminated, exhausted []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.launched...), append([]string(nil), r.terminated...), append([]string(nil), r.exhausted...)
}

// withReservations rebuilds e's provider on the same class with the
// tracker (nil: none) counting reservations for both the instance-type
// list and launches, and api as the instance provider's EC2 client.
func withReservations(e *env, tr *tracker, api instance.EC2API) {
	var counts instancetypes.ReservationCounts
	var res awscloudprovider.Reservations
	if tr != nil {
		counts, res = tr, tr
	}
	e.types = instancetypes.NewProvider(ec2API, prices, instancetypes.Options{Region: "us-east-1", Settings: instancetype.DefaultSettings(),
		Unavailable: e.unavailable, Reservations: counts})
	e.cp = awscloudprovider.New(awscloudprovider.Options{
		Kube: kube, InstanceTypes: e.types,
		LaunchTemplates: launchtemplate.NewProvider(ec2API, clusterName, launchtemplate.ProviderOptions{}),
		Instances:       instance.NewProvider(api, clusterName, e.unavailable, instance.WithSubnets(e.subnets)),
		Subnets:         e.subnets,
		Cluster:         launchtemplate.Cluster{Name: clusterName, Endpoint: "https://cluster.example.com", CABundle: "Y2E=", CIDR: "10.100.0.0/16", DNS: "10.100.0.10"},
		Reservations:    res,
	})
}

// reservation is one the test creates in the local AWS.
type reservation struct {
	instanceType  string
	kind          string // default or capacity-block
	count         int    // what EC2 holds
	room          int    // what the tracker believes; count when 0
	interruptible bool
}

// reserve creates the reservations in the local AWS, lists them in the
// class's status as the resolver would, and tells the tracker their room.
// It returns their ids in order.
func reserve(t *testing.T, e *env, tr *tracker, rs ...reservation) []string {
	t.Helper()
	var ids []string
	for _, r := range rs {
		cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: r.instanceType, AvailabilityZone: zone,
			TotalInstanceCount: r.count, ReservationType: r.kind})
		require.NoError(t, err)
		t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
		ids = append(ids, cr.ID)
		e.nodeClass.Status.CapacityReservations = append(e.nodeClass.Status.CapacityReservations, awsv1.CapacityReservation{
			ID: cr.ID, AvailabilityZone: zone, InstanceType: r.instanceType, InstanceMatchCriteria: "targeted", OwnerID: cr.OwnerID,
			ReservationType: awsv1.CapacityReservationType(cr.ReservationType), Interruptible: r.interruptible,
			State: awsv1.CapacityReservationStateActive,
		})
		if tr != nil {
			room := r.room
			if room == 0 {
				room = r.count
			}
			tr.mu.Lock()
			tr.room[cr.ID] = room
			tr.mu.Unlock()
		}
	}
	require.NoError(t, kube.Status().Update(context.Background(), e.nodeClass))
	return ids
}

func describeInstance(t *testing.T, providerID string) ec2types.Instance {
	t.Helper()
	id, err := instance.ParseProviderID(providerID)
	require.NoError(t, err)
	out, err := ec2API.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, out.Reservations, 1)
	return out.Reservations[0].Instances[0]
}

// templateOf is the launch template data of the fleet request's config i.
func templateOf(t *testing.T, in *ec2.CreateFleetInput, i int) ec2types.ResponseLaunchTemplateData {
	t.Helper()
	out, err := ec2API.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: in.LaunchTemplateConfigs[i].LaunchTemplateSpecification.LaunchTemplateName, Versions: []string{"$Latest"}})
	require.NoError(t, err)
	require.Len(t, out.LaunchTemplateVersions, 1)
	return *out.LaunchTemplateVersions[0].LaunchTemplateData
}

// TestReservedLaunch: a NodeClaim allowing reserved and on-demand capacity
// launches into the class's reservation, though its type is not the
// cheapest on-demand: one template targeting it, one override, an
// on-demand fleet; EC2 puts the instance in the reservation and the
// NodeClaim carries the reservation's labels. Create again returns the
// same instance without a launch or a second MarkLaunched; Delete gives
// the unit back once.
func TestReservedLaunch(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)
	tr := newTracker()
	withReservations(e, tr, rec)
	order := e.byPrice(t)
	id := reserve(t, e, tr, reservation{instanceType: order[1], count: 2, interruptible: true})[0]

	nc := e.nodeClaim(t, "reserved", "on-demand")
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	inst := describeInstance(t, got.Status.ProviderID)
	assert.Equal(t, order[1], string(inst.InstanceType))
	assert.Equal(t, id, aws.ToString(inst.CapacityReservationId), "EC2 launched it into the reservation")
	assert.Equal(t, map[string]string{
		v1.CapacityTypeLabelKey:                     "reserved",
		"karpenter.sh/reservation-id":               id,
		awsv1.LabelCapacityReservationID:            id,
		awsv1.LabelCapacityReservationType:          "default",
		awsv1.LabelCapacityReservationInterruptible: "true",
		corev1.LabelInstanceTypeStable:              order[1],
	}, map[string]string{
		v1.CapacityTypeLabelKey:                     got.Labels[v1.CapacityTypeLabelKey],
		"karpenter.sh/reservation-id":               got.Labels["karpenter.sh/reservation-id"],
		awsv1.LabelCapacityReservationID:            got.Labels[awsv1.LabelCapacityReservationID],
		awsv1.LabelCapacityReservationType:          got.Labels[awsv1.LabelCapacityReservationType],
		awsv1.LabelCapacityReservationInterruptible: got.Labels[awsv1.LabelCapacityReservationInterruptible],
		corev1.LabelInstanceTypeStable:              got.Labels[corev1.LabelInstanceTypeStable],
	})

	in := rec.last(t)
	assert.Equal(t, ec2types.DefaultTargetCapacityTypeOnDemand, in.TargetCapacitySpecification.DefaultTargetCapacityType)
	require.NotNil(t, in.OnDemandOptions)
	assert.Equal(t, ec2types.FleetOnDemandAllocationStrategyLowestPrice, in.OnDemandOptions.AllocationStrategy)
	require.Len(t, in.LaunchTemplateConfigs, 1, "one template per reservation")
	require.Len(t, in.LaunchTemplateConfigs[0].Overrides, 1, "only the reservation's type and zone")
	o := in.LaunchTemplateConfigs[0].Overrides[0]
	assert.Equal(t, order[1], string(o.InstanceType))
	assert.Equal(t, zone, aws.ToString(o.AvailabilityZone))
	data := templateOf(t, in, 0)
	require.NotNil(t, data.CapacityReservationSpecification)
	assert.Equal(t, ec2types.CapacityReservationPreferenceCapacityReservationsOnly, data.CapacityReservationSpecification.CapacityReservationPreference)
	assert.Equal(t, id, aws.ToString(data.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId))
	assert.Nil(t, data.InstanceMarketOptions)

	launched, _, _ := tr.calls()
	assert.Equal(t, []string{id}, launched)

	// Get reads the same labels back from EC2 and the class.
	again, err := e.cp.Get(ctx, got.Status.ProviderID)
	require.NoError(t, err)
	for _, k := range []string{v1.CapacityTypeLabelKey, "karpenter.sh/reservation-id", awsv1.LabelCapacityReservationID,
		awsv1.LabelCapacityReservationType, awsv1.LabelCapacityReservationInterruptible} {
		assert.Equal(t, got.Labels[k], again.Labels[k], k)
	}

	// Idempotent: the tracker now has one unit left; a second Create finds
	// the instance, launches nothing and counts nothing.
	fleets := local.Calls("ec2", "CreateFleet")
	second, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, got.Status.ProviderID, second.Status.ProviderID)
	assert.Equal(t, "reserved", second.Labels[v1.CapacityTypeLabelKey])
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"), "no second CreateFleet")
	assert.Len(t, instancesOf(t, nc.Name), 1)
	launched, _, _ = tr.calls()
	assert.Equal(t, []string{id}, launched, "MarkLaunched once")

	require.NoError(t, deleteUntilGone(t, e, got))
	_, terminated, _ := tr.calls()
	assert.Equal(t, []string{id}, terminated, "MarkTerminated once, however often Delete is called")
	cr, ok := local.CapacityReservationByID(id)
	require.True(t, ok)
	assert.Equal(t, 2, cr.AvailableInstanceCount)
}

// TestFullReservationFallsBack: the tracker believes the reservation has
// room, EC2 says ReservationCapacityExceeded: Create answers insufficient
// capacity and marks the reservation unavailable (not the on-demand
// offering of its type); the next Create launches on-demand.
func TestFullReservationFallsBack(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	tr := newTracker()
	withReservations(e, tr, ec2API)
	order := e.byPrice(t)
	id := reserve(t, e, tr, reservation{instanceType: order[1], count: 0, room: 1})[0]

	nc := e.nodeClaim(t, "reserved", "on-demand")
	_, err := e.cp.Create(ctx, nc)
	require.Error(t, err)
	assert.True(t, cloudprovider.IsInsufficientCapacityError(err), err)
	assert.Contains(t, err.Error(), "ReservationCapacityExceeded")
	_, _, exhausted := tr.calls()
	assert.Equal(t, []string{id}, exhausted)
	assert.False(t, e.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: order[1], Zone: zone, CapacityType: "on-demand"}),
		"the type's on-demand offering is not out of capacity")
	assert.Empty(t, instancesOf(t, nc.Name))

	// The instance-type list now reports the reserved offering unavailable.
	its, err := e.types.List(ctx, e.nodeClass)
	require.NoError(t, err)
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.ReservationID == id {
				assert.False(t, o.Available)
			}
		}
	}

	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, "on-demand", got.Labels[v1.CapacityTypeLabelKey])
	assert.Equal(t, order[0], got.Labels[corev1.LabelInstanceTypeStable], "the cheapest on-demand type")
	assert.NotContains(t, got.Labels, "karpenter.sh/reservation-id")
	assert.NotContains(t, got.Labels, awsv1.LabelCapacityReservationType)
	assert.Nil(t, describeInstance(t, got.Status.ProviderID).CapacityReservationId)
	cleanup(t, e, got)
	_, terminated, _ := tr.calls()
	assert.Empty(t, terminated, "an on-demand instance gives no reservation unit back")
}

// TestReservedSelection: what one reserved launch targets, as upstream
// filters: default and capacity-block reservations never share a fleet
// (the cheapest's kind wins), one capacity block per request (the
// cheapest), one ordinary reservation per zone (the most room).
func TestReservedSelection(t *testing.T) {
	cases := []struct {
		name         string
		reservations func(order []string) []reservation
		want         int // index of the reservation launched into
		wantFleet    ec2types.DefaultTargetCapacityType
		wantKind     string
	}{
		{"a capacity block cheaper than a default reservation wins", func(o []string) []reservation {
			return []reservation{{instanceType: o[1], count: 2}, {instanceType: o[0], kind: "capacity-block", count: 1}}
		}, 1, ec2types.DefaultTargetCapacityTypeCapacityBlock, "capacity-block"},
		{"a default reservation cheaper than a capacity block wins", func(o []string) []reservation {
			return []reservation{{instanceType: o[0], count: 2}, {instanceType: o[1], kind: "capacity-block", count: 1}}
		}, 0, ec2types.DefaultTargetCapacityTypeOnDemand, "default"},
		{"one capacity block per request, the cheapest", func(o []string) []reservation {
			return []reservation{{instanceType: o[1], kind: "capacity-block", count: 4}, {instanceType: o[0], kind: "capacity-block", count: 1}}
		}, 1, ec2types.DefaultTargetCapacityTypeCapacityBlock, "capacity-block"},
		{"one reservation per zone, the one with the most room", func(o []string) []reservation {
			return []reservation{{instanceType: o[0], count: 1}, {instanceType: o[1], count: 3}}
		}, 1, ec2types.DefaultTargetCapacityTypeOnDemand, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rec := &recordingEC2{Client: ec2API}
			e := newEnvWith(t, rec)
			tr := newTracker()
			withReservations(e, tr, rec)
			order := e.byPrice(t)
			rs := tc.reservations(order)
			ids := reserve(t, e, tr, rs...)

			got, err := e.cp.Create(ctx, e.nodeClaim(t, "reserved", "on-demand"))
			require.NoError(t, err)
			in := rec.last(t)
			assert.Equal(t, tc.wantFleet, in.TargetCapacitySpecification.DefaultTargetCapacityType)
			require.Len(t, in.LaunchTemplateConfigs, 1)
			require.Len(t, in.LaunchTemplateConfigs[0].Overrides, 1)
			assert.Equal(t, rs[tc.want].instanceType, string(in.LaunchTemplateConfigs[0].Overrides[0].InstanceType))
			data := templateOf(t, in, 0)
			assert.Equal(t, ids[tc.want], aws.ToString(data.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId))
			if tc.wantKind == "capacity-block" {
				require.NotNil(t, data.InstanceMarketOptions)
				assert.Equal(t, ec2types.MarketTypeCapacityBlock, data.InstanceMarketOptions.MarketType)
			} else {
				assert.Nil(t, data.InstanceMarketOptions)
			}
			inst := describeInstance(t, got.Status.ProviderID)
			assert.Equal(t, ids[tc.want], aws.ToString(inst.CapacityReservationId))
			assert.Equal(t, ids[tc.want], got.Labels["karpenter.sh/reservation-id"])
			assert.Equal(t, tc.wantKind, got.Labels[awsv1.LabelCapacityReservationType])
			assert.Equal(t, "false", got.Labels[awsv1.LabelCapacityReservationInterruptible])
			cleanup(t, e, got)
		})
	}
}

// TestReservedLaunchTargetsThePlannedReservation: the provisioner writes
// the reservation it planned a NodeClaim on under
// karpenter.k8s.aws/capacity-reservation-id (the CRD refuses
// karpenter.sh/reservation-id in spec.requirements, as upstream's); Create
// launches into that one, not the cheaper reservation with more room it
// would pick unpinned.
func TestReservedLaunchTargetsThePlannedReservation(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)
	tr := newTracker()
	withReservations(e, tr, rec)
	order := e.byPrice(t)
	ids := reserve(t, e, tr, reservation{instanceType: order[0], count: 3}, reservation{instanceType: order[1], count: 1})

	nc := e.nodeClaim(t, "reserved")
	nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
		Key: awsv1.LabelCapacityReservationID, Operator: corev1.NodeSelectorOpIn, Values: []string{ids[1]}})
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	data := templateOf(t, rec.last(t), 0)
	assert.Equal(t, ids[1], aws.ToString(data.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId))
	assert.Equal(t, ids[1], aws.ToString(describeInstance(t, got.Status.ProviderID).CapacityReservationId))
	assert.Equal(t, ids[1], got.Labels[awsv1.LabelCapacityReservationID])
	assert.Equal(t, order[1], got.Labels[corev1.LabelInstanceTypeStable])
	cleanup(t, e, got)
}

// TestUnreservedLaunchesNeverTargetAReservation: a NodeClaim that does not
// allow reserved capacity, a provider without a tracker, or the
// ReservedCapacity gate off launch on-demand beside a reservation with
// room; with the gate on the template says preference none, so EC2 does
// not put the instance in an open reservation either.
func TestUnreservedLaunchesNeverTargetAReservation(t *testing.T) {
	gateOff := coreoptions.New()
	gateOff.FeatureGates.ReservedCapacity = false
	cases := []struct {
		name          string
		capacityTypes []string
		noTracker     bool
		ctx           context.Context
		wantPref      ec2types.CapacityReservationPreference
	}{
		{"on-demand only", []string{"on-demand"}, false, context.Background(), ec2types.CapacityReservationPreferenceNone},
		{"no tracker", []string{"reserved", "on-demand"}, true, context.Background(), ec2types.CapacityReservationPreferenceNone},
		{"gate off", []string{"reserved", "on-demand"}, false, coreoptions.ToContext(context.Background(), gateOff), ec2types.CapacityReservationPreferenceOpen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tr := newTracker()
			if tc.noTracker {
				withReservations(e, nil, ec2API)
			} else {
				withReservations(e, tr, ec2API)
			}
			order := e.byPrice(t)
			// On the cheapest type, so only the capacity type keeps the
			// launch out of it.
			reserve(t, e, tr, reservation{instanceType: order[0], count: 2})

			got, err := e.cp.Create(tc.ctx, e.nodeClaim(t, tc.capacityTypes...))
			require.NoError(t, err)
			assert.Equal(t, "on-demand", got.Labels[v1.CapacityTypeLabelKey])
			assert.NotContains(t, got.Labels, "karpenter.sh/reservation-id")
			inst := describeInstance(t, got.Status.ProviderID)
			assert.Nil(t, inst.CapacityReservationId)
			require.NotNil(t, inst.CapacityReservationSpecification)
			assert.Equal(t, tc.wantPref, inst.CapacityReservationSpecification.CapacityReservationPreference)
			launched, _, _ := tr.calls()
			assert.Empty(t, launched)
			cleanup(t, e, got)
		})
	}
}

// TestReservedOnlyCreateIsIdempotentWhenItFilledTheReservation: the
// solver's reserved NodeClaim allows only reserved capacity; its launch
// takes the reservation's last unit, so a second Create finds no room
// anywhere, and must still return the instance rather than insufficient
// capacity (which would delete the NodeClaim and orphan the instance).
func TestReservedOnlyCreateIsIdempotentWhenItFilledTheReservation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	tr := newTracker()
	withReservations(e, tr, ec2API)
	order := e.byPrice(t)
	id := reserve(t, e, tr, reservation{instanceType: order[0], count: 1})[0]
	nc := e.nodeClaim(t, "reserved")
	nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
		Key: "karpenter.sh/reservation-id", Operator: corev1.NodeSelectorOpIn, Values: []string{id}})

	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, id, aws.ToString(describeInstance(t, got.Status.ProviderID).CapacityReservationId))
	n, _ := tr.Available(id)
	require.Zero(t, n, "the launch took the last unit")

	fleets := local.Calls("ec2", "CreateFleet")
	again, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, got.Status.ProviderID, again.Status.ProviderID)
	assert.Equal(t, id, again.Labels["karpenter.sh/reservation-id"])
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"))
	launched, _, _ := tr.calls()
	assert.Len(t, launched, 1)
	cleanup(t, e, got)

	// With the instance gone and the tracker still at zero, a new
	// reserved-only NodeClaim gets insufficient capacity without a launch.
	tr.mu.Lock()
	tr.room[id] = 0
	tr.mu.Unlock()
	_, err = e.cp.Create(ctx, e.nodeClaim(t, "reserved"))
	assert.True(t, cloudprovider.IsInsufficientCapacityError(err), err)
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"))
}
