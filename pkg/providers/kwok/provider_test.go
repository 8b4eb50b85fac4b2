package kwok

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-go/karpenter/pkg/apis"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

type env struct {
	ctx   context.Context
	kube  client.Client
	clock *clocktesting.FakeClock
	p     *Provider
	// now and advance read and move the provider's clock: the fake clock,
	// or in a synctest bubble (newBubbleEnv) the bubble's, which advance
	// moves only once every goroutine is blocked and returns once they are
	// blocked again, so that "not yet" and "by now" are exact.
	now     func() time.Time
	advance func(time.Duration)
}

func newEnv(t *testing.T, opts Options, objs ...client.Object) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnvOn(t, clk, opts, objs...)
	e.clock, e.now, e.advance = clk, clk.Now, clk.Step
	return e
}

// newBubbleEnv is newEnv for a test running in synctest.Test.
func newBubbleEnv(t *testing.T, opts Options, objs ...client.Object) *env {
	t.Helper()
	e := newEnvOn(t, clock.RealClock{}, opts, objs...)
	e.now = time.Now
	e.advance = func(d time.Duration) {
		time.Sleep(d)
		synctest.Wait()
	}
	return e
}

func newEnvOn(t *testing.T, clk clock.WithDelayedExecution, opts Options, objs ...client.Object) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	require.NoError(t, apis.AddToScheme(scheme))
	hasClass := false
	for _, o := range objs {
		if o.GetName() == "default" {
			if _, ok := o.(*kwokv1alpha1.KWOKNodeClass); ok {
				hasClass = true
			}
		}
	}
	if !hasClass {
		objs = append(objs, nodeClass(nil))
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&kwokv1alpha1.KWOKNodeClass{}).Build()
	opts.Clock = clk
	if opts.Pick == nil {
		opts.Pick = func(int) int { return 0 }
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := New(ctx, kube, opts)
	require.NoError(t, err)
	return &env{ctx: ctx, kube: kube, p: p}
}

func nodeClass(mutate func(*kwokv1alpha1.KWOKNodeClass)) *kwokv1alpha1.KWOKNodeClass {
	nc := &kwokv1alpha1.KWOKNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Status: kwokv1alpha1.KWOKNodeClassStatus{Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now(),
		}}},
	}
	if mutate != nil {
		mutate(nc)
	}
	return nc
}

type req = v1.NodeSelectorRequirementWithMinValues

func in(key string, values ...string) req {
	return req{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func nodeClaim(name string, reqs ...req) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{v1.NodePoolLabelKey: "default", "team": "a"},
			Annotations: map[string]string{v1.NodePoolHashAnnotationKey: "123"},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: reqs,
			NodeClassRef: &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"},
		},
	}
}

func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	require.NoError(t, e.kube.Get(e.ctx, client.ObjectKey{Name: name}, n))
	return n
}

func (e *env) nodeCount(t *testing.T) int {
	t.Helper()
	nodes := &corev1.NodeList{}
	require.NoError(t, e.kube.List(e.ctx, nodes))
	return len(nodes.Items)
}

func TestCreateChoosesBestOffering(t *testing.T) {
	small := []string{"c7a.large", "m7a.large", "c7g.large", "c7i.large"}
	reservedCatalog, err := ParseCatalog([]byte(`[
	  {"name":"a.large","architecture":"amd64","resources":{"cpu":"2","memory":"4Gi"},"offerings":[
	    {"zone":"z1","capacityType":"spot","price":0.03},{"zone":"z1","capacityType":"on-demand","price":0.02}]},
	  {"name":"b.large","architecture":"amd64","resources":{"cpu":"2","memory":"4Gi"},"offerings":[
	    {"zone":"z2","capacityType":"reserved","price":0.5,"reservationID":"cr-1","reservationCapacity":1},
	    {"zone":"z2","capacityType":"on-demand","price":0.03}]}]`))
	require.NoError(t, err)

	tests := []struct {
		name         string
		opts         Options
		reqs         []req
		requests     corev1.ResourceList
		wantType     string
		wantZone     string
		wantCapacity string
		wantICE      bool
	}{
		{name: "cheapest is graviton spot", reqs: []req{in(corev1.LabelInstanceTypeStable, small...)},
			wantType: "c7g.large", wantZone: "test-zone-a", wantCapacity: "spot"},
		{name: "arch narrows", reqs: []req{in(corev1.LabelInstanceTypeStable, small...), in(corev1.LabelArchStable, "amd64")},
			wantType: "c7a.large", wantCapacity: "spot"},
		{name: "on-demand only", reqs: []req{in(corev1.LabelInstanceTypeStable, small...), in(v1.CapacityTypeLabelKey, "on-demand")},
			wantType: "c7g.large", wantCapacity: "on-demand"},
		{name: "zone narrows", reqs: []req{in(corev1.LabelInstanceTypeStable, small...), in(corev1.LabelTopologyZone, "test-zone-c")},
			wantType: "c7g.large", wantZone: "test-zone-c"},
		{name: "requests must fit allocatable",
			reqs:     []req{in(corev1.LabelInstanceTypeStable, "c7a.large", "c7a.xlarge")},
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
			wantType: "c7a.xlarge"},
		{name: "no instance-type requirement searches the catalog",
			reqs:     []req{in(awsv1.LabelInstanceFamily, "m7i")},
			wantType: "m7i.large"},
		{name: "spot preferred over a cheaper on-demand",
			opts:     Options{InstanceTypes: reservedCatalog},
			reqs:     []req{in(corev1.LabelInstanceTypeStable, "a.large")},
			wantType: "a.large", wantCapacity: "spot"},
		{name: "reserved preferred over spot even when pricier",
			opts:     Options{InstanceTypes: reservedCatalog},
			wantType: "b.large", wantZone: "z2", wantCapacity: "reserved"},
		{name: "external unavailable cache is respected",
			opts: Options{Unavailable: func(k cloudprovider.OfferingKey) bool {
				return k.InstanceType == "c7g.large" && k.CapacityType == "spot"
			}},
			reqs:     []req{in(corev1.LabelInstanceTypeStable, "c7g.large", "c7a.large")},
			wantType: "c7a.large", wantCapacity: "spot"},
		{name: "nothing compatible is ICE",
			reqs:    []req{in(corev1.LabelInstanceTypeStable, "c7g.large"), in(corev1.LabelArchStable, "amd64")},
			wantICE: true},
		{name: "unknown instance type is ICE",
			reqs:    []req{in(corev1.LabelInstanceTypeStable, "nope.large")},
			wantICE: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opts)
			nc := nodeClaim("claim", tt.reqs...)
			nc.Spec.Resources.Requests = tt.requests
			got, err := e.p.Create(e.ctx, nc)
			if tt.wantICE {
				assert.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
				assert.Zero(t, e.nodeCount(t))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantType, got.Labels[corev1.LabelInstanceTypeStable])
			if tt.wantZone != "" {
				assert.Equal(t, tt.wantZone, got.Labels[corev1.LabelTopologyZone])
			}
			if tt.wantCapacity != "" {
				assert.Equal(t, tt.wantCapacity, got.Labels[v1.CapacityTypeLabelKey])
			}
		})
	}
}

func TestCreateNodeShape(t *testing.T) {
	e := newEnv(t, Options{})
	nc := nodeClaim("default-abcde",
		in(corev1.LabelInstanceTypeStable, "m7a.xlarge"),
		in(corev1.LabelOSStable, "linux"),
		in("example.com/rack", "r1"))
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}

	got, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	node := e.node(t, "default-abcde")

	assert.Equal(t, "kwok://default-abcde", node.Spec.ProviderID)
	for k, v := range map[string]string{
		corev1.LabelInstanceTypeStable:       "m7a.xlarge",
		corev1.LabelArchStable:               "amd64",
		corev1.LabelOSStable:                 "linux",
		corev1.LabelTopologyZone:             "test-zone-a",
		v1.CapacityTypeLabelKey:              "spot",
		corev1.LabelHostname:                 "default-abcde",
		v1.NodePoolLabelKey:                  "default",
		"team":                               "a",
		"example.com/rack":                   "r1",
		awsv1.LabelInstanceCategory:          "m",
		awsv1.LabelInstanceFamily:            "m7a",
		awsv1.LabelInstanceGeneration:        "7",
		awsv1.LabelInstanceCPU:               "4",
		awsv1.LabelInstanceMemory:            "16384",
		kwokv1alpha1.KWOKNodeLabelKey:        "fake",
		kwokv1alpha1.KWOKPartitionLabelKey:   "a",
		kwokv1alpha1.NodeViewerPriceLabelKey: "",
	} {
		if v == "" {
			assert.Contains(t, node.Labels, k)
			continue
		}
		assert.Equal(t, v, node.Labels[k], k)
	}
	assert.NotContains(t, node.Labels, awsv1.LabelInstanceGPUName, "absent labels stay absent")
	assert.Equal(t, "fake", node.Annotations[kwokv1alpha1.KWOKNodeLabelKey])
	assert.Equal(t, "123", node.Annotations[v1.NodePoolHashAnnotationKey])

	assert.ElementsMatch(t, []corev1.Taint{v1.UnregisteredNoExecuteTaint, nc.Spec.Taints[0], nc.Spec.StartupTaints[0]}, node.Spec.Taints)

	assert.True(t, node.Status.Capacity.Cpu().Equal(resource.MustParse("4")))
	assert.True(t, node.Status.Capacity.Memory().Equal(resource.MustParse("16Gi")))
	assert.True(t, node.Status.Capacity.Pods().Equal(resource.MustParse("58")))
	assert.True(t, node.Status.Allocatable.Cpu().Equal(resource.MustParse("3920m")), "allocatable cpu %s", node.Status.Allocatable.Cpu())
	assert.True(t, node.Status.Allocatable.Memory().Equal(resource.MustParse("15391Mi")), "allocatable memory %s", node.Status.Allocatable.Memory())

	// The returned NodeClaim is the input plus what the launch resolved.
	assert.Equal(t, "kwok://default-abcde", got.Status.ProviderID)
	assert.True(t, got.Status.Capacity.Cpu().Equal(resource.MustParse("4")))
	assert.True(t, got.Status.Allocatable.Cpu().Equal(resource.MustParse("3920m")))
	assert.Equal(t, "m7a.xlarge", got.Labels[corev1.LabelInstanceTypeStable])
	assert.Equal(t, "test-zone-a", got.Labels[corev1.LabelTopologyZone])
	assert.Equal(t, "spot", got.Labels[v1.CapacityTypeLabelKey])
	assert.Equal(t, nc.Spec, got.Spec)
	assert.Empty(t, nc.Status.ProviderID, "the input is not modified")
}

func TestCreateIsIdempotent(t *testing.T) {
	e := newEnv(t, Options{})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	first, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	second, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, first.Status.ProviderID, second.Status.ProviderID)
	assert.Equal(t, 1, e.nodeCount(t))
}

func TestCreateWindowsPicksOS(t *testing.T) {
	e := newEnv(t, Options{})
	got, err := e.p.Create(e.ctx, nodeClaim("win", in(corev1.LabelInstanceTypeStable, "m7i.large"), in(corev1.LabelOSStable, "windows")))
	require.NoError(t, err)
	assert.Equal(t, "windows", got.Labels[corev1.LabelOSStable])
	assert.Equal(t, "windows", e.node(t, "win").Status.NodeInfo.OperatingSystem)
}

func TestInjectedICE(t *testing.T) {
	e := newEnv(t, Options{Faults: Faults{ICE: []cloudprovider.OfferingKey{{InstanceType: "c7g.large", Zone: "test-zone-a", CapacityType: "spot"}}}})
	reqs := []req{in(corev1.LabelInstanceTypeStable, "c7g.large", "c7a.large")}

	_, err := e.p.Create(e.ctx, nodeClaim("first", reqs...))
	require.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
	var ice *cloudprovider.InsufficientCapacityError
	require.ErrorAs(t, err, &ice)
	iced := cloudprovider.OfferingKey{InstanceType: "c7g.large", Zone: "test-zone-a", CapacityType: "spot"}
	assert.Equal(t, []cloudprovider.OfferingKey{iced}, ice.Offerings)
	assert.Zero(t, e.nodeCount(t))

	assert.False(t, offeringAvailable(t, e, iced), "the ICE'd offering is reported unavailable")

	// The next NodeClaim launches the next offering.
	got, err := e.p.Create(e.ctx, nodeClaim("second", reqs...))
	require.NoError(t, err)
	assert.Equal(t, "c7g.large", got.Labels[corev1.LabelInstanceTypeStable])
	assert.Equal(t, "test-zone-b", got.Labels[corev1.LabelTopologyZone])

	// After the TTL the offering is tried again.
	e.clock.Step(DefaultUnavailableTTL)
	assert.True(t, offeringAvailable(t, e, iced))

	// Wildcards: every spot offering is out of capacity.
	e.p.SetFaults(Faults{ICE: []cloudprovider.OfferingKey{{InstanceType: "*", CapacityType: "spot"}}})
	_, err = e.p.Create(e.ctx, nodeClaim("third", reqs...))
	assert.True(t, cloudprovider.IsInsufficientCapacityError(err))
}

func offeringAvailable(t *testing.T, e *env, key cloudprovider.OfferingKey) bool {
	t.Helper()
	its, err := e.p.GetInstanceTypes(e.ctx, &v1.NodePool{})
	require.NoError(t, err)
	for _, it := range its {
		for _, o := range it.Offerings {
			if cloudprovider.Key(it, &o) == key {
				return o.Available
			}
		}
	}
	t.Fatalf("offering %v not found", key)
	return false
}

func TestGetInstanceTypesDoesNotMutateCatalog(t *testing.T) {
	e := newEnv(t, Options{Catalog: CatalogUpstreamKWOK})
	its, err := e.p.GetInstanceTypes(e.ctx, nil)
	require.NoError(t, err)
	require.Len(t, its, 144)
	e.p.markUnavailable(cloudprovider.OfferingKey{InstanceType: "c-1x-amd64-linux", Zone: "test-zone-a", CapacityType: "spot"})
	marked, err := e.p.GetInstanceTypes(e.ctx, nil)
	require.NoError(t, err)
	assert.False(t, marked[0].Offerings[0].Available)
	assert.True(t, its[0].Offerings[0].Available, "earlier results and the catalog are untouched")
	assert.Same(t, its[1], marked[1], "unaffected types are shared")
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t, Options{Faults: Faults{CreateErrors: 2}})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	for i := 0; i < 2; i++ {
		_, err := e.p.Create(e.ctx, nc)
		ce := cloudprovider.AsCreateError(err)
		require.NotNil(t, ce, "attempt %d: %v", i, err)
		assert.Equal(t, "InjectedCreateError", ce.ConditionReason)
	}
	_, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, 1, e.nodeCount(t))
}

func TestHangAfterCreate(t *testing.T) {
	e := newEnv(t, Options{Faults: Faults{HangAfterCreate: time.Minute}})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	done := make(chan error, 1)
	go func() {
		_, err := e.p.Create(e.ctx, nc)
		done <- err
	}()
	// The Node exists while Create is still holding: the crash window.
	require.Eventually(t, func() bool { return e.nodeCount(t) == 1 && e.clock.HasWaiters() }, 5*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Create returned before the hang ended: %v", err)
	default:
	}
	e.clock.Step(time.Minute)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Create did not return after the hang")
	}
}

func TestAnnotationFaults(t *testing.T) {
	class := nodeClass(func(c *kwokv1alpha1.KWOKNodeClass) {
		c.Annotations = map[string]string{FaultsAnnotationKey: "create-errors=1;ice=c7a.large/*/*"}
	})
	e := newEnv(t, Options{}, class)
	reqs := []req{in(corev1.LabelInstanceTypeStable, "c7a.large")}
	_, err := e.p.Create(e.ctx, nodeClaim("a", reqs...))
	assert.True(t, cloudprovider.IsCreateError(err), "got %v", err)
	_, err = e.p.Create(e.ctx, nodeClaim("b", reqs...))
	assert.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)

	class.Annotations[FaultsAnnotationKey] = "nonsense"
	require.NoError(t, e.kube.Update(e.ctx, class))
	_, err = e.p.Create(e.ctx, nodeClaim("c", reqs...))
	assert.True(t, cloudprovider.IsCreateError(err), "a bad annotation fails visibly: %v", err)
}

func TestNodeClassErrors(t *testing.T) {
	notReady := nodeClass(func(c *kwokv1alpha1.KWOKNodeClass) {
		c.Status.Conditions[0].Status = metav1.ConditionFalse
		c.Status.Conditions[0].Message = "broken"
	})
	tests := []struct {
		name  string
		class *kwokv1alpha1.KWOKNodeClass
		ref   *v1.NodeClassReference
		check func(error) bool
	}{
		{"missing class is ICE", nil, &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "missing"}, cloudprovider.IsInsufficientCapacityError},
		{"not ready", notReady, nil, cloudprovider.IsNodeClassNotReadyError},
		{"foreign kind", nil, &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}, cloudprovider.IsNodeClassNotReadyError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			if tt.class != nil {
				objs = append(objs, tt.class)
			}
			e := newEnv(t, Options{}, objs...)
			nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
			if tt.ref != nil {
				nc.Spec.NodeClassRef = tt.ref
			}
			_, err := e.p.Create(e.ctx, nc)
			assert.True(t, tt.check(err), "got %v", err)
		})
	}
}

func TestRegistrationDelay(t *testing.T) {
	tests := []struct {
		name  string
		class *kwokv1alpha1.KWOKNodeClass
		opts  Options
		delay time.Duration
	}{
		{"from the node class", nodeClass(func(c *kwokv1alpha1.KWOKNodeClass) {
			c.Spec.NodeRegistrationDelay = metav1.Duration{Duration: 30 * time.Second}
		}), Options{RegistrationDelay: time.Hour}, 30 * time.Second},
		{"from the option", nil, Options{RegistrationDelay: 10 * time.Second}, 10 * time.Second},
		{"slow registration fault wins", nodeClass(func(c *kwokv1alpha1.KWOKNodeClass) {
			c.Spec.NodeRegistrationDelay = metav1.Duration{Duration: 30 * time.Second}
		}), Options{Faults: Faults{RegistrationDelay: ptr(2 * time.Minute)}}, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var objs []client.Object
				if tt.class != nil {
					objs = append(objs, tt.class)
				}
				e := newBubbleEnv(t, tt.opts, objs...)
				got, err := e.p.Create(e.ctx, nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large")))
				require.NoError(t, err)
				assert.Equal(t, "kwok://claim", got.Status.ProviderID, "Create returns before the Node exists")
				assert.Zero(t, e.nodeCount(t))

				// The launched instance is visible before its Node registers.
				viewed, err := e.p.Get(e.ctx, "kwok://claim")
				require.NoError(t, err)
				assert.Equal(t, "c7a.large", viewed.Labels[corev1.LabelInstanceTypeStable])
				assert.Equal(t, e.now(), viewed.CreationTimestamp.Time)
				listed, err := e.p.List(e.ctx)
				require.NoError(t, err)
				assert.Len(t, listed, 1)

				e.advance(tt.delay - time.Second)
				assert.Zero(t, e.nodeCount(t), "not yet")
				e.advance(time.Second)
				assert.Equal(t, 1, e.nodeCount(t), "registered at the delay")
				e.p.mu.Lock()
				assert.Empty(t, e.p.pending)
				e.p.mu.Unlock()
				assert.Equal(t, "kwok://claim", e.node(t, "claim").Spec.ProviderID)

				listed, err = e.p.List(e.ctx)
				require.NoError(t, err)
				assert.Len(t, listed, 1, "no double counting once registered")
			})
		})
	}
}

func TestNeverRegister(t *testing.T) {
	synctest.Test(t, testNeverRegister)
}

func testNeverRegister(t *testing.T) {
	e := newBubbleEnv(t, Options{Faults: Faults{NeverRegister: true}})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	got, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	e.advance(time.Hour)
	assert.Zero(t, e.nodeCount(t))
	_, err = e.p.Get(e.ctx, got.Status.ProviderID)
	require.NoError(t, err, "the instance exists even though it never joins")

	err = e.p.Delete(e.ctx, got)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err))
	_, err = e.p.Get(e.ctx, got.Status.ProviderID)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err))
}

func TestDeleteBeforeRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newBubbleEnv(t, Options{RegistrationDelay: time.Minute})
		got, err := e.p.Create(e.ctx, nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large")))
		require.NoError(t, err)
		assert.True(t, cloudprovider.IsNodeClaimNotFoundError(e.p.Delete(e.ctx, got)))
		e.advance(time.Minute)
		assert.Zero(t, e.nodeCount(t), "a deleted instance never registers")
	})
}

func TestDelete(t *testing.T) {
	e := newEnv(t, Options{})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	got, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)

	_, err = e.p.Get(e.ctx, got.Status.ProviderID)
	require.NoError(t, err)

	err = e.p.Delete(e.ctx, got)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "got %v", err)
	assert.Zero(t, e.nodeCount(t))
	_, err = e.p.Get(e.ctx, got.Status.ProviderID)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err))
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(e.p.Delete(e.ctx, got)), "deleting again is still not found")
}

// A controller that crashed before recording the provider ID still cleans up
// by NodeClaim name.
func TestDeleteWithoutProviderID(t *testing.T) {
	e := newEnv(t, Options{})
	nc := nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large"))
	_, err := e.p.Create(e.ctx, nc)
	require.NoError(t, err)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(e.p.Delete(e.ctx, nc)))
	assert.Zero(t, e.nodeCount(t))
}

func TestDeleteLeavesForeignNodes(t *testing.T) {
	foreign := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "claim"}, Spec: corev1.NodeSpec{ProviderID: "aws:///i-123"}}
	e := newEnv(t, Options{}, foreign)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(e.p.Delete(e.ctx, nodeClaim("claim"))))
	assert.Equal(t, 1, e.nodeCount(t))
	_, err := e.p.Create(e.ctx, nodeClaim("claim", in(corev1.LabelInstanceTypeStable, "c7a.large")))
	assert.True(t, cloudprovider.IsCreateError(err), "got %v", err)
}

func TestGetAndList(t *testing.T) {
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "static", Labels: map[string]string{kwokv1alpha1.KWOKNodeLabelKey: "fake"}}}
	deleting := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "old", Labels: map[string]string{kwokv1alpha1.KWOKNodeLabelKey: "fake"},
		DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{v1.TerminationFinalizer},
	}, Spec: corev1.NodeSpec{ProviderID: "kwok://old"}}
	e := newEnv(t, Options{}, other, deleting)
	for _, name := range []string{"b", "a"} {
		_, err := e.p.Create(e.ctx, nodeClaim(name, in(corev1.LabelInstanceTypeStable, "c7a.large")))
		require.NoError(t, err)
	}
	listed, err := e.p.List(e.ctx)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	assert.Equal(t, "a", listed[0].Name)
	assert.Equal(t, "kwok://a", listed[0].Status.ProviderID)
	assert.Equal(t, "a", listed[0].Status.NodeName)
	assert.Equal(t, "c7a.large", listed[0].Labels[corev1.LabelInstanceTypeStable])

	got, err := e.p.Get(e.ctx, "kwok://b")
	require.NoError(t, err)
	assert.Equal(t, "b", got.Status.NodeName)
	for _, id := range []string{"kwok://old", "kwok://missing", "aws:///i-1", "kwok://"} {
		_, err := e.p.Get(e.ctx, id)
		assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "%s: %v", id, err)
	}
}

func TestReservationCapacity(t *testing.T) {
	its, err := ParseCatalog([]byte(`[{"name":"b.large","architecture":"amd64","resources":{"cpu":"2","memory":"4Gi"},"offerings":[
	    {"zone":"z2","capacityType":"reserved","price":0.5,"reservationID":"cr-1","reservationCapacity":1},
	    {"zone":"z2","capacityType":"on-demand","price":0.03}]}]`))
	require.NoError(t, err)
	e := newEnv(t, Options{InstanceTypes: its})
	first, err := e.p.Create(e.ctx, nodeClaim("first"))
	require.NoError(t, err)
	assert.Equal(t, "reserved", first.Labels[v1.CapacityTypeLabelKey])
	assert.Equal(t, "cr-1", first.Labels[scheduling.LabelReservationID])
	second, err := e.p.Create(e.ctx, nodeClaim("second"))
	require.NoError(t, err)
	assert.Equal(t, "on-demand", second.Labels[v1.CapacityTypeLabelKey], "the reservation is used up")
	types, err := e.p.GetInstanceTypes(e.ctx, nil)
	require.NoError(t, err)
	assert.False(t, types[0].Offerings[0].Available)

	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(e.p.Delete(e.ctx, first)))
	third, err := e.p.Create(e.ctx, nodeClaim("third"))
	require.NoError(t, err)
	assert.Equal(t, "reserved", third.Labels[v1.CapacityTypeLabelKey], "deleting frees the reservation")
}

func TestProviderMetadata(t *testing.T) {
	e := newEnv(t, Options{})
	assert.Equal(t, "kwok", e.p.Name())
	classes := e.p.GetSupportedNodeClasses()
	require.Len(t, classes, 1)
	assert.IsType(t, &kwokv1alpha1.KWOKNodeClass{}, classes[0])
	reason, err := e.p.IsDrifted(e.ctx, nodeClaim("x"))
	assert.NoError(t, err)
	assert.Empty(t, reason)
	policies := e.p.RepairPolicies()
	require.Len(t, policies, 2)
	for _, p := range policies {
		assert.Equal(t, corev1.NodeReady, p.ConditionType)
		assert.Equal(t, 10*time.Minute, p.TolerationDuration)
	}
	assert.Contains(t, WellKnownLabels(), awsv1.LabelInstanceFamily, "AWS labels are well known to the solver")
	assert.Contains(t, WellKnownLabels(), kwokv1alpha1.LabelInstanceSize)
}

func ptr[T any](v T) *T { return &v }
