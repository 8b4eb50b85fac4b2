package parity_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestUpstreamDashboardsSeries runs the controller through a scale-up and a
// consolidation of a pool with a cpu limit and a DaemonSet (as a cluster
// those dashboards watch has) and then checks that every metric upstream's three Grafana
// dashboards (capacity, performance, controllers) query is served: the
// dashboards' names are in pkg/metrics/testdata/upstream-dashboards.txt. A
// histogram counts as served when its _bucket series is; names the
// dashboards query with a suffix (_bucket, _count) must be served as such.
func TestUpstreamDashboardsSeries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dashboards := readDashboards(t)
	cp := cluster(t)
	applyExample(t, ctx, cp, "02-kwoknodeclass.yaml")
	apply(t, ctx, cp,
		nodePool{name: "dash", instanceTypes: []string{"c7a.xlarge"}, consolidateAfter: "0s", cpuLimit: "100"}.yaml(),
		deployment{name: "dash", pool: "dash", replicas: 6, cpu: "1"}.yaml(),
		daemonSet("dash-agent", "dash"),
	)
	port := startController(t, cp, nil)

	require.Eventually(t, func() bool {
		return runningPods(ctx, cp, "dash") == 6 && len(liveNodeClaims(ctx, cp, "dash")) >= 2
	}, 3*time.Minute, time.Second, "the scale-up should run 6 pods on at least 2 nodes")
	before := len(liveNodeClaims(ctx, cp, "dash"))
	scaleDeployment(t, ctx, cp, "dash", 1)
	require.Eventually(t, func() bool {
		return runningPods(ctx, cp, "dash") == 1 && len(liveNodeClaims(ctx, cp, "dash")) < before
	}, 3*time.Minute, time.Second, "consolidation should remove a node once 1 pod is left")

	// The node gauges refresh every 5s and the scheduler's, the pod and the
	// termination series are written as things happen: poll until every
	// name is served or the time is up, then report what is missing.
	var missing map[string][]string
	assert.Eventually(t, func() bool {
		served, err := seriesNames(ctx, port)
		if err != nil {
			missing = map[string][]string{"scrape": {err.Error()}}
			return false
		}
		missing = map[string][]string{}
		for dashboard, names := range dashboards {
			for _, name := range names {
				if !served[name] && !served[name+"_bucket"] {
					missing[dashboard] = append(missing[dashboard], name)
				}
			}
		}
		return len(missing) == 0
	}, time.Minute, 2*time.Second)
	assert.Empty(t, missing, "dashboard metrics the controller does not serve")
}

// readDashboards reads the dashboards' metric names by dashboard.
func readDashboards(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "pkg", "metrics", "testdata", "upstream-dashboards.txt"))
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	current := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			current = strings.Trim(line, "[]")
		default:
			require.NotEmpty(t, current, "a name before any [dashboard] header")
			out[current] = append(out[current], line)
		}
	}
	require.NoError(t, sc.Err())
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"karpenter-capacity-dashboard", "karpenter-controllers", "karpenter-performance-dashboard"}, keys)
	return out
}

// runningPods counts app's Running pods that are not being deleted.
func runningPods(ctx context.Context, cp *controlplane.ControlPlane, app string) int {
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}

// liveNodeClaims are the pool's NodeClaims that are not being deleted.
func liveNodeClaims(ctx context.Context, cp *controlplane.ControlPlane, pool string) []v1.NodeClaim {
	var list v1.NodeClaimList
	if err := cp.Client.List(ctx, &list, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		return nil
	}
	var out []v1.NodeClaim
	for _, nc := range list.Items {
		if nc.DeletionTimestamp.IsZero() {
			out = append(out, nc)
		}
	}
	return out
}

func scaleDeployment(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, name string, replicas int32) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		return cp.Client.Update(ctx, d)
	}))
}
