package migration_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// impossibleArch is the seeds' negative experiment: a pod that selects the
// general-purpose pool and arm64, which that pool (amd64 only) can never
// give it. It lives in its own namespace, as in the seeds, so the fleet
// checks (which watch the default namespace) do not count it.
const impossibleArch = `apiVersion: v1
kind: Namespace
metadata: {name: karpenter-lab}
---
apiVersion: v1
kind: Pod
metadata: {name: impossible-arch, namespace: karpenter-lab}
spec:
  nodeSelector: {capacity.example.io/pool: general-purpose, kubernetes.io/arch: arm64}
  containers:
    - {name: pause, image: public.ecr.aws/eks-distro/kubernetes/pause:3.10, resources: {requests: {cpu: 100m, memory: 64Mi}}}
`

const labNamespace, impossiblePod = "karpenter-lab", "impossible-arch"

// schedulingEvents are the FailedScheduling events on the impossible pod:
// Karpenter's ("Failed to schedule pod, <why>") and the kube-scheduler's
// ("0/N nodes are available: ..."), each last seen at or after since.
func schedulingEvents(ctx context.Context, c client.Client, since time.Time) (karpenter, scheduler []string) {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(labNamespace)); err != nil {
		return nil, nil
	}
	for _, ev := range events.Items {
		last := ev.LastTimestamp.Time
		if last.IsZero() {
			last = ev.EventTime.Time
		}
		if ev.InvolvedObject.Name != impossiblePod || ev.Reason != "FailedScheduling" || last.Before(since.Truncate(time.Second)) {
			continue
		}
		if strings.HasPrefix(ev.Message, "Failed to schedule pod") {
			karpenter = append(karpenter, ev.Message)
		} else {
			scheduler = append(scheduler, ev.Message)
		}
	}
	return karpenter, scheduler
}

// refusalLogged is the controller's "could not schedule pod" log line for
// the impossible pod, or "".
func refusalLogged(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "could not schedule pod") && strings.Contains(line, impossiblePod) {
			return line
		}
	}
	return ""
}

// expectRefused waits until the controller logged as name gives its reason
// for the impossible pod, as the seeds expect: a Karpenter FailedScheduling
// event (last seen at or after since) and a log line naming the
// incompatible arch requirement. The kube-scheduler's own event says the
// node selector matched no node; the pod stays Pending and unbound.
func (e *awsEnv) expectRefused(t *testing.T, ctx context.Context, name string, since time.Time) {
	t.Helper()
	var karpenter, scheduler []string
	var line string
	// The kube-scheduler retries an unschedulable pod only when the
	// cluster changes, so its event is looked for after the pod's creation
	// only; each controller's, after it started.
	fresh := !e.applied.IsZero() && !since.After(e.applied)
	ok := assert.Eventually(t, func() bool {
		karpenter, scheduler = schedulingEvents(ctx, e.cp.Client, since)
		line = refusalLogged(e.cp.LogPath(name))
		return len(karpenter) > 0 && (len(scheduler) > 0 || !fresh) && line != ""
	}, 3*time.Minute, 2*time.Second, "%s gives its reason for %s", name, impossiblePod)
	if !ok {
		t.Logf("Karpenter's events %q, the kube-scheduler's %q, log %q", karpenter, scheduler, line)
		all := &corev1.EventList{}
		_ = e.cp.Client.List(ctx, all, client.InNamespace(labNamespace))
		for _, ev := range all.Items {
			t.Logf("event %s %s x%d last %s from %s: %s", ev.Type, ev.Reason, ev.Count, ev.LastTimestamp, ev.Source.Component, ev.Message)
		}
		t.FailNow()
	}
	for _, msg := range append([]string{line}, karpenter...) {
		require.Contains(t, msg, "kubernetes.io/arch", "%s names the arch requirement", name)
		require.Contains(t, msg, "arm64", "%s names the arch requirement", name)
	}
	t.Logf("%s's reason for %s: event %q; log %s", name, impossiblePod, karpenter[0], line)
	if fresh {
		require.Contains(t, scheduler[0], "node affinity/selector", "the kube-scheduler's event")
		t.Logf("the kube-scheduler's: %q", scheduler[0])
	}
	pod := &corev1.Pod{}
	require.NoError(t, e.cp.Client.Get(ctx, client.ObjectKey{Namespace: labNamespace, Name: impossiblePod}, pod))
	require.Equal(t, corev1.PodPending, pod.Status.Phase)
	require.Empty(t, pod.Spec.NodeName)
}

// negativeExperiment applies the impossible pod while upstream's
// controller runs the fleet before, and checks that upstream refuses it
// with its reason and launches nothing for it.
func (e *awsEnv) negativeExperiment(t *testing.T, ctx context.Context, name string, before fleet) {
	t.Helper()
	instances := e.liveInstances(t, ctx)
	e.applied = time.Now()
	require.NoError(t, controlplane.Apply(ctx, e.cp.Client, []byte(impossibleArch)), "applying the impossible pod")
	e.expectRefused(t, ctx, name, e.applied)
	ncs := &v1.NodeClaimList{}
	require.NoError(t, e.cp.Client.List(ctx, ncs))
	require.Len(t, ncs.Items, len(before.nodeClaims), "no NodeClaim for the impossible pod")
	require.Equal(t, instances, e.liveInstances(t, ctx), "no instance for the impossible pod")
}
