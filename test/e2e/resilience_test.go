package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// fastLeaseEnv shortens leader election through the controller's hidden
// (env-only) settings, so a crashed leader's Lease expires in seconds.
var fastLeaseEnv = []string{
	"LEADER_ELECTION_LEASE_DURATION=4s",
	"LEADER_ELECTION_RENEW_DEADLINE=3s",
	"LEADER_ELECTION_RETRY_PERIOD=500ms",
}

// leaseKey is where startController's replicas elect their leader.
var leaseKey = client.ObjectKey{Namespace: "kube-system", Name: "karpenter-leader-election"}

// startReplica is startController with extra environment. It runs the
// binary through env(1), which execs it, so the returned PID is the
// controller's own and cp.Kill crashes the controller itself.
func startReplica(t *testing.T, cp *controlplane.ControlPlane, name string, env []string, extra ...string) int {
	t.Helper()
	envBin, err := exec.LookPath("env")
	require.NoError(t, err)
	args := append(append([]string{mutationDetector}, env...), controllerBin,
		"--kubeconfig="+cp.KubeconfigPath,
		"--metrics-port="+strconv.Itoa(freePort(t)),
		"--health-probe-port="+strconv.Itoa(freePort(t)),
		"--leader-election-namespace=kube-system",
	)
	pid, err := cp.Spawn(envBin, name, append(args, extra...)...)
	require.NoError(t, err, "starting %s", name)
	t.Cleanup(func() {
		if t.Failed() && name != "controller" {
			if b, err := os.ReadFile(cp.LogPath(name)); err == nil {
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 6000))
			}
		}
	})
	return pid
}

// unusedPort asks the kernel for a free port: fixed port numbers collide
// with other e2e runs sharing the machine.
func replicaLog(t *testing.T, cp *controlplane.ControlPlane, name string) string {
	t.Helper()
	b, err := os.ReadFile(cp.LogPath(name))
	require.NoError(t, err)
	return string(b)
}

func logHas(log, message string) bool {
	return strings.Contains(log, `"message":"`+message)
}

func scaleInflate(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, replicas int32) {
	t.Helper()
	require.Eventually(t, func() bool {
		d := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d); err != nil {
			return false
		}
		d.Spec.Replicas = ptr.To(replicas)
		return cp.Client.Update(ctx, d) == nil
	}, 30*time.Second, 200*time.Millisecond, "scaling inflate to %d", replicas)
}

// crashSpreadDeployment needs one node per pod (required hostname
// anti-affinity) on the lab pool.
const crashSpreadDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: crash-spread
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: crash-spread
  template:
    metadata:
      labels:
        app: crash-spread
    spec:
      nodeSelector:
        capacity.example.io/pool: lab-general
      terminationGracePeriodSeconds: 0
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app: crash-spread
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: 500m
              memory: 128Mi
`

// TestCrashMidLaunch kills the controller (SIGKILL) after the kwok instance
// exists but before its NodeClaim records it, then restarts it. The
// hang-after-create fault holds every Create inside that window, so the
// kill lands there every time. The restarted controller must adopt each
// instance: one Node per NodeClaim, the same Nodes as before the crash,
// nothing left for garbage collection, and the pods running.
func TestCrashMidLaunch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml", "03-nodepool-lab.yaml", "04-inflate.yaml")
	// An unlaunched NodeClaim counts against limits at its largest instance
	// type, as the solver charged it, and a hung Create never launches: the
	// example's 64-cpu limit would admit one NodeClaim at a time, where this
	// test needs three in flight together.
	require.NoError(t, cp.Client.Patch(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "lab-general"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"limits":null}}`))))
	// registration=0s makes the Node appear inside Create, before the hang.
	pid := startReplica(t, cp, "controller", fastLeaseEnv, "--kwok-faults=registration=0s;hang-after-create=10m")
	// Three pods that refuse to share a host need three NodeClaims, so
	// several launches are cut short at once.
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(crashSpreadDeployment)))
	scaleInflate(t, ctx, cp, 8)

	// Wait until every NodeClaim has its instance and none has recorded it.
	before := map[string]types.UID{} // NodeClaim name -> its Node's UID
	require.Eventually(t, func() bool {
		var claims v1.NodeClaimList
		if err := cp.Client.List(ctx, &claims); err != nil || len(claims.Items) < 3 {
			return false
		}
		clear(before)
		for _, nc := range claims.Items {
			node := &corev1.Node{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: nc.Name}, node); err != nil {
				return false
			}
			before[nc.Name] = node.UID
		}
		return true
	}, 90*time.Second, 250*time.Millisecond, "every NodeClaim should have a Node while Create hangs")
	cp.Kill(pid)

	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.Len(t, claims.Items, len(before), "no NodeClaim appeared or vanished around the kill")
	for _, nc := range claims.Items {
		require.Emptyf(t, nc.Status.ProviderID, "%s: the crash came before the launch was recorded", nc.Name)
		require.Falsef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched), "%s must not be Launched yet", nc.Name)
	}
	t.Logf("killed the controller with %d instance(s) launched but unrecorded", len(before))

	startReplica(t, cp, "controller-restarted", fastLeaseEnv)
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 8 && runningOnOurNodes(ctx, t, cp, "app=crash-spread") == 3
	}, 3*time.Minute, time.Second, "8 inflate and 3 crash-spread pods should run after the restart")

	// Exactly one Node per NodeClaim, matched by provider ID, and the
	// instances bought before the crash are the ones in use.
	require.NoError(t, cp.Client.List(ctx, &claims))
	var nodes corev1.NodeList
	require.NoError(t, cp.Client.List(ctx, &nodes))
	byProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, kwok.ProviderIDPrefix) {
			continue
		}
		require.NotContainsf(t, byProviderID, n.Spec.ProviderID, "two Nodes share provider ID %s", n.Spec.ProviderID)
		byProviderID[n.Spec.ProviderID] = n
	}
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched), "%s not Launched: %+v", nc.Name, nc.Status.Conditions)
		require.Equal(t, kwok.ProviderIDPrefix+nc.Name, nc.Status.ProviderID)
		require.NotContainsf(t, claimed, nc.Status.ProviderID, "two NodeClaims share provider ID %s", nc.Status.ProviderID)
		claimed[nc.Status.ProviderID] = true
		node := byProviderID[nc.Status.ProviderID]
		require.NotNilf(t, node, "no Node for %s", nc.Name)
		require.Equal(t, nc.Name, nc.Status.NodeName)
		if uid, ok := before[nc.Name]; ok {
			require.Equalf(t, uid, node.UID, "%s: the instance launched before the crash was replaced instead of adopted", nc.Name)
		}
	}
	for name := range before {
		require.Containsf(t, claimed, kwok.ProviderIDPrefix+name, "NodeClaim %s from before the crash is gone", name)
	}
	// No instance lacks a NodeClaim, so garbage collection, whatever its
	// grace, has nothing to terminate; and none was terminated meanwhile.
	for id, n := range byProviderID {
		require.Truef(t, claimed[id], "Node %s has no NodeClaim (leaked instance)", n.Name)
	}
	require.Len(t, byProviderID, len(claims.Items))
	log := replicaLog(t, cp, "controller-restarted")
	require.False(t, logHas(log, "garbage collecting"), "the restarted controller collected something")
	require.True(t, logHas(log, "launched nodeclaim"))
}

// TestLeaderElection runs two replicas: only the one holding the Lease
// provisions, and when it is killed the other takes the Lease over and
// provisions for new pods.
func TestLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml", "03-nodepool-lab.yaml", "04-inflate.yaml")
	replicas := map[string]int{
		"controller-a": startReplica(t, cp, "controller-a", fastLeaseEnv),
		"controller-b": startReplica(t, cp, "controller-b", fastLeaseEnv),
	}

	const acquired = "Successfully acquired lease"
	leaders := func() []string {
		var out []string
		for name := range replicas {
			if logHas(replicaLog(t, cp, name), acquired) {
				out = append(out, name)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(leaders()) > 0 }, 60*time.Second, 250*time.Millisecond, "a replica should win the Lease")
	require.Len(t, leaders(), 1, "exactly one replica leads")
	leader := leaders()[0]
	follower := "controller-a"
	if leader == follower {
		follower = "controller-b"
	}
	lease := &coordinationv1.Lease{}
	require.NoError(t, cp.Client.Get(ctx, leaseKey, lease))
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	require.NotEmpty(t, holder)
	t.Logf("%s leads as %s", leader, holder)

	scaleInflate(t, ctx, cp, 4)
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 4
	}, 2*time.Minute, time.Second, "4 inflate pods should run")
	// Only the leader acted.
	for _, msg := range []string{"found provisionable pod(s)", "created nodeclaim", "launched nodeclaim"} {
		require.Truef(t, logHas(replicaLog(t, cp, leader), msg), "leader should log %q", msg)
		require.Falsef(t, logHas(replicaLog(t, cp, follower), msg), "follower must not log %q", msg)
	}
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	firstRound := len(claims.Items)

	// Kill the leader: the follower takes over once the Lease expires.
	killed := time.Now()
	cp.Kill(replicas[leader])
	require.Eventually(t, func() bool {
		l := &coordinationv1.Lease{}
		if err := cp.Client.Get(ctx, leaseKey, l); err != nil {
			return false
		}
		return ptr.Deref(l.Spec.HolderIdentity, "") != holder && ptr.Deref(l.Spec.HolderIdentity, "") != "" &&
			logHas(replicaLog(t, cp, follower), acquired)
	}, 60*time.Second, 250*time.Millisecond, "the follower should acquire the Lease")
	require.NoError(t, cp.Client.Get(ctx, leaseKey, lease))
	require.Greater(t, ptr.Deref(lease.Spec.LeaseTransitions, 0), int32(0))
	t.Logf("hand-over took %s; %s now leads as %s", time.Since(killed).Round(100*time.Millisecond), follower, ptr.Deref(lease.Spec.HolderIdentity, ""))

	// The new leader provisions for new pods. Each inflate pod takes a
	// full vCPU, so 16 more cannot fit on what the old leader bought.
	scaleInflate(t, ctx, cp, 20)
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 20
	}, 2*time.Minute, time.Second, "20 inflate pods should run under the new leader")
	require.True(t, logHas(replicaLog(t, cp, follower), "created nodeclaim"), "the new leader should create NodeClaims")
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.Greater(t, len(claims.Items), firstRound)
	for _, nc := range claims.Items {
		require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized), "%s not Initialized", nc.Name)
	}
}
