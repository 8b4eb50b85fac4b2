package e2e_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cli"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestSimulatePredictsController asks `karpenter simulate` (its package,
// against the live cluster) what a Deployment and then a NodePool edit
// would do, makes the edits, and checks that the controller does it:
//
//   - seven 1.5-CPU pods for a pool of five c7a/m7a types: the NodeClaims
//     the controller creates have the count and instance types predicted;
//   - the pool narrowed to exclude one launched type: exactly the nodes
//     predicted become Drifted (RequirementsDrifted). The pool's budget is
//     nodes "0", so none is replaced while the test looks.
func TestSimulatePredictsController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool, app, replicas = "sim", "sim-app", 7
	poolYAML := func(types ...string) string {
		y := consolidationPool{name: pool, instanceTypes: types}.yaml()
		return strings.Replace(y, `- nodes: "100%"`, `- nodes: "0"`, 1)
	}
	applyAll(t, ctx, cp, poolYAML("c7a.large", "c7a.xlarge", "c7a.2xlarge", "m7a.large", "m7a.xlarge"))
	startMetricsController(t, cp, "controller", nil)
	require.Eventually(t, func() bool {
		np := &v1.NodePool{}
		if cp.Client.Get(ctx, client.ObjectKey{Name: pool}, np) != nil {
			return false
		}
		return meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady)
	}, time.Minute, 200*time.Millisecond, "nodepool %s should be Ready", pool)

	workload := consolidationWorkload{name: app, pool: pool, replicas: replicas, cpu: "1500m"}.yaml()
	predicted := simulate(t, ctx, cp, workload)
	var want []string
	for _, nc := range predicted.NodeClaims {
		require.Equal(t, pool, nc.NodePool)
		want = append(want, nc.InstanceType)
	}
	sort.Strings(want)
	require.NotEmpty(t, want, "simulate should plan NodeClaims for the Deployment: %+v", predicted)
	require.Equal(t, replicas, predicted.PodsAdded)
	t.Logf("simulate: %d NodeClaims %v, $/h %.4f -> %.4f", len(want), want, predicted.CostBefore, predicted.CostAfter)

	applyAll(t, ctx, cp, workload)
	require.Eventually(t, func() bool {
		if countPods(readyPods(ctx, cp, app)) != replicas {
			return false
		}
		for _, nc := range liveClaims(ctx, cp, pool) {
			if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				return false
			}
		}
		return true
	}, 3*time.Minute, 500*time.Millisecond, "the %d pods should run on initialized nodes", replicas)
	claims := liveClaims(ctx, cp, pool)
	var got []string
	byType := map[string][]string{}
	for _, nc := range claims {
		it := nc.Labels[corev1.LabelInstanceTypeStable]
		got = append(got, it)
		byType[it] = append(byType[it], nc.Name)
	}
	sort.Strings(got)
	require.Equal(t, want, got, "the controller's NodeClaims should be those simulate predicted")

	// Narrow the pool to every type but the first launched one.
	dropped := got[0]
	var keep []string
	for _, it := range []string{"c7a.large", "c7a.xlarge", "c7a.2xlarge", "m7a.large", "m7a.xlarge"} {
		if it != dropped {
			keep = append(keep, it)
		}
	}
	change := poolYAML(keep...)
	predictedDrift := simulate(t, ctx, cp, change)
	var wantDrifted []string
	for _, d := range predictedDrift.Drifted {
		require.Equal(t, "RequirementsDrifted", d.Reason)
		wantDrifted = append(wantDrifted, d.NodeClaim)
	}
	sort.Strings(wantDrifted)
	require.Equal(t, sortedCopy(byType[dropped]), wantDrifted, "simulate should drift exactly the %s nodes", dropped)

	applyAll(t, ctx, cp, change)
	var drifted []string
	require.Eventually(t, func() bool {
		drifted = nil
		for _, nc := range liveClaims(ctx, cp, pool) {
			if conditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				drifted = append(drifted, nc.Name)
			}
		}
		sort.Strings(drifted)
		return len(drifted) == len(wantDrifted)
	}, time.Minute, 500*time.Millisecond, "the controller should mark %v Drifted", wantDrifted)
	require.Equal(t, wantDrifted, drifted)
	// The others stay undrifted through another evaluation.
	require.Never(t, func() bool {
		n := 0
		for _, nc := range liveClaims(ctx, cp, pool) {
			if conditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				n++
			}
		}
		return n != len(wantDrifted)
	}, 5*time.Second, 500*time.Millisecond, "only the predicted nodes drift")
}

// simulate answers `karpenter simulate` for changes over the live cluster,
// as the CLI does with a kubeconfig.
func simulate(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, changes string) *cli.SimulateAnswer {
	t.Helper()
	o, err := cli.Load(ctx, cp.Client, time.Now())
	require.NoError(t, err)
	s, err := cli.NewSession(o, cli.Options{})
	require.NoError(t, err)
	c, err := cli.ReadChanges([]byte(changes))
	require.NoError(t, err)
	a, err := s.Simulate(ctx, c)
	require.NoError(t, err)
	return a
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
