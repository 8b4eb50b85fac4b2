package launchtemplates_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/launchtemplates"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, controlplane.Options{}, &cp)) }

// countingWarmer records the NodePools whose templates it was asked for.
type countingWarmer struct {
	mu    sync.Mutex
	pools []string
}

func (w *countingWarmer) WarmLaunchTemplates(_ context.Context, np *v1.NodePool) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pools = append(w.pools, np.Name)
	return 1, nil
}

func (w *countingWarmer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pools)
}

// TestTemplatesMadeOncePerContent: a NodePool's templates are made once
// its class is Ready, not again while nothing a template holds changes
// (a status update of the class, a NodePool change outside its template),
// and again when the class resolves a new image or the NodePool's
// template changes; a NodePool of a class that is not Ready makes none.
func TestTemplatesMadeOncePerContent(t *testing.T) {
	ctx := context.Background()
	kube := cp.Client
	tag := uuid.NewString()[:8]
	class := newClass(ctx, t, tag)
	np := newPool(ctx, t, tag, class)

	w := &countingWarmer{}
	c := launchtemplates.NewController(kube, w)
	reconcileOnce := func() {
		t.Helper()
		_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
		require.NoError(t, err)
	}
	setStatus := func(ami string, ready metav1.ConditionStatus) {
		t.Helper()
		setClassStatus(ctx, t, class, ami, ready, time.Now())
	}
	updatePool := func(change func(*v1.NodePool)) {
		t.Helper()
		require.NoError(t, kube.Get(ctx, types.NamespacedName{Name: np.Name}, np))
		change(np)
		require.NoError(t, kube.Update(ctx, np))
	}

	steps := []struct {
		name  string
		do    func()
		wantN int // templates made so far
	}{
		{"class not Ready: none", func() { setStatus("ami-1", metav1.ConditionFalse) }, 0},
		{"class Ready: made", func() { setStatus("ami-1", metav1.ConditionTrue) }, 1},
		{"nothing changed: not again", func() {}, 1},
		{"class status rewritten alike: not again", func() { setStatus("ami-1", metav1.ConditionTrue) }, 1},
		{"NodePool limits changed: not again", func() {
			updatePool(func(np *v1.NodePool) { np.Spec.Weight = ptr(int32(10)) })
		}, 1},
		{"class resolved a new image: made again", func() { setStatus("ami-2", metav1.ConditionTrue) }, 2},
		{"NodePool labels changed: made again", func() {
			updatePool(func(np *v1.NodePool) { np.Spec.Template.SetLabelMap(map[string]string{"team": "a"}) })
		}, 3},
	}
	for _, s := range steps {
		s.do()
		reconcileOnce()
		require.Equal(t, s.wantN, w.count(), s.name)
	}
}

func ptr[T any](v T) *T { return &v }

func newClass(ctx context.Context, t *testing.T, tag string) *awsv1.EC2NodeClass {
	t.Helper()
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "class-" + tag},
		Spec: awsv1.EC2NodeClassSpec{Role: "NodeRole", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}}},
	}
	require.NoError(t, cp.Client.Create(ctx, class))
	return class
}

func newPool(ctx context.Context, t *testing.T, tag string, class *awsv1.EC2NodeClass) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-" + tag}}
	np.Spec.Template.Spec = v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name},
		Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	return np
}

// setClassStatus gives class one amd64 image and a Ready condition that
// last changed at transition.
func setClassStatus(ctx context.Context, t *testing.T, class *awsv1.EC2NodeClass, ami string, ready metav1.ConditionStatus, transition time.Time) {
	t.Helper()
	kube := cp.Client
	require.NoError(t, kube.Get(ctx, types.NamespacedName{Name: class.Name}, class))
	class.Status.AMIs = []awsv1.AMI{{ID: ami, Name: ami, Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	class.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: ready, Reason: "Test", LastTransitionTime: metav1.NewTime(transition)}}
	require.NoError(t, kube.Status().Update(ctx, class))
}

// TestTakingOverMakesNone: a controller that starts with the NodePool
// there and its class Ready since before (a restart, a switch from
// upstream) makes no template for them, since its predecessor launched
// from those; a change after that (a new image) makes them.
func TestTakingOverMakesNone(t *testing.T) {
	ctx := context.Background()
	kube := cp.Client
	tag := uuid.NewString()[:8]
	class := newClass(ctx, t, tag)
	setStatus := func(ami string, transition time.Time) {
		t.Helper()
		setClassStatus(ctx, t, class, ami, metav1.ConditionTrue, transition)
	}
	setStatus("ami-1", time.Now().Add(-time.Hour))
	np := newPool(ctx, t, tag, class)
	// Creation times have whole seconds: start in a later one.
	time.Sleep(1100 * time.Millisecond)

	w := &countingWarmer{}
	c := launchtemplates.NewController(kube, w)
	reconcileOnce := func() {
		t.Helper()
		_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
		require.NoError(t, err)
	}
	reconcileOnce()
	require.Zero(t, w.count(), "what was Ready before the controller started launched under its predecessor")
	setStatus("ami-2", time.Now().Add(-time.Hour))
	reconcileOnce()
	require.Equal(t, 1, w.count(), "a new image after taking over: made")
}

// TestTemplatesMadeWhileTheProfilePropagates: a class kept from Ready only
// by IAM propagating its new instance profile has resolved all a template
// holds, so its NodePool's templates are made then (and not again when it
// turns Ready); a class missing anything else makes none.
func TestTemplatesMadeWhileTheProfilePropagates(t *testing.T) {
	propagating := metav1.Condition{Type: awsv1.ConditionTypeInstanceProfileReady, Status: metav1.ConditionFalse, Reason: awsv1.ReasonInstanceProfilePropagating}
	cases := []struct {
		name string
		// profile and subnets are the class's InstanceProfileReady and
		// SubnetsReady conditions.
		profile, subnets metav1.Condition
		wantN            int
	}{
		{"only the profile propagating: made", propagating, trueCondition(awsv1.ConditionTypeSubnetsReady), 1},
		{"the profile propagating, no subnet found: none", propagating,
			metav1.Condition{Type: awsv1.ConditionTypeSubnetsReady, Status: metav1.ConditionFalse, Reason: "SubnetsNotFound"}, 0},
		{"the profile refused for another reason: none",
			metav1.Condition{Type: awsv1.ConditionTypeInstanceProfileReady, Status: metav1.ConditionFalse, Reason: "InstanceProfileNotFound"},
			trueCondition(awsv1.ConditionTypeSubnetsReady), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tag := uuid.NewString()[:8]
			class := newClass(ctx, t, tag)
			np := newPool(ctx, t, tag, class)
			w := &countingWarmer{}
			c := launchtemplates.NewController(cp.Client, w)
			reconcileOnce := func() {
				t.Helper()
				_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
				require.NoError(t, err)
			}
			setResolvedStatus(ctx, t, class, metav1.ConditionFalse, tc.profile, tc.subnets,
				metav1.Condition{Type: awsv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: awsv1.ReasonDependenciesNotReady})
			reconcileOnce()
			require.Equal(t, tc.wantN, w.count())
			if tc.wantN == 0 {
				return
			}
			// The profile propagated: the class is Ready, its templates
			// hold the same, so none is made again.
			setResolvedStatus(ctx, t, class, metav1.ConditionTrue, trueCondition(awsv1.ConditionTypeInstanceProfileReady),
				tc.subnets, trueCondition(awsv1.ConditionTypeValidationSucceeded))
			reconcileOnce()
			require.Equal(t, tc.wantN, w.count(), "made again when the class turned Ready")
		})
	}
}

func trueCondition(condType string) metav1.Condition {
	return metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: condType}
}

// setResolvedStatus gives class an image, a subnet, a security group and
// an instance profile, with the given Ready status and conditions; the
// conditions not given are True.
func setResolvedStatus(ctx context.Context, t *testing.T, class *awsv1.EC2NodeClass, ready metav1.ConditionStatus, conds ...metav1.Condition) {
	t.Helper()
	kube := cp.Client
	require.NoError(t, kube.Get(ctx, types.NamespacedName{Name: class.Name}, class))
	class.Status.AMIs = []awsv1.AMI{{ID: "ami-1", Name: "ami-1", Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	class.Status.Subnets = []awsv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a", ZoneID: "use1-az1"}}
	class.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-1", Name: "nodes"}}
	class.Status.InstanceProfile = "profile-" + class.Name
	now := metav1.Now()
	class.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: ready, Reason: "Test", LastTransitionTime: now}}
	given := map[string]bool{}
	for _, c := range conds {
		c.LastTransitionTime = now
		class.Status.Conditions = append(class.Status.Conditions, c)
		given[c.Type] = true
	}
	for _, ct := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypePlacementGroupReady, awsv1.ConditionTypeValidationSucceeded} {
		if !given[ct] {
			c := trueCondition(ct)
			c.LastTransitionTime = now
			class.Status.Conditions = append(class.Status.Conditions, c)
		}
	}
	require.NoError(t, kube.Status().Update(ctx, class))
}
