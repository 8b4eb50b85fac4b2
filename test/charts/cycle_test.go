package charts_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const cycleObjects = `
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: 1s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: rbac
spec:
  template:
    metadata:
      labels:
        rbac.example.io/pool: rbac
    spec:
      # Drain's deadline: the guarded pod, whose PDB refuses every
      # eviction, is deleted once it passes.
      terminationGracePeriod: 5s
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels:
      app: inflate
  template:
    metadata:
      labels:
        app: inflate
    spec:
      nodeSelector:
        rbac.example.io/pool: rbac
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: pause
          resources:
            requests:
              cpu: "1"
              memory: 256Mi
`

// drainWorkloadsYAML are the cycles' workloads beside inflate, for NodePool
// POOL: a pod with a PersistentVolumeClaim (the volume kinds are read), a
// pod whose PDB refuses every eviction (drain deletes it once the pool's
// terminationGracePeriod has passed) and a pod no instance type fits (every
// provisioning round, one each 10 s while it is pending, records the same
// FailedScheduling event, which the event recorder then patches instead of
// creating again).
const drainWorkloadsYAML = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: rbac-local
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: rbac-data
spec:
  storageClassName: rbac-local
  capacity:
    storage: 1Gi
  accessModes: ["ReadWriteOnce"]
  hostPath:
    path: /tmp/rbac-data
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: rbac-data
  namespace: default
spec:
  storageClassName: rbac-local
  accessModes: ["ReadWriteOnce"]
  resources:
    requests:
      storage: 1Gi
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: stateful
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels:
      app: stateful
  template:
    metadata:
      labels:
        app: stateful
    spec:
      nodeSelector:
        karpenter.sh/nodepool: POOL
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: pause
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
      volumes:
        - name: data
          persistentVolumeClaim:
            claimName: rbac-data
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: guarded
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels:
      app: guarded
  template:
    metadata:
      labels:
        app: guarded
    spec:
      nodeSelector:
        karpenter.sh/nodepool: POOL
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: pause
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
---
apiVersion: v1
kind: Pod
metadata:
  name: oversized
  namespace: default
spec:
  nodeSelector:
    karpenter.sh/nodepool: POOL
  containers:
    - name: pause
      image: pause
      resources:
        requests:
          cpu: "1000"
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: guarded
  namespace: default
spec:
  maxUnavailable: 0
  selector:
    matchLabels:
      app: guarded
`

func drainWorkloads(pool string) string { return strings.ReplaceAll(drainWorkloadsYAML, "POOL", pool) }

// TestServiceAccountCycle runs the controller as the chart's ServiceAccount
// through provisioning (NodeClaims, Nodes created by the kwok provider; one
// pod with a PersistentVolumeClaim, so volumes are read too),
// termination of the NodeClaims that carry an inflate pod and the guarded
// pod (cordon, evictions, the guarded pod's refused by its PDB until the
// pool's terminationGracePeriod passes and drain deletes it, the
// replacement for the moved pods), a pod no instance type fits (its
// FailedScheduling event repeated) and emptiness consolidation after a
// scale-down, and finds no forbidden request in its log. Then it proves
// every rule the chart grants in kwok mode needed (rbac_test.go).
func TestServiceAccountCycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "karpenter"
	sa := chartServiceAccount(ns)
	cp, err := controlplane.Start(ctx, cycleControlPlane(sa))
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	// No replicas: the pods could never run here (no image), and the
	// controller runs as a process below, as their ServiceAccount. The
	// kwok provider, one value away from the default AWS provider.
	values := []string{"--set", "replicas=0", "--set", "kwok.enabled=true"}
	kube := []string{"KUBECONFIG=" + cp.KubeconfigPath}
	helm(t, kube, append([]string{"install", "karpenter", chartDir(t, "karpenter"),
		"--namespace", ns, "--create-namespace"}, values...)...)
	logPath := startAsServiceAccount(ctx, t, cp, ns, values, []string{shortEventDedupe})

	for _, o := range documents(t, cycleObjects+"---\n"+drainWorkloads("rbac")) {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Provisioning.
	pods := waitRunning(ctx, t, cp, logPath, "inflate", 2)
	waitRunning(ctx, t, cp, logPath, "stateful", 1)
	guarded := waitRunning(ctx, t, cp, logPath, "guarded", 1)[0]
	claims := nodeClaims(ctx, t, cp)
	if len(claims) == 0 {
		t.Fatal("pods run but no NodeClaim exists")
	}

	// Termination: delete the NodeClaims under an inflate pod and under
	// the guarded pod; their pods are evicted, the guarded one deleted at
	// the deadline, and provisioned for again.
	victims := map[string]string{} // NodeClaim → Node
	for _, nc := range claims {
		if nc.Status.NodeName == pods[0].Spec.NodeName || nc.Status.NodeName == guarded.Spec.NodeName {
			victims[nc.Name] = nc.Status.NodeName
		}
	}
	if len(victims) == 0 || (pods[0].Spec.NodeName != guarded.Spec.NodeName) != (len(victims) == 2) {
		t.Fatalf("no NodeClaim for node %s or %s (claims %v)", pods[0].Spec.NodeName, guarded.Spec.NodeName, claimNames(claims))
	}
	for nc := range victims {
		if err := cp.Client.Delete(ctx, &v1.NodeClaim{ObjectMeta: metaName(nc)}); err != nil {
			t.Fatal(err)
		}
	}
	for nc, node := range victims {
		waitGone(ctx, t, cp, &v1.NodeClaim{}, client.ObjectKey{Name: nc})
		waitGone(ctx, t, cp, &corev1.Node{}, client.ObjectKey{Name: node})
	}
	waitRunning(ctx, t, cp, logPath, "inflate", 2)
	drainedAndRetried(ctx, t, cp, logPath, guarded.Name)
	waitRunning(ctx, t, cp, logPath, "guarded", 1)

	// Disruption: scale to zero and let emptiness consolidation remove
	// every node.
	scaleTo(ctx, t, cp, "inflate", 0)
	scaleTo(ctx, t, cp, "stateful", 0)
	scaleTo(ctx, t, cp, "guarded", 0)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := forbiddenIn(logPath); err != nil {
			return false, err
		}
		return len(nodeClaims(ctx, t, cp)) == 0, nil
	})
	if err != nil {
		t.Fatalf("empty nodes not consolidated: %v (claims %v)", err, claimNames(nodeClaims(ctx, t, cp)))
	}
	noForbidden(t, logPath)

	t.Run("every rule is needed", func(t *testing.T) {
		proveEveryRuleNeeded(ctx, t, cp, kube, ns)
	})
}

// shortEventDedupe shortens the controller's event deduplication windows
// (upstream's: 2 to 15 minutes) so that a cycle of a minute or two sees an
// event repeated, which client-go records as a PATCH of the Event's count:
// the chart's `patch events` grant is then proven needed.
const shortEventDedupe = "EVENT_DEDUPE_WINDOW=5s"

// drainedAndRetried checks the two paths of drainWorkloads that leave no
// other trace: drain deleted the guarded pod at the termination deadline
// (its Disrupted event), and the oversized pod's FailedScheduling event was
// recorded twice (patched). It then deletes the oversized pod, so nothing
// pending is left when the nodes are consolidated.
func drainedAndRetried(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, logPath, guarded string) {
	t.Helper()
	var events corev1.EventList
	eventually(ctx, t, logPath, time.Minute, "Disrupted on pod "+guarded+" and FailedScheduling on pod oversized recorded twice", func() bool {
		if err := cp.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false
		}
		return slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
			return ev.InvolvedObject.Name == guarded && ev.Reason == "Disrupted"
		}) && slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
			return ev.InvolvedObject.Name == "oversized" && ev.Reason == "FailedScheduling" && ev.Count >= 2 && ev.Source.Component == "karpenter"
		})
	})
	if err := cp.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "oversized"}}); err != nil {
		t.Fatal(err)
	}
}

// waitRunning waits until exactly want pods of app run on nodes in
// namespace default, failing at once on a forbidden request in the
// controller's log, and returns them.
func waitRunning(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, logPath, app string, want int) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := forbiddenIn(logPath); err != nil {
			return false, err
		}
		if err := cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
			return false, nil
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				n++
			}
		}
		return n == want && len(pods.Items) == want, nil
	})
	if err != nil {
		t.Fatalf("want %d %s pods running: %v (%s)", want, app, err, podSummary(pods.Items))
	}
	return pods.Items
}

// scaleTo sets a Deployment's replicas in namespace default. A merge patch
// carries no resourceVersion, so the deployment controller's status writes
// cannot make it conflict.
func scaleTo(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string, replicas int) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	patch := []byte(`{"spec":{"replicas":` + strconv.Itoa(replicas) + `}}`)
	if err := cp.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("scaling deployment %s to %d: %v", name, replicas, err)
	}
}

// forbiddenIn fails as soon as the controller's log shows a refused
// request, rather than when a wait times out.
func forbiddenIn(logPath string) error {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	if lines := grepLines(string(b), "forbidden"); lines != "" {
		return fmt.Errorf("forbidden as the chart's service account:\n%s", lines)
	}
	return nil
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func nodeClaims(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) []v1.NodeClaim {
	t.Helper()
	var list v1.NodeClaimList
	if err := cp.Client.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func claimNames(claims []v1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Name+"→"+nc.Status.NodeName)
	}
	return out
}

func podSummary(pods []corev1.Pod) string {
	s := ""
	for _, p := range pods {
		s += fmt.Sprintf("%s %s on %q; ", p.Name, p.Status.Phase, p.Spec.NodeName)
	}
	return s
}
