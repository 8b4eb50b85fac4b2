package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// applyExamples applies the kwok NodeClass and the lab pool of examples/.
func applyExamples(t testing.TB, ctx context.Context, cp *controlplane.ControlPlane, files ...string) {
	t.Helper()
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join("../../examples", f))
		require.NoError(t, err)
		require.NoError(t, controlplane.Apply(ctx, cp.Client, raw), f)
	}
}

// TestPositiveExperiment is the seeds' positive experiment: inflate (cpu 1,
// memory 256Mi, a nodeSelector on a template label of the pool) scaled from
// 0 to 8. NodeClaims go Launched → Registered → Initialized → Ready, all 8
// pods run on our nodes, and the kube-scheduler made every binding.
func TestPositiveExperiment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml", "03-nodepool-lab.yaml", "04-inflate.yaml")
	startController(t, cp, "controller")

	scale(t, ctx, cp, "inflate", 8)

	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 8
	}, 3*time.Minute, time.Second, "8 inflate pods should run on lab-general nodes")

	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.NotEmpty(t, claims.Items)
	for _, nc := range claims.Items {
		require.Equal(t, "lab-general", nc.Labels[v1.NodePoolLabelKey])
		require.NotEmpty(t, nc.Status.ProviderID)
		for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
			require.Truef(t, conditionTrue(nc.Status.Conditions, cond), "%s %s not True: %+v", nc.Name, cond, nc.Status.Conditions)
		}
		require.Len(t, nc.OwnerReferences, 1)
		require.Equal(t, "NodePool", nc.OwnerReferences[0].Kind)
	}

	// Every binding came from the kube-scheduler, not from us.
	var events corev1.EventList
	require.NoError(t, cp.Client.List(ctx, &events, client.InNamespace("default")))
	scheduled := map[string]bool{}
	for _, e := range events.Items {
		if e.Reason == "Scheduled" && e.Source.Component == "default-scheduler" || e.Reason == "Scheduled" && e.ReportingController == "default-scheduler" {
			scheduled[e.InvolvedObject.Name] = true
		}
	}
	var pods corev1.PodList
	require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}))
	for _, p := range pods.Items {
		require.Truef(t, scheduled[p.Name], "pod %s has no Scheduled event from default-scheduler", p.Name)
	}

	log := controllerLog(t, cp)
	for _, msg := range []string{"found provisionable pod(s)", "computed new nodeclaim(s) to fit pod(s)", "created nodeclaim", "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"} {
		require.Contains(t, log, `"message":"`+msg+`"`)
	}
}

// TestNegativeExperiment is the seeds' negative experiment: an arm64 pod
// against an amd64-only pool stays Pending, no NodeClaim is created, and an
// event and a log line name the incompatible requirement.
func TestNegativeExperiment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml", "03-nodepool-lab.yaml")
	startController(t, cp, "controller")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "arm64-only"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"capacity.example.io/pool": "lab-general", corev1.LabelArchStable: "arm64"},
			Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, pod))

	var reason string
	require.Eventually(t, func() bool {
		var events corev1.EventList
		if err := cp.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == pod.Name && e.Reason == "FailedScheduling" && strings.Contains(e.Message, corev1.LabelArchStable) && strings.Contains(e.Message, "arm64") && (e.Source.Component == "karpenter" || e.ReportingController == "karpenter") {
				reason = e.Message
				return true
			}
		}
		return false
	}, 90*time.Second, time.Second, "a karpenter FailedScheduling event should name kubernetes.io/arch")
	t.Logf("event: %s", reason)

	require.Contains(t, controllerLog(t, cp), corev1.LabelArchStable)
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.Empty(t, claims.Items, "no NodeClaim for an incompatible pod")
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod))
	require.Equal(t, corev1.PodPending, pod.Status.Phase)
	require.Empty(t, pod.Spec.NodeName)
}

func runningOnOurNodes(ctx context.Context, t testing.TB, cp *controlplane.ControlPlane, selector string) int {
	k, v, _ := strings.Cut(selector, "=")
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.MatchingLabels{k: v}); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		node := &corev1.Node{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			continue
		}
		if node.Labels[v1.NodePoolLabelKey] != "" {
			n++
		}
	}
	return n
}

// condition finds the condition of type t, nil when there is none.
func condition(conds []v1.Condition, t string) *v1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func conditionTrue(conds []v1.Condition, t string) bool {
	c := condition(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

func controllerLog(t testing.TB, cp *controlplane.ControlPlane) string {
	t.Helper()
	b, err := os.ReadFile(cp.LogPath("controller"))
	require.NoError(t, err)
	return string(b)
}
