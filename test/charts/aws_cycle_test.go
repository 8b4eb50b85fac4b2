package charts_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestServiceAccountCycleAWS runs the controller with the chart's default
// provider, AWS, as the chart's ServiceAccount against the local AWS, through
// every write the AWS controllers make: the examples' EC2NodeClass gets its
// termination finalizer and hash annotation and goes Ready (status), inflate
// launches instances that join as Nodes and are tagged (NodeClaim
// annotations), an interruption message deletes a NodeClaim under pods
// (events, delete; the pods move), the kwok cycle's other workloads (a
// volume, drain's deadline for a PDB-guarded pod, a repeated event) run on
// it, a scale to zero consolidates every node,
// and deleting the EC2NodeClass removes its finalizer. Nothing in the log may
// be forbidden. Then it proves every rule the chart grants in AWS mode
// needed (rbac_test.go).
func TestServiceAccountCycleAWS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s", time.Since(start).Seconds(), what) }
	// moto starts beside the control plane: each takes seconds.
	type started struct {
		local *awslocal.Local
		err   error
	}
	motoDir := t.TempDir()
	moto := make(chan started, 1)
	go func() {
		l, err := awslocal.Start(ctx, awslocal.Options{Dir: motoDir})
		moto <- started{l, err}
	}()
	const ns = "karpenter"
	sa := chartServiceAccount(ns)
	cp, cpErr := controlplane.Start(ctx, cycleControlPlane(sa))
	m := <-moto
	if cpErr == nil {
		t.Cleanup(cp.Stop)
	}
	if m.err == nil {
		t.Cleanup(m.local.Stop)
	}
	if cpErr != nil {
		t.Fatalf("starting control plane: %v", cpErr)
	}
	if m.err != nil {
		t.Fatalf("starting the local AWS: %v", m.err)
	}
	local := m.local
	phase("control plane and local AWS started")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("moto log (tail):\n%s", local.LogTail())
		}
	})
	// The examples' discovery tags and role name are cluster "local"'s.
	if _, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: "local", ServiceCIDR: "10.0.0.0/24"}); err != nil {
		t.Fatalf("seeding the local AWS: %v", err)
	}
	const queueName = "karpenter-local"
	queue, err := sqs.NewFromConfig(local.Config(ctx)).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queueName)})
	if err != nil {
		t.Fatalf("creating the interruption queue: %v", err)
	}
	booter := local.Boot(ctx, cp.Client, awslocal.BootOptions{ClusterName: "local"})
	t.Cleanup(booter.Stop)

	// Default values (the AWS provider) plus the settings upstream's
	// install command gives; no replicas, as in TestServiceAccountCycle.
	values := []string{"--set", "replicas=0",
		"--set", "settings.clusterName=local",
		"--set", "settings.clusterEndpoint=" + cp.Config.Host,
		"--set", "settings.interruptionQueue=" + queueName,
	}
	kube := []string{"KUBECONFIG=" + cp.KubeconfigPath}
	helm(t, kube, append([]string{"install", "karpenter", chartDir(t, "karpenter"),
		"--namespace", ns, "--create-namespace"}, values...)...)
	_, objs := render(t, values...)
	if env, _ := controllerEnv(t, deployment(t, objs, "karpenter")); env["CLOUD_PROVIDER"] != "aws" {
		t.Fatalf("the default chart runs CLOUD_PROVIDER=%q, want aws", env["CLOUD_PROVIDER"])
	}
	for _, f := range []string{"00-ec2nodeclass.yaml", "01-nodepool.yaml", filepath.Join("aws", "04-inflate.yaml")} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := controlplane.Apply(ctx, cp.Client, b); err != nil {
			t.Fatalf("applying examples/%s: %v", f, err)
		}
	}
	// The pool gets the kwok cycle's drain deadline, before it has any
	// NodeClaim to drift, and the kwok cycle's other workloads.
	np := &v1.NodePool{ObjectMeta: metaName("general-purpose")}
	if err := cp.Client.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"terminationGracePeriod":"5s"}}}}`))); err != nil {
		t.Fatal(err)
	}
	for _, o := range documents(t, drainWorkloads("general-purpose")) {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// The pod gets its AWS credentials from IRSA or Pod Identity; here
	// they are the local AWS's, through the SDK's own environment.
	logPath := startAsServiceAccount(ctx, t, cp, ns, values, append(local.Env(), shortEventDedupe))
	phase("controller ready and leading")

	// The EC2NodeClass: finalizer and hash annotation (patch), resolved
	// status (status patch); the NodePool on it goes Ready with it.
	class := &awsv1.EC2NodeClass{}
	eventually(ctx, t, logPath, 2*time.Minute, "EC2NodeClass default Ready, with its finalizer and hash", func() bool {
		if cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class) != nil {
			return false
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady) &&
			controllerutil.ContainsFinalizer(class, awsv1.TerminationFinalizer) && class.Annotations[awsv1.AnnotationEC2NodeClassHash] != ""
	})
	if len(class.Status.Subnets) == 0 || len(class.Status.SecurityGroups) == 0 || len(class.Status.AMIs) == 0 || class.Status.InstanceProfile == "" {
		t.Errorf("EC2NodeClass status not resolved: %+v", class.Status)
	}
	eventually(ctx, t, logPath, time.Minute, "NodePool general-purpose Ready", func() bool {
		np := &v1.NodePool{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: "general-purpose"}, np) == nil && meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady)
	})

	phase("EC2NodeClass and NodePool Ready")

	// Provisioning: instances through CreateFleet, Nodes from their user
	// data, and the tagging controller's NodeClaim annotations.
	scaleTo(ctx, t, cp, "inflate", 2)
	pods := waitRunning(ctx, t, cp, logPath, "inflate", 2)
	waitRunning(ctx, t, cp, logPath, "stateful", 1)
	guarded := waitRunning(ctx, t, cp, logPath, "guarded", 1)[0]
	eventually(ctx, t, logPath, time.Minute, "every NodeClaim tagged", func() bool {
		claims := nodeClaims(ctx, t, cp)
		for _, nc := range claims {
			if nc.Annotations[awsv1.AnnotationInstanceTagged] != "true" || nc.Annotations[awsv1.AnnotationEC2NodeClassHash] == "" {
				return false
			}
		}
		return len(claims) > 0
	})
	phase("provisioned and tagged")

	// Termination from an interruption: the instance under a pod stops,
	// the interruption controller records events and deletes its
	// NodeClaim, and the pods are provisioned for again.
	var victim v1.NodeClaim
	for _, nc := range nodeClaims(ctx, t, cp) {
		if nc.Status.NodeName == pods[0].Spec.NodeName {
			victim = nc
		}
	}
	if victim.Name == "" {
		t.Fatalf("no NodeClaim for node %s (claims %v)", pods[0].Spec.NodeName, claimNames(nodeClaims(ctx, t, cp)))
	}
	instanceID := victim.Status.ProviderID[strings.LastIndex(victim.Status.ProviderID, "/")+1:]
	if _, err := local.SendInterruption(ctx, awslocal.Interruption{QueueURL: aws.ToString(queue.QueueUrl),
		Kind: awslocal.InterruptionStateChange, State: "stopping", InstanceID: instanceID}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, cp, &v1.NodeClaim{}, client.ObjectKey{Name: victim.Name})
	waitGone(ctx, t, cp, &corev1.Node{}, client.ObjectKey{Name: victim.Status.NodeName})
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, ev := range events.Items {
		recorded = recorded || ev.InvolvedObject.Name == victim.Name && ev.Reason == interruption.EventTerminatingOnInterruption
	}
	if !recorded {
		t.Errorf("no %s event on NodeClaim %s", interruption.EventTerminatingOnInterruption, victim.Name)
	}
	// The guarded pod's NodeClaim goes too (deleted, when the
	// interruption did not take it), so drain meets the PDB.
	for _, nc := range nodeClaims(ctx, t, cp) {
		if nc.Status.NodeName == guarded.Spec.NodeName {
			if err := cp.Client.Delete(ctx, &nc); err != nil {
				t.Fatal(err)
			}
			waitGone(ctx, t, cp, &v1.NodeClaim{}, client.ObjectKey{Name: nc.Name})
		}
	}
	waitRunning(ctx, t, cp, logPath, "inflate", 2)
	drainedAndRetried(ctx, t, cp, logPath, guarded.Name)
	waitRunning(ctx, t, cp, logPath, "guarded", 1)
	phase("interrupted NodeClaim gone, guarded pod deleted at the deadline")

	// Disruption: scale to zero and let emptiness consolidation remove
	// every node.
	scaleTo(ctx, t, cp, "inflate", 0)
	scaleTo(ctx, t, cp, "stateful", 0)
	scaleTo(ctx, t, cp, "guarded", 0)
	eventually(ctx, t, logPath, 3*time.Minute, "every NodeClaim consolidated", func() bool {
		return len(nodeClaims(ctx, t, cp)) == 0
	})
	phase("consolidated")

	// The EC2NodeClass's finalizer is removed once nothing uses it.
	for _, o := range []client.Object{
		&v1.NodePool{ObjectMeta: metaName("general-purpose")},
		&awsv1.EC2NodeClass{ObjectMeta: metaName("default")},
	} {
		if err := cp.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(ctx, t, cp, &awsv1.EC2NodeClass{}, client.ObjectKey{Name: "default"})
	phase("EC2NodeClass finalized")
	noForbidden(t, logPath)

	t.Run("every rule is needed", func(t *testing.T) {
		proveEveryRuleNeeded(ctx, t, cp, kube, ns)
	})
}

// eventually polls cond every second for up to timeout, failing the test
// at once when the controller's log shows a forbidden request.
func eventually(ctx context.Context, t *testing.T, logPath string, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := forbiddenIn(logPath); err != nil {
			return false, err
		}
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
