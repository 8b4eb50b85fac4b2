package hash_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass/hash"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// caBundle is the controller's cluster CA bundle, which the hash includes.
var caBundle = ptr.To("dGVzdC1jYQ==")

// cp is one etcd + kube-apiserver with the CRDs, shared by the package.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func newNodeClass(t *testing.T, annotations map[string]string) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "class-" + uuid.NewString()[:8], Annotations: annotations},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole",
			UserData:                   ptr.To("echo one"),
		},
	}
	require.NoError(t, cp.Client.Create(context.Background(), nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	return nc
}

// newNodeClaim creates a NodeClaim of the class with the given hash
// annotations, Drifted when drifted.
func newNodeClaim(t *testing.T, class string, annotations map[string]string, drifted bool) *v1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc-" + uuid.NewString()[:8], Annotations: annotations},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
			},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	if drifted {
		nc.SetConditions([]metav1.Condition{{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodeClassDrift", LastTransitionTime: metav1.Now()}})
		require.NoError(t, cp.Client.Status().Update(ctx, nc))
	}
	return nc
}

func getClass(t *testing.T, name string) *awsv1.EC2NodeClass {
	t.Helper()
	out := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, out))
	return out
}

func getClaim(t *testing.T, name string) *v1.NodeClaim {
	t.Helper()
	out := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, out))
	return out
}

func reconcileOnce(t *testing.T, c *hash.Controller, name string) {
	t.Helper()
	res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	require.Equal(t, reconcile.Result{}, res)
}

func hashes(hash, version string) map[string]string {
	return map[string]string{awsv1.AnnotationEC2NodeClassHash: hash, awsv1.AnnotationEC2NodeClassHashVersion: version}
}

func TestStampsTheClass(t *testing.T) {
	ctx := context.Background()
	c := hash.NewController(cp.Client, caBundle)
	class := newNodeClass(t, map[string]string{"other": "kept"})
	reconcileOnce(t, c, class.Name)

	got := getClass(t, class.Name)
	first := got.Annotations[awsv1.AnnotationEC2NodeClassHash]
	assert.Equal(t, got.Hash(caBundle), first)
	assert.Equal(t, awsv1.EC2NodeClassHashVersion, got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion])
	assert.Equal(t, "kept", got.Annotations["other"])

	// Nothing to do: no write.
	rv := got.ResourceVersion
	reconcileOnce(t, c, class.Name)
	assert.Equal(t, rv, getClass(t, class.Name).ResourceVersion)

	// A hashed field moves it; a status-resolved one does not.
	got.Spec.UserData = ptr.To("echo two")
	require.NoError(t, cp.Client.Update(ctx, got))
	reconcileOnce(t, c, class.Name)
	second := getClass(t, class.Name).Annotations[awsv1.AnnotationEC2NodeClassHash]
	assert.NotEqual(t, first, second)
	got = getClass(t, class.Name)
	got.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-0123"}}
	require.NoError(t, cp.Client.Update(ctx, got))
	reconcileOnce(t, c, class.Name)
	assert.Equal(t, second, getClass(t, class.Name).Annotations[awsv1.AnnotationEC2NodeClassHash])

	// A class that is gone is not an error.
	reconcileOnce(t, c, "missing")
}

// TestVersionChangeRestampsNodeClaims: a class stamped under an older hash
// version moves its NodeClaims to the current hash, so the upgrade does not
// drift them; drifted ones keep their hash, others' NodeClaims are left.
func TestVersionChangeRestampsNodeClaims(t *testing.T) {
	c := hash.NewController(cp.Client, caBundle)
	class := newNodeClass(t, hashes("111", "v5"))
	other := newNodeClass(t, hashes("222", "v5"))
	want := class.Hash(caBundle)

	stale := newNodeClaim(t, class.Name, hashes("111", "v5"), false)
	unstamped := newNodeClaim(t, class.Name, nil, false)
	drifted := newNodeClaim(t, class.Name, hashes("000", "v5"), true)
	current := newNodeClaim(t, class.Name, hashes("333", awsv1.EC2NodeClassHashVersion), false)
	othersClaim := newNodeClaim(t, other.Name, hashes("222", "v5"), false)

	reconcileOnce(t, c, class.Name)

	for _, tc := range []struct {
		name          string
		claim         *v1.NodeClaim
		hash, version string
	}{
		{"stale", stale, want, awsv1.EC2NodeClassHashVersion},
		{"unstamped", unstamped, want, awsv1.EC2NodeClassHashVersion},
		{"drifted keeps its hash", drifted, "000", awsv1.EC2NodeClassHashVersion},
		{"already current", current, "333", awsv1.EC2NodeClassHashVersion},
		{"another class", othersClaim, "222", "v5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := getClaim(t, tc.claim.Name)
			assert.Equal(t, tc.hash, got.Annotations[awsv1.AnnotationEC2NodeClassHash])
			assert.Equal(t, tc.version, got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion])
		})
	}
	got := getClass(t, class.Name)
	assert.Equal(t, want, got.Annotations[awsv1.AnnotationEC2NodeClassHash])
	assert.Equal(t, awsv1.EC2NodeClassHashVersion, got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion])
}

// TestInManager runs the registered controller: a new class is stamped, a
// spec edit re-stamps it and a removed annotation comes back.
func TestInManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
	})
	require.NoError(t, err)
	c := hash.NewController(mgr.GetClient(), caBundle)
	require.Equal(t, "nodeclass.hash", c.Name())
	require.NoError(t, c.Register(ctx, mgr))
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	class := newNodeClass(t, nil)
	stamped := func(t *testing.T) string {
		got := getClass(t, class.Name)
		if got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion || got.Annotations[awsv1.AnnotationEC2NodeClassHash] != got.Hash(caBundle) {
			return ""
		}
		return got.Annotations[awsv1.AnnotationEC2NodeClassHash]
	}
	require.Eventually(t, func() bool { return stamped(t) != "" }, 20*time.Second, 100*time.Millisecond)
	first := stamped(t)

	update := func(mutate func(*awsv1.EC2NodeClass)) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := getClass(t, class.Name)
			mutate(got)
			return cp.Client.Update(ctx, got)
		}))
	}
	update(func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"team": "ml"} })
	require.Eventually(t, func() bool { h := stamped(t); return h != "" && h != first }, 20*time.Second, 100*time.Millisecond)

	update(func(nc *awsv1.EC2NodeClass) { delete(nc.Annotations, awsv1.AnnotationEC2NodeClassHash) })
	require.Eventually(t, func() bool { return stamped(t) != "" }, 20*time.Second, 100*time.Millisecond)
}
