package migration_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// poolLabel is the template label each NodePool gives its nodes and its
// Deployment selects.
const poolLabel = "migration.example.io/pool"

// pools: one with a node budget of 1, one whose pods are do-not-disrupt,
// one whose pods a PDB covers; each Deployment puts one pod on each node.
var pools = []struct {
	name, podAnnotations string
	replicas             int
	pdb                  bool
}{
	{name: "budget", replicas: 7},
	{name: "dnd", replicas: 7, podAnnotations: `{karpenter.sh/do-not-disrupt: "true"}`},
	{name: "pdb", replicas: 7, pdb: true},
}

// The budget pool's template is written the way a user writes one and not
// as the API server stores it: expireAfter and the budget's reasons left to
// their defaults, requirement values and taints out of order. Both
// controllers hash what is stored, so none of this may read as drift.
const nodePoolTemplate = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    metadata:
      labels: {%[2]s: %[1]s}
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: kubernetes.io/arch, operator: In, values: [arm64, amd64]}
      taints:
        - {key: migration.example.io/z, value: "1", effect: NoSchedule}
        - {key: migration.example.io/a, value: "1", effect: NoSchedule}
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets: [{nodes: "%[3]s"}]
`

// The pods tolerate the pools' taints by key only: a pod that tolerates
// every taint also tolerates karpenter.sh/disrupted, so both
// implementations count it as staying put and its node as empty.
const deploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: default}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations: %[4]s
    spec:
      nodeSelector: {%[2]s: %[1]s}
      tolerations: [{key: migration.example.io/z, operator: Exists}, {key: migration.example.io/a, operator: Exists}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: %[1]s}}}
      containers:
        - {name: pause, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 500m, memory: 128Mi}}}
`

const pdbTemplate = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: %[1]s, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: %[1]s}}
`

func applyFleet(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) int {
	t.Helper()
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(`apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
`)))
	total := 0
	for _, p := range pools {
		budget := "100%"
		if p.name == "budget" {
			budget = "1"
		}
		ann := p.podAnnotations
		if ann == "" {
			ann = "{}"
		}
		docs := fmt.Sprintf(nodePoolTemplate, p.name, poolLabel, budget) + "---\n" + fmt.Sprintf(deploymentTemplate, p.name, poolLabel, p.replicas, ann)
		if p.pdb {
			docs += "---\n" + fmt.Sprintf(pdbTemplate, p.name)
		}
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(docs)), p.name)
		total += p.replicas
	}
	return total
}

// fleet is what the switch must leave alone.
type fleet struct {
	nodeClaims map[string]types.UID
	nodes      map[string]types.UID
	pods       map[string]types.UID
	poolStatus map[string]string
}

// observe reads the fleet and says what is missing for it to be whole:
// want pods running in the default namespace, every NodeClaim Initialized
// and carrying the NodePool hash, as many Nodes as NodeClaims, and each
// NodePool's status counting its NodeClaims and its Nodes' capacity.
func observe(t *testing.T, ctx context.Context, c client.Client, want int) (fleet, string) {
	t.Helper()
	f := fleet{nodeClaims: map[string]types.UID{}, nodes: map[string]types.UID{}, pods: map[string]types.UID{}, poolStatus: map[string]string{}}
	ncs := &v1.NodeClaimList{}
	require.NoError(t, c.List(ctx, ncs))
	var notReady []string
	for _, nc := range ncs.Items {
		f.nodeClaims[nc.Name] = nc.UID
		if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || nc.Annotations[v1.NodePoolHashAnnotationKey] == "" {
			notReady = append(notReady, "nodeclaim "+nc.Name)
		}
	}
	nodes := &corev1.NodeList{}
	require.NoError(t, c.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}))
	capacity := map[string]corev1.ResourceList{}
	for _, n := range nodes.Items {
		f.nodes[n.Name] = n.UID
		pool := n.Labels[v1.NodePoolLabelKey]
		if capacity[pool] == nil {
			capacity[pool] = corev1.ResourceList{}
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
			q := capacity[pool][r]
			q.Add(n.Status.Capacity[r])
			capacity[pool][r] = q
		}
	}
	pods := &corev1.PodList{}
	require.NoError(t, c.List(ctx, pods, client.InNamespace("default")))
	running := 0
	for _, p := range pods.Items {
		f.pods[p.Name] = p.UID
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	perPool := map[string]int64{}
	for _, nc := range ncs.Items {
		perPool[nc.Labels[v1.NodePoolLabelKey]]++
	}
	nps := &v1.NodePoolList{}
	require.NoError(t, c.List(ctx, nps))
	for _, np := range nps.Items {
		if np.Status.Nodes == nil || *np.Status.Nodes != perPool[np.Name] {
			notReady = append(notReady, "nodepool status "+np.Name)
		}
		for r, q := range capacity[np.Name] {
			if got := np.Status.Resources[r]; got.Cmp(q) != 0 {
				notReady = append(notReady, fmt.Sprintf("nodepool %s status %s=%s, its nodes' capacity %s", np.Name, r, got.String(), q.String()))
			}
		}
		nodes := int64(-1)
		if np.Status.Nodes != nil {
			nodes = *np.Status.Nodes
		}
		res := make([]string, 0, len(np.Status.Resources))
		for k, q := range np.Status.Resources {
			// Extended resources are left out: upstream's AWS controller
			// lists vpc.amazonaws.com/pod-eni from the NodeClaim's
			// capacity, at 0 or at the instance type's count depending on
			// when it last counted, where ours counts the Node's capacity
			// (a known difference, docs/migration.md).
			if k != corev1.ResourceCPU && k != corev1.ResourceMemory && k != corev1.ResourcePods && k != corev1.ResourceEphemeralStorage && k != v1.ResourceNodes {
				continue
			}
			res = append(res, string(k)+"="+q.String())
		}
		sort.Strings(res)
		f.poolStatus[np.Name] = fmt.Sprintf("nodes=%d resources=%v", nodes, res)
	}
	switch {
	case running != want:
		return f, fmt.Sprintf("%d of %d pods running", running, want)
	case len(notReady) > 0:
		return f, fmt.Sprintf("not ready: %v", notReady)
	case len(f.nodeClaims) != len(f.nodes):
		return f, fmt.Sprintf("%d NodeClaims and %d Nodes", len(f.nodeClaims), len(f.nodes))
	}
	return f, ""
}

func conditionTrue(conds []v1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

func waitFleet(t *testing.T, ctx context.Context, c client.Client, want int, timeout time.Duration) fleet {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f, missing := observe(t, ctx, c, want)
		if missing == "" {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet not ready after %s: %s", timeout, missing)
		}
		time.Sleep(2 * time.Second)
	}
}

// unchanged is what broke since before: a NodeClaim Drifted, or deleted or
// being deleted, a Node or a pod gone, a NodePool status moved.
func unchanged(t *testing.T, ctx context.Context, c client.Client, before fleet, want int) func() string {
	return func() string {
		ncs := &v1.NodeClaimList{}
		if err := c.List(ctx, ncs); err != nil {
			return ""
		}
		for _, nc := range ncs.Items {
			if conditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				return "NodeClaim " + nc.Name + " Drifted"
			}
			if nc.DeletionTimestamp != nil {
				return "NodeClaim " + nc.Name + " is being deleted"
			}
		}
		now, _ := observe(t, ctx, c, want)
		for _, cmp := range []struct {
			kind          string
			before, after map[string]types.UID
		}{{"NodeClaim", before.nodeClaims, now.nodeClaims}, {"Node", before.nodes, now.nodes}, {"Pod", before.pods, now.pods}} {
			if d := diff(cmp.before, cmp.after); d != "" {
				return cmp.kind + "s changed: " + d
			}
		}
		for name, s := range before.poolStatus {
			if now.poolStatus[name] != s {
				return fmt.Sprintf("NodePool %s status %s, was %s", name, now.poolStatus[name], s)
			}
		}
		return ""
	}
}

func diff(before, after map[string]types.UID) string {
	var out []string
	for k, uid := range before {
		if after[k] != uid {
			out = append(out, "-"+k)
		}
	}
	for k, uid := range after {
		if before[k] != uid {
			out = append(out, "+"+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestMigrationKWOK: upstream's kwok controller builds the fleet; ours takes
// over and for 5 minutes (and at least 3 of its disruption passes) drifts,
// disrupts and deletes nothing; a real template change then drifts the
// budgeted pool, replaced at most one node at a time; upstream takes over
// again with the same quiet.
func TestMigrationKWOK(t *testing.T) {
	// Most of the test is quiet windows; the other test's fit beside it.
	t.Parallel()
	ctx := context.Background()
	cp := cluster(t)
	want := applyFleet(t, ctx, cp)

	up := startUpstreamKWOK(t, cp, "upstream")
	defer dumpLogs(t, cp, "upstream", "ours", "upstream-again")
	before := waitFleet(t, ctx, cp.Client, want, 8*time.Minute)
	require.Len(t, before.nodeClaims, want, "one node per pod")
	t.Logf("upstream built %d NodeClaims", len(before.nodeClaims))
	cp.Kill(up.pid)

	me := startOurs(t, cp, "ours", "--kwok-catalog=upstream-kwok")
	quietFor(t, ctx, me.port, 3, 5*time.Minute, 10*time.Minute, unchanged(t, ctx, cp.Client, before, want))

	// A real change: the budgeted pool's nodes drift and are replaced one
	// at a time; the other pools' are untouched.
	np := &v1.NodePool{}
	require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Name: "budget"}, np))
	np.Spec.Template.Labels["migration.example.io/revision"] = "2"
	require.NoError(t, cp.Client.Update(ctx, np))
	replaced := waitReplaced(t, ctx, cp.Client, before, want, 15*time.Minute)
	t.Logf("drift replaced %d NodeClaims of the budgeted pool", replaced)

	after := waitFleet(t, ctx, cp.Client, want, 5*time.Minute)
	cp.Kill(me.pid)
	again := startUpstreamKWOK(t, cp, "upstream-again")
	quietFor(t, ctx, again.port, 3, 5*time.Minute, 10*time.Minute, unchanged(t, ctx, cp.Client, after, want))
}

// waitReplaced waits until every NodeClaim of the budgeted pool in before
// is gone and the fleet is whole again, failing if more than one of the
// pool's NodeClaims is being deleted at once or another pool's changes.
func waitReplaced(t *testing.T, ctx context.Context, c client.Client, before fleet, want int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ncs := &v1.NodeClaimList{}
		require.NoError(t, c.List(ctx, ncs))
		deleting, old := 0, 0
		for _, nc := range ncs.Items {
			pool := nc.Labels[v1.NodePoolLabelKey]
			if pool != "budget" {
				require.Equal(t, before.nodeClaims[nc.Name], nc.UID, "NodeClaim %s of pool %s changed", nc.Name, pool)
				require.Nil(t, nc.DeletionTimestamp, "NodeClaim %s of pool %s is being deleted", nc.Name, pool)
				continue
			}
			if nc.DeletionTimestamp != nil {
				deleting++
			}
			if before.nodeClaims[nc.Name] == nc.UID {
				old++
			}
		}
		require.LessOrEqual(t, deleting, 1, "the budget allows one disruption at a time")
		if old == 0 {
			if _, missing := observe(t, ctx, c, want); missing == "" {
				return budgetReplicas()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of the budgeted pool's NodeClaims are still there", timeout, old)
		}
		time.Sleep(time.Second)
	}
}

func budgetReplicas() int {
	for _, p := range pools {
		if p.name == "budget" {
			return p.replicas
		}
	}
	return 0
}

func dumpLogs(t *testing.T, cp *controlplane.ControlPlane, names ...string) {
	if !t.Failed() {
		return
	}
	for _, n := range names {
		if b, err := os.ReadFile(cp.LogPath(n)); err == nil {
			s := string(b)
			if len(s) > 6000 {
				s = s[len(s)-6000:]
			}
			t.Logf("%s log (tail):\n%s", n, s)
		}
	}
}
