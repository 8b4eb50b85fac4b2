package instancetypes_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local  *awslocal.Local
	ec2API *ec2.Client
	prices *pricing.Provider
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	cfg := local.Config(ctx)
	ec2API = ec2.NewFromConfig(cfg)
	prices = pricing.NewProvider(pricing.NewAPI(cfg), ec2API, pricing.Options{Region: cfg.Region})
	err = prices.Refresh(ctx)
	cancel()
	if err != nil {
		local.Stop()
		fmt.Fprintln(os.Stderr, "fetching prices:", err)
		os.Exit(1)
	}
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

// twoZoneClass is an AL2023 class whose subnets are in us-east-1a and
// us-east-1c (two subnets in a, one without a zone ID).
func twoZoneClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		},
		Status: awsv1.EC2NodeClassStatus{Subnets: []awsv1.Subnet{
			{ID: "subnet-1", Zone: "us-east-1a", ZoneID: "use1-az6"},
			{ID: "subnet-2", Zone: "us-east-1c"},
			{ID: "subnet-3", Zone: "us-east-1c", ZoneID: "use1-az2"},
			{ID: "subnet-4", Zone: "us-east-1a", ZoneID: "use1-az6"},
		}},
	}
}

func newProvider(opts instancetypes.Options) *instancetypes.Provider {
	opts.Region = "us-east-1"
	if opts.Settings == (instancetype.Settings{}) {
		opts.Settings = instancetype.DefaultSettings()
	}
	return instancetypes.NewProvider(ec2API, prices, opts)
}

func byName(its []*scheduling.InstanceType) map[string]*scheduling.InstanceType {
	out := make(map[string]*scheduling.InstanceType, len(its))
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}

// offeredZones asks EC2 directly, in one call filtered by the class's
// zones (the provider lists every zone's offerings, paged), where each type
// is offered.
func offeredZones(t *testing.T, zones ...string) map[string]map[string]bool {
	out, err := ec2API.DescribeInstanceTypeOfferings(context.Background(), &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: aws.String("location"), Values: zones}},
	})
	require.NoError(t, err)
	offered := map[string]map[string]bool{}
	for _, o := range out.InstanceTypeOfferings {
		it := string(o.InstanceType)
		if offered[it] == nil {
			offered[it] = map[string]bool{}
		}
		offered[it][aws.ToString(o.Location)] = true
	}
	return offered
}

func TestOfferingsPerClassZoneAndCapacityTypeWithPrices(t *testing.T) {
	ctx := context.Background()
	p := newProvider(instancetypes.Options{})
	beforeTypes, beforeOfferings := local.Calls("ec2", "DescribeInstanceTypes"), local.Calls("ec2", "DescribeInstanceTypeOfferings")
	its, err := p.List(ctx, twoZoneClass("two-zones"))
	require.NoError(t, err)
	// Paged: 100 types per page, 1000 offerings per page.
	assert.Greater(t, local.Calls("ec2", "DescribeInstanceTypes")-beforeTypes, 5)
	assert.Greater(t, local.Calls("ec2", "DescribeInstanceTypeOfferings")-beforeOfferings, 1)
	require.Greater(t, len(its), 500)

	types := byName(its)
	for i := 1; i < len(its); i++ {
		require.Less(t, its[i-1].Name, its[i].Name, "sorted by name")
	}
	wantZones := map[string]bool{"us-east-1a": true, "us-east-1c": true}
	spotSeen, zoneIDSeen := 0, 0
	offered := offeredZones(t, "us-east-1a", "us-east-1c")
	for _, it := range its {
		zones := offered[it.Name]
		if !zones["us-east-1a"] && !zones["us-east-1c"] {
			t.Fatalf("%s is offered in neither zone of the class", it.Name)
		}
		zoneReq := it.Requirements.Get(scheduling.LabelZone)
		for z := range wantZones {
			require.Equal(t, zones[z], zoneReq.Has(z), "%s zone label %s", it.Name, z)
		}
		for _, o := range it.Offerings {
			require.True(t, wantZones[o.Zone], "%s offering in %s, not a zone of the class", it.Name, o.Zone)
			require.Contains(t, []string{"on-demand", "spot"}, o.CapacityType)
			require.Equal(t, zones[o.Zone] && !strings.HasPrefix(it.Name, "a1.") && o.Price > 0, o.Available,
				"%s %s %s available", it.Name, o.Zone, o.CapacityType)
			if o.CapacityType == "spot" {
				want, _ := local.SpotPrice("us-east-1", o.Zone, it.Name)
				require.Equal(t, want, o.Price, "%s spot in %s", it.Name, o.Zone)
				spotSeen++
			} else if want, ok := prices.OnDemandPrice(it.Name); ok {
				require.Equal(t, want, o.Price, "%s on-demand", it.Name)
			}
			if o.Requirements.Has(awsv1.LabelTopologyZoneID) {
				zoneIDSeen++
				require.Equal(t, map[string]string{"us-east-1a": "use1-az6", "us-east-1c": "use1-az2"}[o.Zone],
					o.Requirements.Get(awsv1.LabelTopologyZoneID).Any())
			}
		}
	}
	assert.Greater(t, spotSeen, 500)
	assert.Greater(t, zoneIDSeen, 500)

	m5 := types["m5.large"]
	require.NotNil(t, m5)
	require.Len(t, m5.Offerings, 4, "2 zones × on-demand and spot")
	od, _ := local.OnDemandPrice("m5.large", "us-east-1")
	for _, o := range m5.Offerings {
		assert.True(t, o.Available, "%s %s", o.Zone, o.CapacityType)
		if o.CapacityType == "on-demand" {
			assert.Equal(t, od, o.Price)
		} else {
			assert.Less(t, o.Price, od)
		}
	}
	assert.Equal(t, []string{"us-east-1a", "us-east-1c"}, m5.Requirements.Get(scheduling.LabelZone).Values())
	// AL2023 cannot run a1: listed, never available.
	if a1 := types["a1.large"]; a1 != nil {
		for _, o := range a1.Offerings {
			assert.False(t, o.Available)
		}
	}
}

func TestUnavailableOfferingIsMarkedAndRecovers(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	ice := cloudprovider.NewUnavailableOfferings(clk, time.Minute)
	p := newProvider(instancetypes.Options{Unavailable: ice, Clock: clk})
	nc := twoZoneClass("ice")
	before, err := p.List(ctx, nc)
	require.NoError(t, err)

	key := cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	ice.MarkUnavailable(key)
	after, err := p.List(ctx, nc)
	require.NoError(t, err)
	m5 := byName(after)["m5.large"]
	for _, o := range m5.Offerings {
		k := cloudprovider.Key(m5, &o)
		assert.Equal(t, k != key, o.Available, "%v", k)
	}
	// Only the touched type is copied; the cached list is left alone.
	assert.True(t, byName(before)["m5.large"].Offerings[2].Available || byName(before)["m5.large"].Offerings[3].Available)
	for _, o := range byName(before)["m5.large"].Offerings {
		assert.True(t, o.Available, "the shared base list must not change")
	}
	assert.Same(t, byName(before)["c5.large"], byName(after)["c5.large"])
	assert.NotSame(t, byName(before)["m5.large"], m5)

	// Once the entry expires the offering is available again.
	clk.Step(2 * time.Minute)
	again, err := p.List(ctx, nc)
	require.NoError(t, err)
	for _, o := range byName(again)["m5.large"].Offerings {
		assert.True(t, o.Available)
	}
}

type counts map[string]int

func (c counts) Available(id string) (int, bool) { n, ok := c[id]; return n, ok }

func TestReservedOfferingsFromClassStatus(t *testing.T) {
	ctx := context.Background()
	cs := counts{"cr-0123456789abcdef0": 2, "cr-0000000000000000b": 0}
	p := newProvider(instancetypes.Options{Reservations: cs})
	nc := twoZoneClass("reserved")
	nc.Status.CapacityReservations = []awsv1.CapacityReservation{
		{ID: "cr-0123456789abcdef0", AvailabilityZone: "us-east-1a", InstanceType: "m5.large", InstanceMatchCriteria: "targeted", OwnerID: "123456789012"},
		{ID: "cr-0000000000000000b", AvailabilityZone: "us-east-1c", InstanceType: "m5.large", InstanceMatchCriteria: "open", OwnerID: "123456789012", ReservationType: awsv1.CapacityReservationTypeCapacityBlock},
		{ID: "cr-000000000000000cc", AvailabilityZone: "us-east-1c", InstanceType: "c5.large", InstanceMatchCriteria: "open", OwnerID: "123456789012", State: awsv1.CapacityReservationStateExpiring},
		{ID: "cr-000000000000000dd", AvailabilityZone: "us-east-1b", InstanceType: "c5.large", InstanceMatchCriteria: "open", OwnerID: "123456789012"},
	}
	its, err := p.List(ctx, nc)
	require.NoError(t, err)
	types := byName(its)
	od, _ := prices.OnDemandPrice("m5.large")
	reserved := func(it *scheduling.InstanceType) map[string]scheduling.Offering {
		out := map[string]scheduling.Offering{}
		for _, o := range it.Offerings {
			if o.CapacityType == scheduling.CapacityTypeReserved {
				out[o.ReservationID] = o
			}
		}
		return out
	}
	m5 := reserved(types["m5.large"])
	require.Len(t, m5, 2)
	a := m5["cr-0123456789abcdef0"]
	assert.True(t, a.Available)
	assert.Equal(t, 2, a.ReservationCapacity)
	assert.Equal(t, "us-east-1a", a.Zone)
	assert.InDelta(t, od/10_000_000, a.Price, 1e-12)
	assert.Less(t, a.Price, od)
	assert.Equal(t, "default", a.Requirements.Get(awsv1.LabelCapacityReservationType).Any())
	assert.Equal(t, "use1-az6", a.Requirements.Get(awsv1.LabelTopologyZoneID).Any())
	assert.False(t, m5["cr-0000000000000000b"].Available, "no instances left")
	assert.Equal(t, "capacity-block", m5["cr-0000000000000000b"].Requirements.Get(awsv1.LabelCapacityReservationType).Any())
	assert.True(t, types["m5.large"].Requirements.Get(scheduling.LabelCapacityType).Has("reserved"))

	c5 := reserved(types["c5.large"])
	require.Len(t, c5, 2)
	assert.False(t, c5["cr-000000000000000cc"].Available, "expiring")
	assert.False(t, c5["cr-000000000000000dd"].Available, "zone not in the class (and count unknown)")

	// A launch uses a reservation: the next list sees the new count.
	cs["cr-0123456789abcdef0"] = 0
	its, err = p.List(ctx, nc)
	require.NoError(t, err)
	assert.False(t, reserved(byName(its)["m5.large"])["cr-0123456789abcdef0"].Available)
}

func TestThrottledDescribeInstanceTypesIsRetried(t *testing.T) {
	ctx := context.Background()
	// The pages of one listing, unthrottled.
	before := local.Calls("ec2", "DescribeInstanceTypes")
	require.NoError(t, newProvider(instancetypes.Options{}).UpdateInstanceTypes(ctx))
	pages := local.Calls("ec2", "DescribeInstanceTypes") - before
	require.Greater(t, pages, 5)

	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeInstanceTypes", Kind: awslocal.FaultThrottle, Count: 2})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeInstanceTypes") })
	p := newProvider(instancetypes.Options{})
	before = local.Calls("ec2", "DescribeInstanceTypes")
	its, err := p.List(ctx, twoZoneClass("throttled"))
	require.NoError(t, err)
	assert.Greater(t, len(its), 500)
	assert.Equal(t, pages+2, local.Calls("ec2", "DescribeInstanceTypes")-before, "each throttled attempt retried once more")
}

func TestThrottlingBeyondRetriesKeepsTheLastTypes(t *testing.T) {
	ctx := context.Background()
	p := newProvider(instancetypes.Options{})
	require.NoError(t, p.Refresh(ctx))
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeInstanceTypes", Kind: awslocal.FaultThrottle})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeInstanceTypes") })
	require.Error(t, p.UpdateInstanceTypes(ctx))
	its, err := p.List(ctx, twoZoneClass("kept"))
	require.NoError(t, err)
	assert.Greater(t, len(its), 500)

	// Without any data yet, List reports the failure.
	_, err = newProvider(instancetypes.Options{}).List(ctx, twoZoneClass("none"))
	require.Error(t, err)
}

func TestTickRefreshesEveryTwelveHours(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := newProvider(instancetypes.Options{Clock: clk})
	calls := func() int { return local.Calls("ec2", "DescribeInstanceTypes") }
	before := calls()
	require.NoError(t, p.Tick(ctx))
	assert.Greater(t, calls(), before)
	before = calls()
	clk.Step(instancetypes.RefreshInterval - time.Second)
	require.NoError(t, p.Tick(ctx))
	assert.Equal(t, before, calls())
	clk.Step(time.Second)
	require.NoError(t, p.Tick(ctx))
	assert.Greater(t, calls(), before)
}

// TestNodePoolsSharingAClassShareOneList: 20 NodePools on one EC2NodeClass
// get the same slice (same backing array, same instance types), the cache
// holds one list for them, and a class that changes gets a new one.
func TestNodePoolsSharingAClassShareOneList(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	ice := cloudprovider.NewUnavailableOfferings(clk, 0)
	p := newProvider(instancetypes.Options{Unavailable: ice, Clock: clk})
	env := newPools(20, twoZoneClass("shared"))
	lists := make([][]*scheduling.InstanceType, len(env.pools))
	var wg sync.WaitGroup
	for i, np := range env.pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			its, err := env.getInstanceTypes(ctx, p, np)
			assert.NoError(t, err)
			lists[i] = its
		}()
	}
	wg.Wait()
	require.NotEmpty(t, lists[0])
	for i := 1; i < len(lists); i++ {
		require.Len(t, lists[i], len(lists[0]))
		require.Same(t, &lists[0][0], &lists[i][0], "pool %d has its own slice", i)
		require.Same(t, &lists[0][0].Offerings[0], &lists[i][0].Offerings[0])
	}
	assert.Equal(t, 1, p.CachedLists())

	// An ICE mark makes one new overlay, still shared by all pools.
	ice.MarkUnavailable(cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"})
	first, err := env.getInstanceTypes(ctx, p, env.pools[0])
	require.NoError(t, err)
	require.NotSame(t, &lists[0][0], &first[0])
	for _, np := range env.pools[1:] {
		its, err := env.getInstanceTypes(ctx, p, np)
		require.NoError(t, err)
		require.Same(t, &first[0], &its[0])
	}
	assert.Equal(t, 1, p.CachedLists())

	// A class with different kubelet settings gets its own list; the old
	// one is dropped once it expires.
	other := twoZoneClass("other")
	other.Spec.Kubelet = awsv1.KubeletConfiguration{"maxPods": {Raw: []byte("20")}}
	its, err := p.List(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, 2, p.CachedLists())
	assert.NotSame(t, &first[0], &its[0])
	clk.Step(instancetypes.CacheTTL)
	_, err = p.List(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, 1, p.CachedLists())
}

// pools is N NodePools referencing one EC2NodeClass, and the lookup the
// cloud provider does from a NodePool to its class.
type pools struct {
	pools   []*v1.NodePool
	classes map[string]*awsv1.EC2NodeClass
}

func newPools(n int, nc *awsv1.EC2NodeClass) *pools {
	out := &pools{classes: map[string]*awsv1.EC2NodeClass{nc.Name: nc}}
	for i := range n {
		np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%02d", i)}}
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: nc.Name}
		out.pools = append(out.pools, np)
	}
	return out
}

func (e *pools) getInstanceTypes(ctx context.Context, p *instancetypes.Provider, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return p.List(ctx, e.classes[np.Spec.Template.Spec.NodeClassRef.Name])
}

// The reserved offerings follow the capacity-reservation tracker: seeded
// from DescribeCapacityReservations, then launches, terminations and
// interruptions between describes.
func TestReservedOfferingsFollowTheReservationTracker(t *testing.T) {
	ctx := context.Background()
	cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	tracker := capacityreservation.NewProvider(ec2API, nil)
	found, err := tracker.List(ctx, awsv1.CapacityReservationSelectorTerm{ID: cr.ID})
	require.NoError(t, err)
	status, err := capacityreservation.Status(time.Now(), found)
	require.NoError(t, err)
	nc := twoZoneClass("tracked")
	nc.Status.CapacityReservations = status

	p := newProvider(instancetypes.Options{Reservations: tracker})
	offering := func() scheduling.Offering {
		t.Helper()
		its, err := p.List(ctx, nc)
		require.NoError(t, err)
		for _, o := range byName(its)["m5.large"].Offerings {
			if o.ReservationID == cr.ID {
				return o
			}
		}
		t.Fatalf("no reserved offering for %s", cr.ID)
		return scheduling.Offering{}
	}
	steps := []struct {
		name      string
		mark      func(string)
		available bool
		capacity  int
	}{
		{"seeded from EC2", nil, true, 2},
		{"one launched", tracker.MarkLaunched, true, 1},
		{"both launched", tracker.MarkLaunched, false, 0},
		{"one terminated", tracker.MarkTerminated, true, 1},
		{"interrupted", tracker.MarkUnavailable, false, 0},
	}
	for _, s := range steps {
		if s.mark != nil {
			s.mark(cr.ID)
		}
		o := offering()
		assert.Equal(t, s.available, o.Available, s.name)
		assert.Equal(t, s.capacity, o.ReservationCapacity, s.name)
		assert.Equal(t, scheduling.CapacityTypeReserved, o.CapacityType, s.name)
	}
}

// shiftedZones is a zonal shift provider answering from a set of zone IDs.
type shiftedZones map[string]bool

func (s shiftedZones) IsShifted(zoneID string) bool { return s[zoneID] }

// TestZonalShiftMakesTheZoneUnavailable: while us-east-1a (use1-az6) is
// shifted away from, every offering there, on-demand, spot and reserved, is
// unavailable and the other zone's are untouched; when the shift ends they
// are available again without waiting for the list's cache.
func TestZonalShiftMakesTheZoneUnavailable(t *testing.T) {
	ctx := context.Background()
	shifted := shiftedZones{}
	p := newProvider(instancetypes.Options{ZonalShifts: shifted, Reservations: counts{"cr-0123456789abcdef0": 2}})
	nc := twoZoneClass("shifted")
	nc.Status.CapacityReservations = []awsv1.CapacityReservation{{ID: "cr-0123456789abcdef0", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", InstanceMatchCriteria: "targeted", OwnerID: "123456789012"}}
	available := func() map[string]int {
		its, err := p.List(ctx, nc)
		require.NoError(t, err)
		out := map[string]int{}
		for _, it := range its {
			for _, o := range it.Offerings {
				if o.Available {
					out[o.Zone+"/"+o.CapacityType]++
				}
			}
		}
		return out
	}
	before := available()
	require.Positive(t, before["us-east-1a/on-demand"])
	require.Positive(t, before["us-east-1a/spot"])
	require.Equal(t, 1, before["us-east-1a/reserved"])

	shifted["use1-az6"] = true
	during := available()
	for k, n := range during {
		require.NotContains(t, k, "us-east-1a", "%d offerings available in the shifted zone (%s)", n, k)
	}
	require.Equal(t, before["us-east-1c/on-demand"], during["us-east-1c/on-demand"])
	require.Equal(t, before["us-east-1c/spot"], during["us-east-1c/spot"])

	delete(shifted, "use1-az6")
	require.Equal(t, before, available())
}

// TestDiscoveredMemoryReplacesTheEstimate: a registered m5.large of the
// class's current image reports its memory (more than the
// VM_MEMORY_OVERHEAD_PERCENT estimate, as real nodes do); from then on the class's m5.large
// has that capacity (overhead unchanged) while other types, and classes
// with other AMIs, keep the estimate. A larger report, or one from a node
// of an image the class no longer maps, changes nothing; after 60 days the
// estimate is back.
func TestDiscoveredMemoryReplacesTheEstimate(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := newProvider(instancetypes.Options{Clock: clk})
	amd64 := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	nc := twoZoneClass("discovered")
	nc.Status.AMIs = []awsv1.AMI{{ID: "ami-0000000000000new1", Requirements: amd64}}
	other := twoZoneClass("other-amis")
	other.Status.AMIs = []awsv1.AMI{{ID: "ami-00000000000other1", Requirements: amd64}}
	memoryOf := func(class *awsv1.EC2NodeClass, name string) resource.Quantity {
		its, err := p.List(ctx, class)
		require.NoError(t, err)
		return byName(its)[name].Capacity[corev1.ResourceMemory]
	}
	its, err := p.List(ctx, nc)
	require.NoError(t, err)
	estimate := byName(its)["m5.large"].Capacity[corev1.ResourceMemory]
	overhead := byName(its)["m5.large"].Overhead
	node := func(memory, image string) (*corev1.Node, string) {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64"}},
			Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}},
		}, image
	}
	real := resource.MustParse("7910260Ki")
	require.NotZero(t, real.Cmp(estimate), "the report differs from the estimate %s", estimate.String())

	n, img := node("7910260Ki", "ami-0000000000000new1")
	require.True(t, p.RecordCapacity(ctx, n, img, nc))
	got := memoryOf(nc, "m5.large")
	require.Zero(t, got.Cmp(real), "m5.large now has the node's memory, got %s", got.String())
	its, _ = p.List(ctx, nc)
	require.Equal(t, overhead, byName(its)["m5.large"].Overhead)
	c5 := memoryOf(nc, "c5.large")
	require.NotZero(t, c5.Cmp(real))
	otherMem := memoryOf(other, "m5.large")
	require.Zero(t, otherMem.Cmp(estimate), "a class with other AMIs keeps the estimate")

	n, img = node("7950000Ki", "ami-0000000000000new1")
	require.False(t, p.RecordCapacity(ctx, n, img, nc), "a larger report does not raise it")
	n, img = node("7000000Ki", "ami-00000000000000old")
	require.False(t, p.RecordCapacity(ctx, n, img, nc), "a node of an image the class no longer maps says nothing")
	got = memoryOf(nc, "m5.large")
	require.Zero(t, got.Cmp(real))

	clk.Step(instancetypes.DiscoveredCapacityTTL + time.Hour)
	got = memoryOf(nc, "m5.large")
	require.Zero(t, got.Cmp(estimate), "after 60 days the estimate is back, got %s", got.String())
}

// TestListDoesNotWaitForARefresh: once instance types are loaded, a List
// (a provisioning round) answers from the loaded data while a refresh is
// stuck on a slow EC2.
func TestListDoesNotWaitForARefresh(t *testing.T) {
	ctx := context.Background()
	p := newProvider(instancetypes.Options{})
	require.NoError(t, p.Refresh(ctx))
	fault, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeInstanceTypes", Kind: awslocal.FaultLatency, Latency: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeInstanceTypes") })

	refreshCtx, cancel := context.WithCancel(ctx)
	refreshed := make(chan error, 1)
	go func() { refreshed <- p.Refresh(refreshCtx) }()
	t.Cleanup(func() { cancel(); <-refreshed })
	// Wait until the refresh is inside EC2's slow answer.
	require.Eventually(t, func() bool {
		for _, f := range local.Faults() {
			if f.ID == fault.ID && f.Hits > 0 {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond)

	its, err := p.List(ctx, twoZoneClass("during-refresh"))
	require.NoError(t, err)
	assert.Greater(t, len(its), 500)
	select {
	case err := <-refreshed:
		t.Fatalf("the refresh ended (%v) before the List returned: the List did not overlap it", err)
	default:
	}
}

// TestStartUpLoadIsSharedWithTheFirstList: the start-up tick and a round's
// List that arrives while nothing is loaded yet fetch EC2's instance types
// once between them, whichever comes first.
func TestStartUpLoadIsSharedWithTheFirstList(t *testing.T) {
	ctx := context.Background()
	calls := func() int { return local.Calls("ec2", "DescribeInstanceTypes") }
	before := calls()
	require.NoError(t, newProvider(instancetypes.Options{}).Refresh(ctx))
	pages := calls() - before

	p := newProvider(instancetypes.Options{})
	assert.False(t, p.Loaded())
	before = calls()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); assert.NoError(t, p.Tick(ctx)) }()
	go func() {
		defer wg.Done()
		_, err := p.List(ctx, twoZoneClass("first-round"))
		assert.NoError(t, err)
	}()
	wg.Wait()
	assert.True(t, p.Loaded())
	assert.Equal(t, pages, calls()-before, "one load's pages")
}

// TestFailedTickIsRetriedSooner: a tick whose fetch failed is retried after
// RetryInterval, not after RefreshInterval.
func TestFailedTickIsRetriedSooner(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := newProvider(instancetypes.Options{Clock: clk})
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeInstanceTypeOfferings", Kind: awslocal.FaultServerError})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeInstanceTypeOfferings") })
	require.Error(t, p.Tick(ctx))
	assert.False(t, p.Loaded())
	local.ClearFaults("ec2", "DescribeInstanceTypeOfferings")
	clk.Step(instancetypes.RetryInterval)
	require.NoError(t, p.Tick(ctx))
	assert.True(t, p.Loaded())
}
