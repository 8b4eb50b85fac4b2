package migration_test

import (
	"context"
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const awsClusterName = "local"

// awsEnv is a control plane, the local AWS seeded with the cluster, and the
// booter that turns its instances into Nodes from their user data.
type awsEnv struct {
	cp    *controlplane.ControlPlane
	local *awslocal.Local
	ec2   *ec2.Client
	sqs   *sqs.Client
	// queueURL is the interruption queue's.
	queueURL string
	// applied is when the negative experiment's pod was created.
	applied time.Time
}

func newAWSEnv(t *testing.T, ctx context.Context) *awsEnv {
	t.Helper()
	cp := cluster(t)
	local, err := awslocal.Start(ctx, awslocal.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("moto log (tail):\n%s", local.LogTail())
		}
		local.Stop()
	})
	_, err = local.SeedCluster(ctx, awslocal.ClusterOptions{Name: awsClusterName, ServiceCIDR: "10.0.0.0/24"})
	require.NoError(t, err)
	booter := local.Boot(context.Background(), cp.Client, awslocal.BootOptions{ClusterName: awsClusterName})
	t.Cleanup(booter.Stop)
	q := sqs.NewFromConfig(local.Config(ctx))
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queueName)})
	require.NoError(t, err)
	return &awsEnv{cp: cp, local: local, ec2: ec2.NewFromConfig(local.Config(ctx)), sqs: q, queueURL: aws.ToString(queue.QueueUrl)}
}

// queueName is the interruption queue both controllers read.
const queueName = "karpenter-local"

func (e *awsEnv) clusterEnv() []string {
	return append(e.local.Env(), "CLUSTER_NAME="+awsClusterName, "CLUSTER_ENDPOINT="+e.cp.Config.Host, "INTERRUPTION_QUEUE="+queueName)
}

// queued is how many messages the interruption queue holds, in flight
// included; -1 when it cannot be read.
func (e *awsEnv) queued(ctx context.Context) int {
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &e.queueURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return -1
	}
	n := 0
	for _, v := range out.Attributes {
		i, err := strconv.Atoi(v)
		if err != nil {
			return -1
		}
		n += i
	}
	return n
}

func (e *awsEnv) startUpstream(t *testing.T, name string) running {
	t.Helper()
	ports, err := anchors.FreePorts()
	require.NoError(t, err)
	pid, err := anchors.StartAWS(e.cp, upstream, name, ports, e.clusterEnv()...)
	require.NoError(t, err)
	return running{name: name, pid: pid, port: ports.Metrics}
}

func (e *awsEnv) startOurs(t *testing.T, name string) running {
	t.Helper()
	ports, err := anchors.FreePorts()
	require.NoError(t, err)
	pid, err := e.cp.SpawnEnv(ours, name, e.clusterEnv(),
		"--cloud-provider=aws",
		"--kubeconfig="+e.cp.KubeconfigPath,
		"--metrics-port="+strconv.Itoa(ports.Metrics),
		"--health-probe-port="+strconv.Itoa(ports.Health),
		"--leader-election-namespace=kube-system")
	require.NoError(t, err)
	return running{name: name, pid: pid, port: ports.Metrics}
}

// liveInstances are the pending and running instances a controller
// launched, by NodeClaim tag.
func (e *awsEnv) liveInstances(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{awsv1.NodeClaimTagKey}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = string(i.InstanceType)
			}
		}
	}
	return out
}

func applyExamples(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, files ...string) {
	t.Helper()
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join("../../examples", f))
		require.NoError(t, err)
		require.NoError(t, controlplane.Apply(ctx, cp.Client, raw), f)
	}
}

const awsInflate = `apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 8
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      nodeSelector: {capacity.example.io/pool: general-purpose}
      terminationGracePeriodSeconds: 0
      containers:
        - {name: pause, image: public.ecr.aws/eks-distro/kubernetes/pause:3.10, resources: {requests: {cpu: "1", memory: 256Mi}}}
`

func classReady(ctx context.Context, c client.Client) bool {
	class := &awsv1.EC2NodeClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		return false
	}
	for _, cond := range class.Status.Conditions {
		if cond.Type == awsv1.ConditionTypeReady {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

func runningPods(ctx context.Context, c client.Client) int {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// TestMigrationAWS: upstream's AWS controller runs the seeds' positive
// experiment on the local AWS (its EC2NodeClass Ready, inflate 0 → 8 on
// the general-purpose pool) and their negative one (an arm64 pod on the
// amd64 pool stays Pending with upstream's reason, nothing launched, and
// with ours' and upstream's again after each switch); ours takes over, and while it makes disruption
// passes no instance is launched or terminated, no NodeClaim drifts (no
// NodeClassDrift, no AMIDrift) and the class keeps its instance profile;
// then upstream takes over again with the same quiet, and finishes the
// experiment: inflate to 0, every instance terminated.
func TestMigrationAWS(t *testing.T) {
	// Most of the test is quiet windows; the other test's fit beside it.
	t.Parallel()
	ctx := context.Background()
	e := newAWSEnv(t, ctx)
	defer dumpLogs(t, e.cp, "upstream", "ours", "upstream-again")
	applyExamples(t, ctx, e.cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	up := e.startUpstream(t, "upstream")
	require.Eventually(t, func() bool { return classReady(ctx, e.cp.Client) }, 3*time.Minute, time.Second, "upstream makes the EC2NodeClass Ready")
	require.NoError(t, controlplane.Apply(ctx, e.cp.Client, []byte(awsInflate)))
	require.Eventually(t, func() bool { return runningPods(ctx, e.cp.Client) == 8 }, 5*time.Minute, 2*time.Second, "upstream runs 8 inflate pods")
	before := waitFleet(t, ctx, e.cp.Client, 8, 3*time.Minute)
	t.Logf("upstream launched %d NodeClaims", len(before.nodeClaims))
	// The seeds' negative experiment: a pod the pool can never run stays
	// Pending with each controller's reason, and none launches for it.
	e.negativeExperiment(t, ctx, "upstream", before)
	switched := time.Now()
	next := e.quietSwitch(t, ctx, up.pid, "ours", before)
	e.expectRefused(t, ctx, "ours", switched)

	after := waitFleet(t, ctx, e.cp.Client, 8, time.Minute)
	switched = time.Now()
	e.quietSwitch(t, ctx, next.pid, "upstream-again", after)
	e.expectRefused(t, ctx, "upstream-again", switched)

	// The rest of the seeds' experiment on upstream's controller: inflate
	// to 0, and upstream removes the empty nodes and terminates their
	// instances on the local AWS.
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "inflate"}}
	require.NoError(t, e.cp.Client.Patch(ctx, deploy, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))))
	require.Eventually(t, func() bool { return len(e.liveInstances(t, ctx)) == 0 }, 6*time.Minute, 5*time.Second,
		"upstream's controller removes the empty nodes and their instances")
}

// quietSwitch stops the controller with PID from, starts the other controller as name, and checks
// that while it makes 3 disruption passes (and at least 2 minutes) it
// launches, terminates, drifts and recreates nothing, and drains the
// interruption queue.
func (e *awsEnv) quietSwitch(t *testing.T, ctx context.Context, from int, name string, before fleet) running {
	t.Helper()
	e.cp.Kill(from)
	instances := e.liveInstances(t, ctx)
	require.Len(t, instances, len(before.nodeClaims), "one instance per NodeClaim")
	class := &awsv1.EC2NodeClass{}
	require.NoError(t, e.cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	profile := class.Status.InstanceProfile
	templates := e.launchTemplates(t, ctx)
	calls := map[string]int{}
	// EC2 is judged by what exists (a controller may send dry runs, as
	// upstream's EC2NodeClass validation does); IAM by the calls.
	all := e.allInstances(t, ctx)
	watched := [][2]string{{"iam", "CreateInstanceProfile"}, {"iam", "DeleteInstanceProfile"}}
	for _, w := range watched {
		calls[w[0]+":"+w[1]] = e.local.Calls(w[0], w[1])
	}

	// An event arrives while no controller runs: a rebalance
	// recommendation for an instance that is not the cluster's, which the
	// next controller must take off the queue and act on by doing nothing.
	_, err := e.local.SendInterruption(ctx, awslocal.Interruption{QueueURL: e.queueURL, Kind: awslocal.InterruptionRebalance, InstanceID: "i-0123456789abcdef0"})
	require.NoError(t, err)
	require.Equal(t, 1, e.queued(ctx), "the event waits on the queue")

	var next running
	if name == "ours" {
		next = e.startOurs(t, name)
	} else {
		next = e.startUpstream(t, name)
	}
	fleetQuiet := unchanged(t, ctx, e.cp.Client, before, 8)
	quietFor(t, ctx, next.port, 3, 2*time.Minute, 10*time.Minute, func() string {
		if msg := fleetQuiet(); msg != "" {
			return msg
		}
		for _, w := range watched {
			if n := e.local.Calls(w[0], w[1]); n != calls[w[0]+":"+w[1]] {
				return fmt.Sprintf("%s %s called %d times after the switch", w[0], w[1], n-calls[w[0]+":"+w[1]])
			}
		}
		if now := e.allInstances(t, ctx); !maps.Equal(now, all) {
			return fmt.Sprintf("instances %v, were %v", now, all)
		}
		got := &awsv1.EC2NodeClass{}
		if err := e.cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, got); err == nil && got.Status.InstanceProfile != profile {
			return fmt.Sprintf("instance profile %q, was %q", got.Status.InstanceProfile, profile)
		}
		return ""
	})
	require.Equal(t, 0, e.queued(ctx), "%s drained the interruption queue", name)
	require.Equal(t, instances, e.liveInstances(t, ctx), "the same instances run")
	// None recreated. Upstream's controller may add one when it starts
	// (its EC2NodeClass validation does), which is not a change to the
	// running fleet. Either controller deletes a template no launch has
	// used for its cache TTL (upstream on cache eviction, ours in its
	// pruner, both after a minute), so a template the previous controller
	// launched from may be gone after the quiet period; nothing launched
	// meanwhile, so no template was needed.
	now := e.launchTemplates(t, ctx)
	var pruned []string
	for _, lt := range templates {
		if !slices.Contains(now, lt) {
			pruned = append(pruned, lt)
		}
	}
	if len(pruned) > 0 {
		t.Logf("%s deleted %d unused launch template(s): %v", name, len(pruned), pruned)
	}
	if name == "ours" {
		for _, lt := range now {
			require.Contains(t, templates, lt, "ours created no launch template: nothing launched")
		}
	} else if len(now) > len(templates)-len(pruned) {
		t.Logf("%s added %d launch templates", name, len(now)-(len(templates)-len(pruned)))
	}
	return next
}

// allInstances is every instance's state, terminated ones included.
func (e *awsEnv) allInstances(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				state := ""
				if i.State != nil {
					state = string(i.State.Name)
				}
				out[aws.ToString(i.InstanceId)] = state
			}
		}
	}
	return out
}

func (e *awsEnv) launchTemplates(t *testing.T, ctx context.Context) []string {
	t.Helper()
	out, err := e.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	require.NoError(t, err)
	var names []string
	for _, lt := range out.LaunchTemplates {
		names = append(names, aws.ToString(lt.LaunchTemplateName)+"/"+aws.ToString(lt.LaunchTemplateId))
	}
	sort.Strings(names)
	return names
}
