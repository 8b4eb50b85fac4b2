package instance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// launchEnv is a launch template and a subnet in us-east-1a on the local
// AWS, and a cluster name of its own.
type launchEnv struct {
	cluster string
	lt      string
	image   string
	subnet  string
}

func newLaunchEnv(t *testing.T) *launchEnv {
	t.Helper()
	ctx := context.Background()
	e := &launchEnv{cluster: "c-" + uuid.NewString()[:8]}
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	e.image = img.ID
	subnets, err := ec2API.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, subnets.Subnets)
	e.subnet = aws.ToString(subnets.Subnets[0].SubnetId)
	e.lt = "karpenter.k8s.aws/" + e.cluster
	_, err = ec2API.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &e.lt,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: &e.image}})
	require.NoError(t, err)
	t.Cleanup(func() {
		local.ClearCapacity()
		p := instance.NewProvider(ec2API, e.cluster, nil)
		insts, err := p.List(ctx)
		if err != nil {
			return
		}
		for _, i := range insts {
			_ = p.Delete(ctx, i.ID)
		}
	})
	return e
}

func (e *launchEnv) request(nodeClaim, instanceType string) instance.Request {
	return instance.Request{
		NodeClaimName: nodeClaim, NodePoolName: "default", NodeClassName: "default",
		CapacityType: instance.CapacityTypeOnDemand,
		Configs: []instance.LaunchConfig{{LaunchTemplateName: e.lt, ImageID: e.image, Overrides: []instance.Override{
			{InstanceType: instanceType, Zone: "us-east-1a", SubnetID: e.subnet, Price: 0.1},
		}}},
	}
}

type outcome struct {
	inst *instance.Instance
	err  error
}

// createAll calls Create for every request at once.
// wideWindow batches launches within 2 s of each other: each Create looks
// for its instance (a DescribeInstances) before it joins a batch, and on a
// loaded machine those calls spread concurrent launches beyond the 35 ms
// production window.
var wideWindow = instance.WithFleetBatchWindow(2*time.Second, 10*time.Second)

func createAll(p *instance.Provider, reqs []instance.Request) []outcome {
	out := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := p.Create(context.Background(), r)
			out[i] = outcome{inst, err}
		}()
	}
	wg.Wait()
	return out
}

// describeTags are the tags of the cluster's live instances, by id.
func (e *launchEnv) describeTags(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	res, err := ec2API.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + e.cluster), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: instance.States},
	}})
	require.NoError(t, err)
	for _, r := range res.Reservations {
		for _, i := range r.Instances {
			tags := map[string]string{}
			for _, tag := range i.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			out[aws.ToString(i.InstanceId)] = tags
		}
	}
	return out
}

// TestBatchedLaunches: identical launches that arrive together share one
// CreateFleet, every NodeClaim gets its own instance tagged with its name,
// different launches are not merged, and when EC2 has fewer instances than
// asked the NodeClaims left over get insufficient capacity.
func TestBatchedLaunches(t *testing.T) {
	cases := []struct {
		name       string
		types      []string // one launch per entry, all at once
		capacity   int      // m5.large capacity in us-east-1a, 0 for unlimited
		wantFleets int
		wantICE    int
	}{
		{"one launch is one plain CreateFleet", []string{"m5.large"}, 0, 1, 0},
		{"six identical launches are one CreateFleet", []string{"m5.large", "m5.large", "m5.large", "m5.large", "m5.large", "m5.large"}, 0, 1, 0},
		{"different requests are not merged", []string{"m5.large", "c5.large", "m5.large", "c5.large"}, 0, 2, 0},
		{"partial fulfilment: the rest get insufficient capacity", []string{"m5.large", "m5.large", "m5.large", "m5.large"}, 2, 1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLaunchEnv(t)
			if tc.capacity > 0 {
				require.NoError(t, local.SetCapacity("m5.large", "us-east-1a", "on-demand", tc.capacity))
			}
			p := instance.NewProvider(ec2API, e.cluster, nil, wideWindow)
			var reqs []instance.Request
			for i, it := range tc.types {
				reqs = append(reqs, e.request(e.cluster+"-nc-"+string(rune('a'+i)), it))
			}
			fleets := local.Calls("ec2", "CreateFleet")
			batches, merged := batchSizes(t)
			outs := createAll(p, reqs)
			assert.Equal(t, tc.wantFleets, local.Calls("ec2", "CreateFleet")-fleets, "CreateFleet calls")
			nowBatches, nowMerged := batchSizes(t)
			assert.Equal(t, uint64(tc.wantFleets), nowBatches-batches, "one batch_size sample per fleet")
			assert.Equal(t, float64(len(tc.types)), nowMerged-merged, "batch_size adds up to the launches")

			// The claims are written after the NodeClaims got their instances.
			p.WaitForClaims()
			tags := e.describeTags(t)
			ice, seen := 0, map[string]bool{}
			for i, o := range outs {
				if o.err != nil {
					require.True(t, cloudprovider.IsInsufficientCapacityError(o.err), "%s: %v", reqs[i].NodeClaimName, o.err)
					ice++
					continue
				}
				require.False(t, seen[o.inst.ID], "instance %s handed out twice", o.inst.ID)
				seen[o.inst.ID] = true
				assert.Equal(t, tc.types[i], o.inst.Type)
				assert.Equal(t, "us-east-1a", o.inst.Zone)
				assert.Equal(t, e.image, o.inst.ImageID)
				assert.Equal(t, reqs[i].NodeClaimName, tags[o.inst.ID]["karpenter.sh/nodeclaim"], "EC2 tags %s with its NodeClaim", o.inst.ID)
				assert.Equal(t, reqs[i].NodeClaimName, o.inst.Tags["karpenter.sh/nodeclaim"])
				assert.Equal(t, "default", tags[o.inst.ID]["karpenter.sh/nodepool"])
				if tc.wantFleets < len(tc.types) {
					assert.Contains(t, instance.Members(tags[o.inst.ID]), reqs[i].NodeClaimName, "a batched instance lists its batch")
				}
			}
			assert.Equal(t, tc.wantICE, ice)
			assert.Len(t, tags, len(outs)-ice, "no instance without a NodeClaim")

			// Create stays idempotent: asking again returns the same instances.
			again := createAll(p, reqs)
			assert.GreaterOrEqual(t, tc.wantFleets+ice, local.Calls("ec2", "CreateFleet")-fleets, "no CreateFleet for a NodeClaim that has its instance")
			for i, o := range outs {
				if o.err == nil {
					require.NoError(t, again[i].err)
					assert.Equal(t, o.inst.ID, again[i].inst.ID)
				}
			}
		})
	}
}

// deadTags is the EC2 client of a controller that dies right after a
// batched CreateFleet, while its claims are on the wire: no CreateTags
// answers until dead is closed, and then it fails, so no instance gets its
// NodeClaim tag.
type deadTags struct {
	*ec2.Client
	dead <-chan struct{}
}

func (d deadTags) CreateTags(ctx context.Context, _ *ec2.CreateTagsInput, _ ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	select {
	case <-d.dead:
	case <-ctx.Done():
	}
	return nil, errors.New("the controller died")
}

// TestBatchedLaunchSurvivesACrash: every NodeClaim of a batched CreateFleet
// gets its instance as soon as the fleet returns, without waiting for its
// claim (CreateTags) to land, and the controller dies before any claim
// does. A new provider (the restarted controller) lists each instance
// under the NodeClaim it was handed to, a NodeClaim whose Create runs again
// (its status was lost in the crash) adopts that same instance without a
// new CreateFleet and claims it, and an instance whose NodeClaim never
// comes back is listed without a name for garbage collection, even after
// another of the batch's instances is terminated. It holds for a batch
// listed in member tags and for one listed in the karpenter.sh/nodeclaim
// value (a class with 45 tags leaves no room for a member tag).
func TestBatchedLaunchSurvivesACrash(t *testing.T) {
	for _, classTags := range []int{0, 45} {
		t.Run(fmt.Sprintf("%d class tags", classTags), func(t *testing.T) { batchedLaunchSurvivesACrash(t, classTags) })
	}
}

func batchedLaunchSurvivesACrash(t *testing.T, classTags int) {
	e := newLaunchEnv(t)
	var reqs []instance.Request
	for _, n := range []string{"a", "b", "c", "d"} {
		r := e.request(e.cluster+"-"+n, "m5.large")
		r.ClassTags = map[string]string{}
		for i := range classTags {
			r.ClassTags[fmt.Sprintf("team/tag-%02d", i)] = "v"
		}
		reqs = append(reqs, r)
	}
	fleets := local.Calls("ec2", "CreateFleet")
	dead := make(chan struct{})
	t.Cleanup(func() { close(dead) })
	created := make(chan []outcome, 1)
	go func() {
		created <- createAll(instance.NewProvider(deadTags{ec2API, dead}, e.cluster, nil, wideWindow), reqs)
	}()
	var outs []outcome
	select {
	case outs = <-created:
	case <-time.After(30 * time.Second):
		t.Fatal("Create waited for its instance's claim")
	}
	handed := map[string]string{} // instance → the NodeClaim it was handed to
	for i, o := range outs {
		require.NoError(t, o.err)
		assert.Equal(t, reqs[i].NodeClaimName, o.inst.Tags["karpenter.sh/nodeclaim"])
		require.Empty(t, handed[o.inst.ID], "instance %s handed out twice", o.inst.ID)
		handed[o.inst.ID] = reqs[i].NodeClaimName
	}
	require.Equal(t, 1, local.Calls("ec2", "CreateFleet")-fleets)
	tags := e.describeTags(t)
	require.Len(t, tags, 4)
	for id, tg := range tags {
		assert.True(t, instance.IsUnclaimed(tg["karpenter.sh/nodeclaim"]), id)
		user := 0
		for k := range tg {
			if !strings.HasPrefix(k, "aws:") {
				user++
			}
		}
		assert.LessOrEqual(t, user, 50, id)
		_, listed := tg[instance.TagLaunchMembersPrefix+"0"]
		assert.Equal(t, classTags == 0, listed, "member tags only when there is room for them")
	}

	restarted := instance.NewProvider(ec2API, e.cluster, nil)
	listed := func() map[string]string {
		insts, err := restarted.List(context.Background())
		require.NoError(t, err)
		out := map[string]string{}
		for _, i := range insts {
			out[i.ID] = i.Tags["karpenter.sh/nodeclaim"]
		}
		return out
	}
	assert.Equal(t, handed, listed(), "garbage collection sees each instance as its NodeClaim's")
	idOf := map[string]string{}
	for id, nc := range handed {
		idOf[nc] = id
	}

	// a and c come back first (their Create runs again: the crash lost
	// their status); b's NodeClaim is gone, so nobody claims its
	// instance; d's NodeClaim stored its provider ID and comes back last.
	for _, i := range []int{2, 0} {
		inst, err := restarted.Create(context.Background(), reqs[i])
		require.NoError(t, err)
		assert.Equal(t, idOf[reqs[i].NodeClaimName], inst.ID, "%s adopts the instance it was handed", reqs[i].NodeClaimName)
	}
	assert.Equal(t, 1, local.Calls("ec2", "CreateFleet")-fleets, "no second launch")
	tags = e.describeTags(t)
	assert.Equal(t, reqs[0].NodeClaimName, tags[idOf[reqs[0].NodeClaimName]]["karpenter.sh/nodeclaim"])
	assert.Equal(t, reqs[2].NodeClaimName, tags[idOf[reqs[2].NodeClaimName]]["karpenter.sh/nodeclaim"])

	// Garbage collection terminates b's instance (its NodeClaim is gone):
	// d keeps its own.
	bID, dID := idOf[reqs[1].NodeClaimName], idOf[reqs[3].NodeClaimName]
	require.NoError(t, restarted.Delete(context.Background(), bID))
	require.Eventually(t, func() bool { _, live := listed()[bID]; return !live }, 30*time.Second, 200*time.Millisecond)
	assert.Equal(t, reqs[3].NodeClaimName, listed()[dID])
	inst, err := restarted.Create(context.Background(), reqs[3])
	require.NoError(t, err)
	assert.Equal(t, dID, inst.ID)
	assert.Equal(t, 1, local.Calls("ec2", "CreateFleet")-fleets, "still one launch for the whole batch")
}

// TestBatchedLaunchCancelled: a NodeClaim whose context ends while its
// batch window is open launches nothing.
func TestBatchedLaunchCancelled(t *testing.T) {
	e := newLaunchEnv(t)
	p := instance.NewProvider(ec2API, e.cluster, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fleets := local.Calls("ec2", "CreateFleet")
	_, err := p.Create(ctx, e.request(e.cluster+"-a", "m5.large"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, local.Calls("ec2", "CreateFleet")-fleets)
	assert.Empty(t, e.describeTags(t))
}

// batchSizes reads the create_fleet batch_size histogram: its sample count
// and sum.
func batchSizes(t *testing.T) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	h, ok := metrics.BatcherBatchSize.WithLabelValues("create_fleet").(prometheus.Histogram)
	require.True(t, ok)
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestBatchedClaimsWaitOutConsistencyOnce: EC2 does not know a batch's
// instances for a moment after CreateFleet returns them (the local AWS's
// eventual consistency, seen by a principal's key), and each claim that
// EC2 refuses as unknown still spends a CreateTags token. The batch's
// first claim waits EC2 out alone and the others follow it, so eight
// claims cost eight CreateTags and the first one's few retries, not
// retries for each.
func TestBatchedClaimsWaitOutConsistencyOnce(t *testing.T) {
	e := newLaunchEnv(t)
	name := "claims-" + uuid.NewString()[:8]
	creds, err := local.AddPrincipal(awslocal.Principal{Name: name, Policies: []awslocal.Policy{awslocal.AllowAll()}})
	require.NoError(t, err)
	api := ec2.NewFromConfig(local.ConfigWith(context.Background(), "", creds))
	// The launch template is as new to the principal as the instances will
	// be: let it settle first, so that only the instances are unknown.
	require.Eventually(t, func() bool {
		_, err := api.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{e.lt}})
		return err == nil
	}, 10*time.Second, 100*time.Millisecond)
	p := instance.NewProvider(api, e.cluster, nil, wideWindow)
	var reqs []instance.Request
	for i := range 8 {
		reqs = append(reqs, e.request(fmt.Sprintf("%s-nc-%d", e.cluster, i), "m5.large"))
	}
	fleets := local.Calls("ec2", "CreateFleet")
	for _, o := range createAll(p, reqs) {
		require.NoError(t, o.err)
	}
	require.Equal(t, 1, local.Calls("ec2", "CreateFleet")-fleets, "one batch")
	p.WaitForClaims()
	tags := e.describeTags(t)
	require.Len(t, tags, len(reqs))
	for id, tg := range tags {
		assert.False(t, instance.IsUnclaimed(tg["karpenter.sh/nodeclaim"]), "%s is claimed", id)
	}
	calls := local.CallsBy(name)["ec2:CreateTags"]
	t.Logf("%d claims took %d CreateTags calls", len(reqs), calls)
	assert.LessOrEqual(t, calls, len(reqs)+5, "only the first claim waits out EC2's consistency")
}

// flakyTags fails the first n CreateTags calls, as a throttle that
// outlived the SDK's retries would.
type flakyTags struct {
	*ec2.Client
	mu sync.Mutex
	n  int
}

func (f *flakyTags) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("RequestLimitExceeded: retries exhausted")
	}
	return f.Client.CreateTags(ctx, in, opts...)
}

// TestBatchedClaimsRetried: a batch's NodeClaims get their instances at
// once, and a claim whose CreateTags fails is tried again until it lands,
// since no NodeClaim asks again.
func TestBatchedClaimsRetried(t *testing.T) {
	e := newLaunchEnv(t)
	p := instance.NewProvider(&flakyTags{Client: ec2API, n: 3}, e.cluster, nil, wideWindow)
	var reqs []instance.Request
	for i := range 3 {
		reqs = append(reqs, e.request(fmt.Sprintf("%s-nc-%d", e.cluster, i), "m5.large"))
	}
	outs := createAll(p, reqs)
	for _, o := range outs {
		require.NoError(t, o.err)
	}
	p.WaitForClaims()
	tags := e.describeTags(t)
	for i, o := range outs {
		assert.Equal(t, reqs[i].NodeClaimName, tags[o.inst.ID]["karpenter.sh/nodeclaim"], "%s is claimed", o.inst.ID)
	}
}
