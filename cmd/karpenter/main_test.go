package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cli"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// karpenter runs the CLI in-process against the control plane.
func karpenter(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--kubeconfig", cp.KubeconfigPath}, args...), &out, &errOut)
	require.Equal(t, 0, code, "karpenter %s: %s", strings.Join(args, " "), errOut.String())
	return out.Bytes()
}

func decode[T any](t *testing.T, raw []byte) *T {
	t.Helper()
	v := new(T)
	require.NoError(t, json.Unmarshal(raw, v), string(raw))
	return v
}

func createNodePool(t *testing.T, name string, mutate func(*v1.NodePool)) {
	t.Helper()
	ctx := context.Background()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	if mutate != nil {
		mutate(np)
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	now := metav1.Now()
	np.Status.Conditions = []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now},
		{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded, LastTransitionTime: now},
		{Type: v1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeNodeClassReady, LastTransitionTime: now},
	}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
}

func pod(name string, cpu string, selector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: selector,
			Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}
}

// createNode makes a launched, registered, initialized Karpenter c7a.large
// node of pool with its NodeClaim, as the controller and kwok would have
// left it.
func createNode(t *testing.T, name, pool string) {
	t.Helper()
	createNodeOf(t, name, pool, "c7a.large", "2", false)
}

// createNodeOf is createNode for an instance type of cpu CPUs;
// consolidatable also marks the NodeClaim Consolidatable, as the
// controller does once consolidateAfter has passed.
func createNodeOf(t *testing.T, name, pool, instanceType, cpu string, consolidatable bool) {
	t.Helper()
	ctx := context.Background()
	providerID := "kwok://" + name
	labels := map[string]string{
		v1.NodePoolLabelKey: pool, v1.NodeInitializedLabelKey: "true", v1.NodeRegisteredLabelKey: "true",
		corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelInstanceTypeStable: instanceType,
		corev1.LabelHostname: name, "example.io/node": "kept", v1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "test-zone-a",
	}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	now := metav1.Now()
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = name
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}
	nc.Status.Capacity, nc.Status.Allocatable = alloc, alloc
	conditions := []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady}
	if consolidatable {
		conditions = append(conditions, v1.ConditionTypeConsolidatable)
	}
	for _, c := range conditions {
		nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{Type: c, Status: "True", Reason: c, LastTransitionTime: now})
	}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	require.NoError(t, cp.Client.Create(ctx, node))
	node.Status.Capacity, node.Status.Allocatable = alloc, alloc
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	require.NoError(t, cp.Client.Status().Update(ctx, node))
	// The API server's admission taints new Nodes not-ready; kwok's
	// kubelet and the node lifecycle controller would lift it.
	node.Spec.Taints = nil
	require.NoError(t, cp.Client.Update(ctx, node))
}

// setConsolidatable marks the NodeClaim Consolidatable, as the controller
// does once consolidateAfter has passed, until the test ends.
func setConsolidatable(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	nc := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc))
	before := append([]v1.Condition(nil), nc.Status.Conditions...)
	nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{Type: v1.ConditionTypeConsolidatable, Status: "True", Reason: v1.ConditionTypeConsolidatable, LastTransitionTime: metav1.Now()})
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	t.Cleanup(func() {
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc))
		nc.Status.Conditions = before
		require.NoError(t, cp.Client.Status().Update(ctx, nc))
	})
}

// TestCLI builds one cluster (the seeds' negative experiment, a pool
// blocked by its limit, a node kept by a do-not-disrupt pod) and checks
// every answer online, then the same answers from a saved snapshot.
func TestCLI(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, cp.Client.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}))
	createNodePool(t, "amd64-only", nil)
	createNodePool(t, "limited", func(np *v1.NodePool) {
		np.Spec.Template.SetLabelMap(map[string]string{"team": "limited"})
		np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("1")}
		// Maintenance at 03:00 UTC for an hour: status says when it next
		// opens or closes.
		np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(0)
		np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0", Schedule: ptr.To("0 3 * * *"), Duration: &v1.Duration{Duration: time.Hour}}}
	})
	createNodePool(t, "on-aws", func(np *v1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	})
	createNode(t, "kept-node", "amd64-only")
	// A c7a.xlarge whose four small pods would fit a node a quarter of its
	// price, but each pod has the highest deletion cost: restarting them
	// costs more than the move saves in the planner's 1 h horizon.
	createNodePool(t, "payback", func(np *v1.NodePool) {
		np.Spec.Template.SetLabelMap(map[string]string{"team": "payback"})
	})
	createNodeOf(t, "payback-node", "payback", "c7a.xlarge", "4", true)
	// The provisioner's Nominated event says what payback-node was launched
	// for; one for another NodeClaim does not count.
	for i, target := range []string{"nodeclaim/payback-node", "nodeclaim/payback-node-2"} {
		require.NoError(t, cp.Client.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("costly-%d.nominated", i), Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("costly-%d", i)},
			Reason:         "Nominated", Message: "Pod should schedule on: " + target, Type: corev1.EventTypeNormal,
		}))
	}
	for i := 0; i < 4; i++ {
		p := pod(fmt.Sprintf("costly-%d", i), "100m", nil)
		p.Annotations = map[string]string{v1.PodDeletionCostAnnotationKey: "2147483647"}
		p.Spec.NodeName = "payback-node"
		require.NoError(t, cp.Client.Create(ctx, p))
	}
	kept := pod("kept", "100m", nil)
	kept.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	kept.Spec.NodeName = "kept-node"
	require.NoError(t, cp.Client.Create(ctx, kept))
	require.NoError(t, cp.Client.Create(ctx, pod("arm", "100m", map[string]string{corev1.LabelArchStable: "arm64"})))
	require.NoError(t, cp.Client.Create(ctx, pod("big", "2", map[string]string{"team": "limited"})))
	require.NoError(t, cp.Client.Create(ctx, pod("fits", "100m", nil)))
	require.NoError(t, cp.Client.Create(ctx, pod("pinned", "100m", map[string]string{"example.io/node": "kept"})))

	online := map[string][]byte{}
	answer := func(args ...string) []byte {
		raw := karpenter(t, append([]string{"-o", "json"}, args...)...)
		online[strings.Join(args, " ")] = raw
		return raw
	}

	t.Run("why pod names the arch requirement with both sides", func(t *testing.T) {
		a := decode[cli.PodAnswer](t, answer("why", "pod", "default/arm"))
		assert.Equal(t, "Unschedulable", a.Phase)
		v := verdictFor(t, a, "amd64-only")
		assert.Equal(t, "RequirementMismatch", v.Kind)
		assert.Equal(t, corev1.LabelArchStable, v.Key)
		assert.Contains(t, v.NodePoolValues, "amd64")
		assert.Contains(t, v.PodValues, "arm64")
		aws := verdictFor(t, a, "on-aws")
		assert.Equal(t, "Skipped", aws.Kind)
		assert.Contains(t, aws.Message, "cannot resolve instance types of EC2NodeClass")
		table := string(karpenter(t, "why", "pod", "default/arm"))
		assert.Contains(t, table, corev1.LabelArchStable)
		assert.Contains(t, table, "amd64")
		assert.Contains(t, table, "arm64")
	})
	t.Run("why pod names the limit and the figures", func(t *testing.T) {
		a := decode[cli.PodAnswer](t, answer("why", "pod", "default/big"))
		assert.Equal(t, "Unschedulable", a.Phase)
		v := verdictFor(t, a, "limited")
		assert.Equal(t, "LimitExceeded", v.Kind)
		assert.Equal(t, corev1.ResourceCPU, v.Resource)
		assert.Equal(t, "1", v.Limit)
		assert.NotEmpty(t, v.Needed)
		needed := resource.MustParse(v.Needed)
		assert.Equal(t, 1, needed.Cmp(resource.MustParse("1")), "needed %s must exceed the limit", v.Needed)
		table := string(karpenter(t, "why", "pod", "default/big"))
		assert.Contains(t, table, "LimitExceeded")
		assert.Contains(t, table, "limit 1")
	})
	t.Run("why pod says where a placeable pod goes", func(t *testing.T) {
		a := decode[cli.PodAnswer](t, answer("why", "pod", "default/fits"))
		assert.Equal(t, "Placeable", a.Phase)
		assert.Equal(t, "kept-node", a.Node, "the existing node has room: %+v", a)
		assert.Equal(t, "c7a.large", a.InstanceType)
		assert.Contains(t, a.Message, "nodepool amd64-only")
		p := decode[cli.PodAnswer](t, answer("why", "pod", "default/pinned"))
		assert.Equal(t, "Placeable", p.Phase)
		assert.Equal(t, "kept-node", p.Node, "only the existing node has the label: %+v", p)
		r := decode[cli.PodAnswer](t, answer("why", "pod", "default/kept"))
		assert.Equal(t, "Running", r.Phase)
		assert.Equal(t, "kept-node", r.Node)
		assert.Equal(t, "amd64-only", r.NodePool)
	})
	t.Run("why node names the do-not-disrupt pod", func(t *testing.T) {
		a := decode[cli.NodeAnswer](t, answer("why", "node", "kept-node"))
		require.NotEmpty(t, a.Verdicts, a.Message)
		assert.Equal(t, "PodDoNotDisrupt", a.Verdicts[0].Kind)
		assert.Equal(t, "default/kept", a.Verdicts[0].Pod)
		table := string(karpenter(t, "why", "node", "kept-node"))
		assert.Contains(t, table, "default/kept")
		// Lifting the do-not-disrupt would not help yet: the NodeClaim is
		// not Consolidatable (consolidateAfter).
		u := a.IfUnblocked
		require.NotNil(t, u, "%+v", a)
		assert.Equal(t, []string{"PodDoNotDisrupt"}, u.Blockers)
		assert.Empty(t, u.Method)
		assert.Contains(t, strings.Join(u.StillKept, "\n"), "consolidateAfter")
		assert.Contains(t, table, "if unblocked (PodDoNotDisrupt lifted), still kept")
		// A node nothing a user can lift blocks has no such answer.
		up := decode[cli.NodeAnswer](t, karpenter(t, "-o", "json", "why", "node", "payback-node"))
		assert.Nil(t, up.IfUnblocked)
	})
	t.Run("why node gives the saving a do-not-disrupt pod costs", func(t *testing.T) {
		// Once consolidateAfter has passed, the c7a.large under one 100m
		// do-not-disrupt pod (and a pending 100m pod) would be replaced by
		// a cheaper node if the annotation went.
		setConsolidatable(t, "kept-node")
		a := decode[cli.NodeAnswer](t, karpenter(t, "-o", "json", "why", "node", "kept-node"))
		require.NotEmpty(t, a.Verdicts, a.Message)
		assert.Equal(t, "PodDoNotDisrupt", a.Verdicts[0].Kind)
		u := a.IfUnblocked
		require.NotNil(t, u, "%+v", a)
		assert.Equal(t, string(v1.DisruptionReasonUnderutilized), u.Method, "still kept: %v", u.StillKept)
		assert.Contains(t, u.Candidates, "kept-node")
		assert.Greater(t, u.SavingPerHour, 0.0)
		assert.Contains(t, string(karpenter(t, "why", "node", "kept-node")), "if unblocked (PodDoNotDisrupt lifted): Underutilized")
	})
	t.Run("why node gives the payback gate's saving and cost", func(t *testing.T) {
		// Not compared offline byte for byte: the disruption cost scales
		// with the NodeClaim's lifetime left, which shrinks between the two
		// reads (checked with a tolerance in the snapshot test).
		a := decode[cli.NodeAnswer](t, karpenter(t, "-o", "json", "--consolidation-algorithm", "planner", "why", "node", "payback-node"))
		require.Empty(t, a.Disrupting, a.Message)
		var gate *cli.NodeVerdict
		for i := range a.Verdicts {
			if a.Verdicts[i].Payback != nil {
				gate = &a.Verdicts[i]
			}
		}
		require.NotNil(t, gate, "a payback verdict in %+v", a.Verdicts)
		assert.Equal(t, []string{"default/costly-0"}, a.LaunchedFor, "from the Nominated event naming the NodeClaim")
		assert.Equal(t, "SavingBelowPayback", gate.Kind)
		pb := gate.Payback
		assert.InDelta(t, 0.0977, pb.PricePerHour, 0.001, "the c7a.xlarge's on-demand price")
		assert.Less(t, pb.ReplacementPricePerHour, pb.PricePerHour)
		assert.Equal(t, "1h0m0s", pb.Horizon)
		assert.InDelta(t, pb.PricePerHour-pb.ReplacementPricePerHour, pb.Saving, 1e-6, "the saving is an hour of the price difference")
		// Four pods of eviction cost 10 (the clamp) at $0.009 each.
		assert.InDelta(t, 0.36, pb.DisruptionCost, 0.02)
		assert.Equal(t, 4, pb.Evictions)
		assert.Less(t, pb.Saving, pb.DisruptionCost)
		table := string(karpenter(t, "--consolidation-algorithm", "planner", "why", "node", "payback-node"))
		assert.Contains(t, table, "below the disruption cost")
		// The controller's gate settings change the answer: a tenth of a
		// cent per pod, or a ten-hour horizon, and the move pays.
		for _, flags := range [][]string{{"--consolidation-restart-cost", "0.001"}, {"--consolidation-payback-horizon", "10h"}} {
			args := append(append([]string{"-o", "json", "--consolidation-algorithm", "planner"}, flags...), "why", "node", "payback-node")
			cheap := decode[cli.NodeAnswer](t, karpenter(t, args...))
			assert.Equal(t, string(v1.DisruptionReasonUnderutilized), cheap.Disrupting, "%v: %s", flags, cheap.Message)
		}
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "--consolidation-restart-cost", "0", "status"}, io.Discard, io.Discard))
		// Upstream's single-node consolidation takes any saving.
		up := decode[cli.NodeAnswer](t, answer("why", "node", "payback-node"))
		assert.Equal(t, string(v1.DisruptionReasonUnderutilized), up.Disrupting, up.Message)
		var out, errOut bytes.Buffer
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "--consolidation-algorithm", "greedy", "status"}, &out, &errOut))
		assert.Contains(t, errOut.String(), "consolidation-algorithm")
	})
	t.Run("simulate a new pool with a Deployment, and a requirement change", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "changes.yaml")
		require.NoError(t, os.WriteFile(file, []byte(simulateChanges), 0o600))
		a := decode[cli.SimulateAnswer](t, karpenter(t, "-o", "json", "simulate", "-f", file))
		assert.Equal(t, 3, a.PodsAdded)
		// 1.5-CPU pods on c7a.xlarge (4 vCPU, a little less allocatable):
		// two per node, so two NodeClaims for three pods.
		var sim []cli.SimulatedNodeClaim
		for _, nc := range a.NodeClaims {
			if nc.NodePool == "sim" {
				sim = append(sim, nc)
			}
		}
		require.Len(t, sim, 2, "%+v", a.NodeClaims)
		pods := 0
		for _, nc := range sim {
			assert.Equal(t, "c7a.xlarge", nc.InstanceType)
			assert.Equal(t, 1, nc.InstanceTypes)
			assert.InDelta(t, 0.0977, nc.Price, 0.001)
			pods += nc.Pods
		}
		assert.Equal(t, 3, pods)
		// amd64-only now allows only c7a.xlarge: its c7a.large drifts.
		require.Len(t, a.Drifted, 1, "%+v", a.Drifted)
		assert.Equal(t, "kept-node", a.Drifted[0].Node)
		assert.Equal(t, "RequirementsDrifted", a.Drifted[0].Reason)
		// The cost after adds the new NodeClaims (and whatever the next
		// disruption pass replaces or removes).
		delta := 0.0
		for _, nc := range a.NodeClaims {
			delta += nc.Price
		}
		assert.Greater(t, a.CostAfter, a.CostBefore)
		if len(a.Disruptions) == 0 {
			assert.InDelta(t, a.CostBefore+delta, a.CostAfter, 1e-9)
		}
		table := string(karpenter(t, "simulate", "-f", file))
		t.Logf("$ karpenter simulate -f changes.yaml\n%s", table)
		assert.Contains(t, table, "RequirementsDrifted")
		assert.Contains(t, table, "c7a.xlarge")

		var out, errOut bytes.Buffer
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n"), 0o600))
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "simulate", "-f", bad}, &out, &errOut))
		assert.Contains(t, errOut.String(), "Service cannot be simulated")
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "simulate"}, &out, &errOut))
		assert.Contains(t, errOut.String(), "-f")
	})
	t.Run("status", func(t *testing.T) {
		a := decode[cli.StatusAnswer](t, answer("status"))
		require.Len(t, a.NodePools, 4)
		assert.Equal(t, "amd64-only", a.NodePools[0].Name)
		assert.Equal(t, 1, a.NodePools[0].Nodes)
		assert.Equal(t, "2", a.NodePools[0].Usage["cpu"])
		// The default budget is 10% of 1 node, rounded up: 1.
		assert.Equal(t, 1, a.NodePools[0].AllowedDisruptions[string(v1.DisruptionReasonDrifted)])
		assert.Equal(t, "limited", a.NodePools[1].Name)
		assert.Equal(t, "1", a.NodePools[1].Limits["cpu"])
		// The window [03:00, 04:00) UTC closes at 04:00 while open, and
		// otherwise opens at the next 03:00.
		now := time.Now().UTC()
		want := time.Date(now.Year(), now.Month(), now.Day(), 3, 0, 0, 0, time.UTC)
		if now.Hour() == 3 {
			want = want.Add(time.Hour)
		} else if !want.After(now) {
			want = want.AddDate(0, 0, 1)
		}
		require.NotNil(t, a.NodePools[1].NextBudgetChange, "a scheduled budget changes")
		assert.True(t, want.Equal(*a.NodePools[1].NextBudgetChange), "next budget change %s, want %s", a.NodePools[1].NextBudgetChange, want)
		assert.Nil(t, a.NodePools[0].NextBudgetChange, "the default budget never changes")
		its, err := kwok.LoadCatalog(kwok.CatalogDefault)
		require.NoError(t, err)
		var price float64
		for _, it := range its {
			for _, o := range it.Offerings {
				if it.Name == "c7a.large" && o.Zone == "test-zone-a" && o.CapacityType == "on-demand" {
					price = o.Price
				}
			}
		}
		require.NotZero(t, price)
		assert.InDelta(t, price, a.NodePools[0].CostPerHour, 1e-9)
		assert.Zero(t, a.NodePools[0].Unpriced)
	})
	t.Run("tables and yaml", func(t *testing.T) {
		for _, args := range [][]string{{"status"}, {"why", "pod", "default/big"}, {"why", "pod", "default/fits"}, {"why", "node", "kept-node"}} {
			t.Logf("$ karpenter %s\n%s", strings.Join(args, " "), karpenter(t, args...))
		}
		st := &cli.StatusAnswer{}
		require.NoError(t, yaml.Unmarshal(karpenter(t, "-o", "yaml", "status"), st))
		assert.Len(t, st.NodePools, 4)
		var out, errOut bytes.Buffer
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "-o", "xml", "status"}, &out, &errOut))
		assert.Contains(t, errOut.String(), "unknown output format")
		assert.Equal(t, 1, run(ctx, []string{"--kubeconfig", cp.KubeconfigPath, "why", "pod", "default/missing"}, &out, &errOut))
		assert.Contains(t, errOut.String(), "not found")
	})
	t.Run("snapshot then --snapshot answers the same offline", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "snap.yaml")
		require.NoError(t, os.WriteFile(file, karpenter(t, "snapshot", "-o", "yaml"), 0o600))
		require.NotEmpty(t, online)
		for args, want := range online {
			var out, errOut bytes.Buffer
			// No kubeconfig: the answer must come from the file alone.
			code := run(ctx, append([]string{"--kubeconfig", "/nonexistent", "--snapshot", file, "-o", "json"}, strings.Fields(args)...), &out, &errOut)
			require.Equal(t, 0, code, errOut.String())
			assert.JSONEq(t, string(want), out.String(), args)
		}
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"--kubeconfig", "/nonexistent", "--snapshot", file, "-o", "json", "--consolidation-algorithm", "planner", "why", "node", "payback-node"}, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		a := decode[cli.NodeAnswer](t, out.Bytes())
		// Emptiness, drift, then the planner's payback gate.
		require.Len(t, a.Verdicts, 3)
		assert.Equal(t, "NotEmpty", string(a.Verdicts[0].Kind))
		require.NotNil(t, a.Verdicts[2].Payback)
		assert.InDelta(t, 0.36, a.Verdicts[2].Payback.DisruptionCost, 0.02)
	})
}

func verdictFor(t *testing.T, a *cli.PodAnswer, pool string) cli.PoolVerdict {
	t.Helper()
	for _, v := range a.NodePools {
		if v.NodePool == pool {
			return v
		}
	}
	t.Fatalf("no verdict for nodepool %s in %+v", pool, a)
	return cli.PoolVerdict{}
}

// TestStatusNotReady checks that a NodeClaim that has not launched is
// listed with the first condition it is waiting for.
func TestStatusNotReady(t *testing.T) {
	ctx := context.Background()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "launching", Labels: map[string]string{v1.NodePoolLabelKey: "amd64-only"}}}
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, nc) })
	nc.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeLaunched, Status: "False", Reason: "InsufficientCapacity",
		Message: "all offerings are unavailable", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	a := decode[cli.StatusAnswer](t, karpenter(t, "-o", "json", "status"))
	var found *cli.ClaimStatus
	for i := range a.NotReady {
		if a.NotReady[i].Name == "launching" {
			found = &a.NotReady[i]
		}
	}
	require.NotNil(t, found, "%+v", a.NotReady)
	assert.Equal(t, v1.ConditionTypeLaunched, found.Condition)
	assert.Equal(t, "InsufficientCapacity", found.Reason)
	assert.Equal(t, "amd64-only", found.NodePool)
	for _, c := range a.NotReady {
		assert.NotEqual(t, "kept-node", c.Name, "a Ready NodeClaim is not listed")
	}
	assert.Contains(t, string(karpenter(t, "status")), "all offerings are unavailable")
}

// simulateChanges adds a pool "sim" of on-demand c7a.xlarge (written
// without its disruption block, which the schema defaults fill in) with a
// three-replica Deployment of 1.5-CPU pods for it, and narrows amd64-only
// to c7a.xlarge.
const simulateChanges = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: sim
spec:
  template:
    metadata:
      labels:
        team: sim
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c7a.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: amd64-only
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c7a.xlarge]}
  disruption:
    consolidateAfter: 0s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {team: sim}
      containers:
        - name: c
          image: pause
          resources:
            requests: {cpu: 1500m}
`
