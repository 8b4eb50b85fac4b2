package charts_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
---
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
        rbac.example.io/pool: rbac
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
`

// TestServiceAccountCycle runs the controller as the chart's ServiceAccount
// through provisioning (NodeClaims, Nodes created by the kwok provider; one
// pod with a PersistentVolumeClaim, so volumes are read too),
// termination of a NodeClaim that carries pods (cordon, evictions, the
// replacement for the evicted pods) and emptiness consolidation after a
// scale-down, and finds no forbidden request in its log.
func TestServiceAccountCycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{SkipCRDs: true, ControllerManager: true, Scheduler: true, Kwok: true})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	const ns = "karpenter"
	// No replicas: the pods could never run here (no image), and the
	// controller runs as a process below, as their ServiceAccount. The
	// kwok provider, one value away from the default AWS provider.
	values := []string{"--set", "replicas=0", "--set", "kwok.enabled=true"}
	helm(t, []string{"KUBECONFIG=" + cp.KubeconfigPath}, append([]string{"install", "karpenter", chartDir(t, "karpenter"),
		"--namespace", ns, "--create-namespace"}, values...)...)
	logPath := startAsServiceAccount(ctx, t, cp, ns, values, nil)

	for _, o := range documents(t, cycleObjects) {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Provisioning.
	pods := waitRunning(ctx, t, cp, logPath, "inflate", 2)
	waitRunning(ctx, t, cp, logPath, "stateful", 1)
	claims := nodeClaims(ctx, t, cp)
	if len(claims) == 0 {
		t.Fatal("pods run but no NodeClaim exists")
	}

	// Termination: delete the NodeClaim under a pod; its pods are evicted
	// and provisioned for again.
	victim := ""
	for _, nc := range claims {
		if nc.Status.NodeName == pods[0].Spec.NodeName {
			victim = nc.Name
		}
	}
	if victim == "" {
		t.Fatalf("no NodeClaim for node %s (claims %v)", pods[0].Spec.NodeName, claimNames(claims))
	}
	if err := cp.Client.Delete(ctx, &v1.NodeClaim{ObjectMeta: metaName(victim)}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, cp, &v1.NodeClaim{}, client.ObjectKey{Name: victim})
	waitGone(ctx, t, cp, &corev1.Node{}, client.ObjectKey{Name: pods[0].Spec.NodeName})
	waitRunning(ctx, t, cp, logPath, "inflate", 2)

	// Disruption: scale to zero and let emptiness consolidation remove
	// every node.
	scaleTo(ctx, t, cp, "inflate", 0)
	scaleTo(ctx, t, cp, "stateful", 0)
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
