package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// awsClusterName is the examples' discovery tag value and CLUSTER_NAME.
const awsClusterName = "local"

// awsEnv is a control plane, the local AWS seeded with the cluster's
// subnets, security group, node role and EKS record, and the booter that
// turns its running instances into Nodes from their user data.
type awsEnv struct {
	cp    *controlplane.ControlPlane
	local *awslocal.Local
	ec2   *ec2.Client
	// metricsPort is the last started controller's.
	metricsPort int
	// policy decides the controller's calls; creds are its principal's
	// (aws_iam_test.go).
	policy controllerPolicy
	creds  *awslocal.Credentials
	// booter turns running instances into Nodes until stopped.
	booter *awslocal.Booter
}

func newAWSEnv(t testing.TB, ctx context.Context, seed ...func(*awslocal.ClusterOptions)) *awsEnv {
	t.Helper()
	cp := cluster(t)
	local, err := awslocal.Start(ctx, awsOptions(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("moto log (tail):\n%s", local.LogTail())
		}
		local.Stop()
	})
	// The control plane's service CIDR, which EKS reports to the
	// controller and AL2023's nodeadm config carries.
	// The EKS record carries the control plane's version, as a real
	// one does, unless the test says otherwise.
	opts := awslocal.ClusterOptions{Name: awsClusterName, ServiceCIDR: "10.0.0.0/24", KubernetesVersion: serverMinor(t, cp)}
	for _, f := range seed {
		f(&opts)
	}
	_, err = local.SeedCluster(ctx, opts)
	require.NoError(t, err)
	booter := local.Boot(context.Background(), cp.Client, awslocal.BootOptions{ClusterName: awsClusterName})
	t.Cleanup(booter.Stop)
	return &awsEnv{cp: cp, local: local, ec2: ec2.NewFromConfig(local.Config(ctx)), policy: suitePolicies[t.Name()], booter: booter}
}

// serverMinor is the control plane's Kubernetes version ("1.37").
func serverMinor(t testing.TB, cp *controlplane.ControlPlane) string {
	t.Helper()
	v, err := cp.Kubernetes.Discovery().ServerVersion()
	require.NoError(t, err)
	return v.Major + "." + strings.TrimSuffix(v.Minor, "+")
}

// previousMinor is the minor version before v ("1.36" for "1.37").
func previousMinor(t testing.TB, v string) string {
	t.Helper()
	major, minor, ok := strings.Cut(v, ".")
	n, err := strconv.Atoi(minor)
	require.True(t, ok && err == nil && n > 0, "version %q", v)
	return major + "." + strconv.Itoa(n-1)
}

// startAWSController runs the controller binary with the AWS provider,
// pointed at the local AWS through the SDK's own environment, signing its
// calls as the controller's IAM principal.
func (e *awsEnv) startAWSController(t testing.TB, name string, extra ...string) int {
	t.Helper()
	env := append(e.local.EnvWith(e.controllerCredentials(t)), "CLUSTER_NAME="+awsClusterName, "CLUSTER_ENDPOINT="+e.cp.Config.Host)
	if _, benchmark := t.(*testing.B); !benchmark {
		env = append(env, mutationDetector)
	}
	e.metricsPort = freePort(t)
	args := append([]string{
		"--cloud-provider=aws",
		"--kubeconfig=" + e.cp.KubeconfigPath,
		"--metrics-port=" + strconv.Itoa(e.metricsPort),
		"--health-probe-port=" + strconv.Itoa(freePort(t)),
		"--leader-election-namespace=kube-system",
	}, extra...)
	pid, err := e.cp.SpawnEnv(controllerBin, name, env, args...)
	require.NoError(t, err)
	return pid
}

// liveInstances are the pending and running instances the controller
// launched, by NodeClaim tag.
func (e *awsEnv) liveInstances(t testing.TB, ctx context.Context) map[string]ec2types.Instance {
	t.Helper()
	out := map[string]ec2types.Instance{}
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{awsv1.NodeClaimTagKey}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = i
			}
		}
	}
	return out
}

const awsInflate = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
  namespace: default
spec:
  replicas: 0
  selector:
    matchLabels:
      app: inflate
  template:
    metadata:
      labels:
        app: inflate
    spec:
      nodeSelector:
        capacity.example.io/pool: general-purpose
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources:
            requests:
              cpu: "1"
              memory: 256Mi
`

// TestAWSExperiments are the seeds' experiments on the AWS provider: the
// examples' EC2NodeClass resolves its subnets, security group, AMIs and
// instance profile from the local AWS and goes Ready, and the NodePool on
// it with it; inflate 0→8 launches through CreateFleet, each instance joins
// as a Node from its user data, and every NodeClaim carries the AWS labels,
// providerID and image; an arm64 pod against the amd64 pool stays Pending
// with the reason; deleting the NodeClaims terminates every instance.
func TestAWSExperiments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsInflate)))
	e.startAWSController(t, "controller")

	// The class resolves from the local AWS.
	class := &awsv1.EC2NodeClass{}
	require.Eventually(t, func() bool {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false
		}
		return metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady)
	}, 2*time.Minute, time.Second, "EC2NodeClass default should go Ready")
	require.Len(t, class.Status.Subnets, 3, "the three discovery-tagged subnets")
	require.Len(t, class.Status.SecurityGroups, 1)
	require.NotEmpty(t, class.Status.AMIs)
	require.True(t, strings.HasPrefix(class.Status.InstanceProfile, awsClusterName+"_"), "managed profile %q", class.Status.InstanceProfile)
	require.Contains(t, class.Finalizers, awsv1.TerminationFinalizer)
	require.Eventually(t, func() bool {
		np := &v1.NodePool{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: "general-purpose"}, np) == nil && metaTrue(np.Status.Conditions, v1.ConditionTypeReady)
	}, time.Minute, time.Second, "NodePool general-purpose should go Ready on a Ready class")

	scale(t, ctx, cp, "inflate", 8)
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 8
	}, 3*time.Minute, time.Second, "8 inflate pods should run on instances launched through CreateFleet")

	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.NotEmpty(t, claims.Items)
	instances := e.liveInstances(t, ctx)
	require.Len(t, instances, len(claims.Items), "one instance per NodeClaim: none leaked, none launched twice")
	fleets := e.local.Calls("ec2", "CreateFleet")
	require.True(t, fleets >= 1 && fleets <= len(claims.Items), "%d CreateFleet calls for %d NodeClaims: at most one each (identical launches are batched)", fleets, len(claims.Items))
	amis := map[string]bool{}
	for _, a := range class.Status.AMIs {
		amis[a.ID] = true
	}
	for _, nc := range claims.Items {
		require.Equal(t, "general-purpose", nc.Labels[v1.NodePoolLabelKey])
		zone, id, ok := parseAWSProviderID(nc.Status.ProviderID)
		require.Truef(t, ok, "providerID %q", nc.Status.ProviderID)
		inst, found := instances[id]
		require.Truef(t, found, "instance %s of %s is live", id, nc.Name)
		require.Equal(t, zone, aws.ToString(inst.Placement.AvailabilityZone))
		require.Equal(t, string(inst.InstanceType), nc.Labels[corev1.LabelInstanceTypeStable])
		require.True(t, amis[nc.Status.ImageID], "imageID %s is one of the class's AMIs", nc.Status.ImageID)
		require.Equal(t, aws.ToString(inst.ImageId), nc.Status.ImageID)
		for _, k := range []string{awsv1.LabelInstanceCategory, awsv1.LabelInstanceFamily, awsv1.LabelInstanceGeneration, awsv1.LabelInstanceSize, awsv1.LabelInstanceCPU, awsv1.LabelInstanceMemory} {
			require.NotEmptyf(t, nc.Labels[k], "%s on %s", k, nc.Name)
		}
		require.Contains(t, []string{"c", "m", "r"}, nc.Labels[awsv1.LabelInstanceCategory])
		require.Equal(t, "on-demand", nc.Labels[v1.CapacityTypeLabelKey])
		for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
			require.Truef(t, conditionTrue(nc.Status.Conditions, cond), "%s %s not True: %+v", nc.Name, cond, nc.Status.Conditions)
		}
		// The node joined from the instance's own user data: its labels
		// and providerID are what the kubelet registered with.
		node := &corev1.Node{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
		require.Equal(t, nc.Status.ProviderID, node.Spec.ProviderID)
		require.Equal(t, "general-purpose", node.Labels["capacity.example.io/pool"], "the template label reached the node through user data")
		require.Equal(t, "general-purpose", node.Labels[v1.NodePoolLabelKey])
	}
	// After registration the instances get their Name tag.
	require.Eventually(t, func() bool {
		live := e.liveInstances(t, ctx)
		for _, nc := range claims.Items {
			_, id, _ := parseAWSProviderID(nc.Status.ProviderID)
			named := false
			for _, tag := range live[id].Tags {
				named = named || aws.ToString(tag.Key) == "Name" && aws.ToString(tag.Value) == nc.Status.NodeName
			}
			if !named {
				return false
			}
		}
		return true
	}, time.Minute, time.Second, "every instance should be tagged Name=<node name>")
	for _, nc := range claims.Items {
		t.Logf("%s: %s %s %s %s", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Status.ProviderID, nc.Status.ImageID)
	}
	log := controllerLog(t, cp)
	for _, msg := range []string{"discovered cluster", "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"} {
		require.Contains(t, log, `"message":"`+msg+`"`)
	}

	// The provider's gauges: the offering the fleet runs on is priced at
	// the local AWS's on-demand price and available.
	it := claims.Items[0].Labels[corev1.LabelInstanceTypeStable]
	zone := claims.Items[0].Labels[corev1.LabelTopologyZone]
	price, ok := e.local.OnDemandPrice(it, "us-east-1")
	require.True(t, ok)
	var samples []metricSample
	gauge := func(name string) (float64, bool) {
		for _, m := range samples {
			if m.name == name && m.labels["instance_type"] == it && m.labels["zone"] == zone && m.labels["capacity_type"] == "on-demand" {
				return m.value, true
			}
		}
		return 0, false
	}
	require.Eventually(t, func() bool {
		samples, _ = scrapeMetrics(ctx, e.metricsPort)
		_, ok := gauge("karpenter_cloudprovider_instance_type_offering_available")
		return ok
	}, 30*time.Second, time.Second, "offering_available for %s/%s", it, zone)
	available, _ := gauge("karpenter_cloudprovider_instance_type_offering_available")
	require.Equal(t, 1.0, available)
	estimate, ok := gauge("karpenter_cloudprovider_instance_type_offering_price_estimate")
	require.True(t, ok)
	require.InDelta(t, price, estimate, 1e-9)

	// The negative experiment: arm64 against the amd64 pool.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "arm64-only"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"capacity.example.io/pool": "general-purpose", corev1.LabelArchStable: "arm64"},
			Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, pod))
	require.Eventually(t, func() bool {
		var events corev1.EventList
		if err := cp.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == pod.Name && ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, corev1.LabelArchStable) &&
				(ev.Source.Component == "karpenter" || ev.ReportingController == "karpenter") {
				return true
			}
		}
		return false
	}, 90*time.Second, time.Second, "a karpenter FailedScheduling event should name kubernetes.io/arch")
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod))
	require.Empty(t, pod.Spec.NodeName)
	cliAnswersForAWSPool(t, ctx, e, pod)
	require.NoError(t, cp.Client.Delete(ctx, pod))

	// Deleting the NodeClaims terminates every instance.
	scale(t, ctx, cp, "inflate", 0)
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
	require.Eventually(t, func() bool {
		var left v1.NodeClaimList
		return cp.Client.List(ctx, &left) == nil && len(left.Items) == 0 && len(e.liveInstances(t, ctx)) == 0
	}, 2*time.Minute, time.Second, "every NodeClaim and instance should be gone")

	// Deleting the class: its finalizer removes the launch templates and
	// the managed instance profile.
	templates := func() int {
		out, err := e.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + awsv1.NodeClassTagKey), Values: []string{"default"}}}})
		require.NoError(t, err)
		return len(out.LaunchTemplates)
	}
	require.NotZero(t, templates(), "the launches made launch templates")
	require.NoError(t, cp.Client.Delete(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general-purpose"}}))
	require.NoError(t, cp.Client.Delete(ctx, class))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, &awsv1.EC2NodeClass{}))
	}, time.Minute, time.Second, "the EC2NodeClass should finalize")
	require.Zero(t, templates(), "no launch template left")
	_, err := iam.NewFromConfig(e.local.Config(ctx)).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(class.Status.InstanceProfile)})
	require.Error(t, err, "the managed instance profile %s is deleted", class.Status.InstanceProfile)
}

// parseAWSProviderID splits aws:///<zone>/<instance-id>.
func parseAWSProviderID(id string) (zone, instance string, ok bool) {
	rest, found := strings.CutPrefix(id, "aws:///")
	if !found {
		return "", "", false
	}
	zone, instance, ok = strings.Cut(rest, "/")
	return zone, instance, ok && strings.HasPrefix(instance, "i-")
}

func metaTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// TestAWSFaults injects the local AWS's faults into a running controller,
// and after each checks that every NodeClaim has exactly one live instance
// and no instance is without a NodeClaim:
//   - the controller is killed while CreateFleet has launched the instance
//     but not yet answered; the restarted controller adopts that instance
//     (found by its NodeClaim tag) instead of launching another;
//   - the cheapest offering has no capacity: CreateFleet reports it and
//     the next offering launches;
//   - a throttling burst on CreateFleet and a 5xx storm on DescribeInstances.
func TestAWSFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsInflate)))

	// consistent waits until pods inflate pods run and every NodeClaim is
	// Ready with exactly one live instance, none without a NodeClaim; it
	// returns the instance types by instance id.
	consistent := func(t *testing.T, pods int) map[string]string {
		t.Helper()
		var typeOf map[string]string
		var why string
		check := func() string {
			if n := runningOnOurNodes(ctx, t, cp, "app=inflate"); n != pods {
				return fmt.Sprintf("%d of %d inflate pods run", n, pods)
			}
			var claims v1.NodeClaimList
			if err := cp.Client.List(ctx, &claims); err != nil {
				return err.Error()
			}
			live := e.liveInstances(t, ctx)
			typeOf = map[string]string{}
			for _, nc := range claims.Items {
				_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
				if !ok || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
					return fmt.Sprintf("%s not Ready (providerID %q)", nc.Name, nc.Status.ProviderID)
				}
				if _, found := live[id]; !found {
					return fmt.Sprintf("instance %s of %s is not live", id, nc.Name)
				}
				typeOf[id] = nc.Labels[corev1.LabelInstanceTypeStable]
			}
			if len(live) != len(claims.Items) {
				return fmt.Sprintf("%d live instances for %d NodeClaims", len(live), len(claims.Items))
			}
			return ""
		}
		require.Eventually(t, func() bool { why = check(); return why == "" }, 3*time.Minute, time.Second, "consistent fleet of %d pods: %s", pods, &why)
		require.Empty(t, why)
		return typeOf
	}

	// 1. Killed between CreateFleet and the NodeClaim's status update.
	_, err := e.local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateFleet", Kind: awslocal.FaultLatencyAfter, Latency: time.Minute, Count: 1})
	require.NoError(t, err)
	pid := e.startAWSController(t, "controller")
	scale(t, ctx, cp, "inflate", 1)
	var launched string
	require.Eventually(t, func() bool {
		for id := range e.liveInstances(t, ctx) {
			launched = id
			return true
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "CreateFleet should launch while its answer is held back")
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.Len(t, claims.Items, 1)
	require.Empty(t, claims.Items[0].Status.ProviderID, "the controller has not heard back yet")
	cp.Kill(pid)
	e.local.ClearFaults("", "")
	fleets := e.local.Calls("ec2", "CreateFleet")
	e.startAWSController(t, "controller-2")
	types := consistent(t, 1)
	require.Contains(t, types, launched, "the restarted controller adopted the instance launched before the crash")
	require.Equal(t, fleets, e.local.Calls("ec2", "CreateFleet"), "and sent no second CreateFleet")

	// 2. The cheapest offering runs out. The first pod's node is full
	// (1 cpu of a type with less than 2 allocatable), so a second pod needs
	// a node of the same cheapest type, which now has no capacity anywhere.
	cheapest := types[launched]
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		require.NoError(t, e.local.SetCapacity(cheapest, z, "on-demand", 0))
	}
	scale(t, ctx, cp, "inflate", 2)
	types = consistent(t, 2)
	require.Len(t, types, 2)
	for id, it := range types {
		if id != launched {
			require.NotEqual(t, cheapest, it, "the next offering launched instead of the one without capacity")
		}
	}
	e.local.ClearCapacity()

	// 3. A throttling burst on CreateFleet and a 5xx storm on
	// DescribeInstances: the SDK and the lifecycle retry, nothing doubles.
	_, err = e.local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateFleet", Kind: awslocal.FaultThrottle, Count: 4})
	require.NoError(t, err)
	_, err = e.local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeInstances", Kind: awslocal.FaultServerError, Count: 6})
	require.NoError(t, err)
	scale(t, ctx, cp, "inflate", 5)
	consistent(t, 5)
	for _, f := range e.local.Faults() {
		t.Logf("fault %s %s %s hit %d times", f.Service, f.Action, f.Kind, f.Hits)
	}
	e.local.ClearFaults("", "")

	scale(t, ctx, cp, "inflate", 0)
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
	require.Eventually(t, func() bool {
		var left v1.NodeClaimList
		return cp.Client.List(ctx, &left) == nil && len(left.Items) == 0 && len(e.liveInstances(t, ctx)) == 0
	}, 2*time.Minute, time.Second, "every NodeClaim and instance should be gone")
}

const awsSpotPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spot
spec:
  template:
    metadata:
      labels:
        capacity.example.io/pool: spot
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
        - {key: karpenter.k8s.aws/instance-size, operator: In, values: ["large"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidateAfter: 1h
`

// TestAWSInterruption runs the controller binary with INTERRUPTION_QUEUE on
// a real SQS queue of the local AWS. A spot interruption warning for the
// instance under a pod deletes its NodeClaim through the normal termination
// path: the pod moves to a new node, the interrupted instance terminates,
// the new node is not the interrupted spot offering (marked unavailable),
// the NodeClaim carries a SpotInterrupted event, and the queue drains. Then,
// with --interruption-replace-on-rebalance, a rebalance recommendation
// replaces the new node replacement first.
func TestAWSInterruption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	queue, err := sqs.NewFromConfig(e.local.Config(ctx)).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awsClusterName)})
	require.NoError(t, err)
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsSpotPool)))
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(strings.ReplaceAll(awsInflate, "pool: general-purpose", "pool: spot"))))
	e.startAWSController(t, "controller", "--interruption-queue="+awsClusterName, "--interruption-replace-on-rebalance")
	scale(t, ctx, cp, "inflate", 1)

	nodeClaimOf := func() *v1.NodeClaim {
		var claims v1.NodeClaimList
		if cp.Client.List(ctx, &claims) != nil || len(claims.Items) != 1 || runningOnOurNodes(ctx, t, cp, "app=inflate") != 1 {
			return nil
		}
		nc := claims.Items[0]
		if nc.DeletionTimestamp != nil || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
			return nil
		}
		return &nc
	}
	var first *v1.NodeClaim
	require.Eventually(t, func() bool { first = nodeClaimOf(); return first != nil }, 3*time.Minute, time.Second, "a spot node should run inflate")
	require.Equal(t, "spot", first.Labels[v1.CapacityTypeLabelKey])
	_, instanceID, ok := parseAWSProviderID(first.Status.ProviderID)
	require.True(t, ok)

	_, err = e.local.SendInterruption(ctx, awslocal.Interruption{QueueURL: aws.ToString(queue.QueueUrl), Kind: awslocal.InterruptionSpot,
		InstanceID: instanceID, TerminateAfter: awslocal.Duration(2 * time.Minute)})
	require.NoError(t, err)

	var second *v1.NodeClaim
	require.Eventually(t, func() bool {
		second = nodeClaimOf()
		return second != nil && second.Name != first.Name
	}, 3*time.Minute, time.Second, "inflate should move to a replacement node")
	require.Eventually(t, func() bool {
		_, live := e.liveInstances(t, ctx)[instanceID]
		return !live
	}, time.Minute, time.Second, "the interrupted instance should be terminated")
	interrupted := first.Labels[corev1.LabelInstanceTypeStable] + "/" + first.Labels[corev1.LabelTopologyZone]
	replacement := second.Labels[corev1.LabelInstanceTypeStable] + "/" + second.Labels[corev1.LabelTopologyZone]
	require.NotEqual(t, interrupted, replacement, "the interrupted spot offering is unavailable for the replacement")

	var events corev1.EventList
	require.NoError(t, cp.Client.List(ctx, &events))
	found := false
	for _, ev := range events.Items {
		if ev.InvolvedObject.Name == first.Name && ev.Reason == "SpotInterrupted" {
			found = true
		}
	}
	require.True(t, found, "a SpotInterrupted event on the interrupted NodeClaim")
	attrs, err := sqs.NewFromConfig(e.local.Config(ctx)).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessages"])
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], "the message was deleted, not left in flight")

	// With --interruption-replace-on-rebalance, a rebalance recommendation
	// replaces the node as drift does: the replacement is Ready before the
	// node is drained.
	_, rebalanced, _ := parseAWSProviderID(second.Status.ProviderID)
	_, err = e.local.SendInterruption(ctx, awslocal.Interruption{QueueURL: aws.ToString(queue.QueueUrl), Kind: awslocal.InterruptionRebalance, InstanceID: rebalanced})
	require.NoError(t, err)
	// Polls are 200 ms apart, so both can first show in the same poll;
	// then the API's own times (to the second) order them.
	var readyAt, deletingAt time.Time
	var readyPoll, deletingPoll int
	var readySince, deletedSince metav1.Time
	var third *v1.NodeClaim
	secondGone := false
	deadline := time.Now().Add(3 * time.Minute)
	for poll := 1; third == nil || !secondGone || runningOnOurNodes(ctx, t, cp, "app=inflate") != 1; poll++ {
		require.Truef(t, time.Now().Before(deadline), "no replacement for the rebalanced node after 3m (ready %v, deleting %v)", readyAt, deletingAt)
		var claims v1.NodeClaimList
		require.NoError(t, cp.Client.List(ctx, &claims))
		gone := true
		for i := range claims.Items {
			nc := &claims.Items[i]
			switch {
			case nc.Name == second.Name:
				gone = false
				if nc.DeletionTimestamp != nil && deletingAt.IsZero() {
					deletingAt, deletingPoll, deletedSince = time.Now(), poll, *nc.DeletionTimestamp
				}
				for _, c := range nc.Status.Conditions {
					if c.Type == v1.ConditionTypeDrifted && c.Status == metav1.ConditionTrue {
						require.Equal(t, "RebalanceRecommendation", c.Reason)
					}
				}
			case nc.Name != first.Name && conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) && nc.DeletionTimestamp == nil:
				if readyAt.IsZero() {
					readyAt, readyPoll, third = time.Now(), poll, nc.DeepCopy()
					readySince = condition(nc.Status.Conditions, v1.ConditionTypeReady).LastTransitionTime
				}
			}
		}
		if gone && deletingAt.IsZero() {
			deletingAt, deletingPoll = time.Now(), poll
		}
		secondGone = gone
		time.Sleep(200 * time.Millisecond)
	}
	require.LessOrEqual(t, readyPoll, deletingPoll, "the replacement should be Ready (seen %s) before the rebalanced node is drained (seen %s)", readyAt.Format(time.StampMilli), deletingAt.Format(time.StampMilli))
	if readyPoll == deletingPoll && !deletedSince.IsZero() {
		require.False(t, readySince.After(deletedSince.Time), "the replacement should be Ready (since %s) before the rebalanced node is deleted (%s)", readySince, deletedSince)
	}
}

// awsSpread needs one node per pod (required hostname anti-affinity) on the
// general-purpose pool.
const awsSpread = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: spread
  template:
    metadata:
      labels:
        app: spread
    spec:
      nodeSelector:
        capacity.example.io/pool: general-purpose
      terminationGracePeriodSeconds: 0
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  app: spread
              topologyKey: kubernetes.io/hostname
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources:
            requests:
              cpu: "1"
              memory: 256Mi
`

// TestAWSDrift edits the examples' EC2NodeClass under three nodes (the
// pool's default budget, 10%, allows one disruption at a time) and checks
// AWS drift end to end through the controller binary:
//   - a static field (spec.tags): the class hash moves, the NodeClaims go
//     Drifted with NodeClassDrift (as `karpenter simulate` of the edit
//     predicted beforehand), and are replaced one at a time by
//     instances carrying the new tag;
//   - the AMI alias (al2023@latest) gets a new release and the release
//     the nodes run is deprecated: the SSM invalidation controller (its
//     interval shortened by the test-only SSM_INVALIDATION_INTERVAL) forgets
//     the day-long cached parameter, the class resolves the new image, the
//     NodeClaims go Drifted with AMIDrift and are replaced one at a time on
//     the new image;
//   - the EKS control plane is upgraded one minor version
//     (UpdateClusterVersion on the local EKS record; the controller runs
//     with EKS_CONTROL_PLANE and reads the version every 10s instead of
//     upstream's 5 minutes, through the test-only
//     KUBERNETES_VERSION_REFRESH_INTERVAL): al2023@latest resolves the new
//     version's image, and the NodeClaims drift with AMIDrift and are
//     replaced one at a time onto it.
func TestAWSDrift(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 13*time.Minute)
	defer cancel()
	var eksVersion string
	e := newAWSEnv(t, ctx, func(o *awslocal.ClusterOptions) {
		// One version behind the control plane, so that the upgrade
		// below lands on the control plane's own version, which the
		// local AWS publishes images for.
		o.KubernetesVersion = previousMinor(t, o.KubernetesVersion)
		eksVersion = o.KubernetesVersion
	})
	cp := e.cp
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsSpread)))
	t.Setenv("SSM_INVALIDATION_INTERVAL", "5s")
	t.Setenv("EKS_CONTROL_PLANE", "true")
	t.Setenv("KUBERNETES_VERSION_REFRESH_INTERVAL", "10s")
	e.startAWSController(t, "controller")

	// settled waits for 3 Ready NodeClaims, none deleting, all passing
	// check, with 3 spread pods running, and returns them.
	settled := func(what string, check func(v1.NodeClaim) bool) []v1.NodeClaim {
		t.Helper()
		var out []v1.NodeClaim
		require.Eventually(t, func() bool {
			var claims v1.NodeClaimList
			if cp.Client.List(ctx, &claims) != nil || len(claims.Items) != 3 || runningOnOurNodes(ctx, t, cp, "app=spread") != 3 {
				return false
			}
			for _, nc := range claims.Items {
				if nc.DeletionTimestamp != nil || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) || !check(nc) {
					return false
				}
			}
			out = claims.Items
			return true
		}, 5*time.Minute, time.Second, what)
		return out
	}
	// replaced edits the class, then samples every 200ms until the three
	// NodeClaims before the edit are gone: never more than one of them is
	// disrupted at once (deleting with its instance not yet terminating),
	// and each went Drifted with reason.
	replaced := func(before []v1.NodeClaim, reason string, edit func(*awsv1.EC2NodeClass)) {
		t.Helper()
		old := map[string]bool{}
		for _, nc := range before {
			old[nc.Name] = true
		}
		// The controller writes the class too (its status, its hash
		// annotation): an update from a stale read is retried.
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			class := &awsv1.EC2NodeClass{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
				return err
			}
			edit(class)
			return cp.Client.Update(ctx, class)
		}))
		drifted := map[string]bool{}
		maxDisrupted := 0
		deadline := time.Now().Add(5 * time.Minute)
		for {
			var claims v1.NodeClaimList
			require.NoError(t, cp.Client.List(ctx, &claims))
			left, disrupted := 0, 0
			for _, nc := range claims.Items {
				if !old[nc.Name] {
					continue
				}
				left++
				// As the budget counts: a NodeClaim whose instance is
				// already terminating no longer takes a disruption (its
				// NodeClaim stays until EC2 reports the instance gone,
				// which on AWS takes longer than the next replacement).
				if nc.DeletionTimestamp != nil && !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating) {
					disrupted++
				}
				for _, c := range nc.Status.Conditions {
					if c.Type == v1.ConditionTypeDrifted && c.Status == metav1.ConditionTrue && c.Reason == reason {
						drifted[nc.Name] = true
					}
				}
			}
			maxDisrupted = max(maxDisrupted, disrupted)
			if left == 0 {
				break
			}
			require.Truef(t, time.Now().Before(deadline), "%d of the drifted NodeClaims still there after 5m", left)
			time.Sleep(200 * time.Millisecond)
		}
		require.LessOrEqual(t, maxDisrupted, 1, "the budget allows one disruption at a time")
		require.Len(t, drifted, 3, "every replaced NodeClaim was Drifted with %s", reason)
	}

	before := settled("three nodes for the spread pods", func(v1.NodeClaim) bool { return true })
	class := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	hash := class.Annotations[awsv1.AnnotationEC2NodeClassHash]
	require.NotEmpty(t, hash, "the class carries its hash")
	for _, nc := range before {
		require.Equal(t, hash, nc.Annotations[awsv1.AnnotationEC2NodeClassHash], "launched with the class's hash")
	}

	// `karpenter simulate` of the edit predicts what the controller then
	// does: exactly these NodeClaims drift, with NodeClassDrift.
	edited := class.DeepCopy()
	edited.APIVersion, edited.Kind = awsv1.GroupVersion.String(), "EC2NodeClass"
	edited.Spec.Tags = map[string]string{"team": "drift"}
	manifest, err := yaml.Marshal(edited)
	require.NoError(t, err)
	predicted := simulate(t, ctx, cp, string(manifest))
	var want, got []string
	for _, nc := range before {
		want = append(want, nc.Name+" NodeClassDrift")
	}
	for _, d := range predicted.Drifted {
		got = append(got, d.NodeClaim+" "+d.Reason)
	}
	require.ElementsMatch(t, want, got, "simulate predicts the class edit's drift")
	require.Empty(t, predicted.Unresolved, "a tag edit changes no selector")

	replaced(before, "NodeClassDrift", func(c *awsv1.EC2NodeClass) { c.Spec.Tags = map[string]string{"team": "drift"} })
	after := settled("three replacements with the new tag", func(nc v1.NodeClaim) bool {
		return nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != hash
	})
	for _, nc := range after {
		_, id, _ := parseAWSProviderID(nc.Status.ProviderID)
		inst, ok := e.liveInstances(t, ctx)[id]
		require.True(t, ok)
		tags := map[string]string{}
		for _, tag := range inst.Tags {
			tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		require.Equal(t, "drift", tags["team"], "the replacement %s carries the new tag", id)
	}

	// A newer AL2023 release behind the class's own alias; the release the
	// nodes run is deprecated, which is what lets the controller look past
	// its day-long cache of the alias's parameter.
	img, err := e.local.PublishImage(ctx, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: eksVersion, Arch: "x86_64", Variant: "standard"})
	require.NoError(t, err)
	running := after[0].Status.ImageID
	require.NotEqual(t, running, img.ID)
	replaced(after, "AMIDrift", func(*awsv1.EC2NodeClass) {
		require.NoError(t, e.local.DeprecateImage(ctx, running, time.Now().Add(-time.Minute)))
	})
	onNew := settled("three replacements on the new image", func(nc v1.NodeClaim) bool { return nc.Status.ImageID == img.ID })
	require.Len(t, e.liveInstances(t, ctx), 3, "no instance left behind")

	// The control plane upgrade: the new version's al2023 image is what
	// the alias resolves to, and the nodes roll onto it.
	upgraded, ok := e.local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: serverMinor(t, cp), Arch: "x86_64", Variant: "standard"})
	require.True(t, ok, "the local AWS publishes al2023 for %s", serverMinor(t, cp))
	upgradeStart := time.Now()
	replaced(onNew, "AMIDrift", func(*awsv1.EC2NodeClass) {
		_, err := eks.NewFromConfig(e.local.Config(ctx)).UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{
			Name: aws.String(awsClusterName), Version: aws.String(serverMinor(t, cp))})
		require.NoError(t, err)
	})
	settled("three replacements on the upgraded version's image", func(nc v1.NodeClaim) bool { return nc.Status.ImageID == upgraded.ID })
	t.Logf("control plane %s -> %s: nodes replaced onto %s in %s", eksVersion, serverMinor(t, cp), upgraded.ID, time.Since(upgradeStart).Round(time.Second))
	require.Len(t, e.liveInstances(t, ctx), 3, "no instance left behind")
}

// TestAWSInterruptionKinds puts 1,000 malformed, unknown and foreign
// messages on the interruption queue with three real ones among them, for
// three nodes of the general-purpose pool: a state change to stopping and an
// AWS Health scheduled change each drain their node (replaced, pods Running
// again), a rebalance recommendation only records its event; the queue
// drains to empty, the metrics count every message as received and deleted,
// and the controller never restarts. Then an instance status impaired
// for 120 s (not 60) replaces the third node, and a capacity-reservation
// interruption warning drains another.
func TestAWSInterruptionKinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	sqsAPI := sqs.NewFromConfig(e.local.Config(ctx))
	queue, err := sqsAPI.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awsClusterName)})
	require.NoError(t, err)
	queueURL := aws.ToString(queue.QueueUrl)
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsSpread)))
	t.Setenv("INSTANCE_STATUS_INTERVAL", "5s")
	pid := e.startAWSController(t, "controller", "--interruption-queue="+awsClusterName)

	// nodes waits for 3 Ready NodeClaims, none deleting, with the 3 spread
	// pods running, and returns their instance ids by NodeClaim name.
	nodes := func(what string, done func(map[string]string) bool) map[string]string {
		t.Helper()
		var out map[string]string
		require.Eventually(t, func() bool {
			var claims v1.NodeClaimList
			if cp.Client.List(ctx, &claims) != nil || len(claims.Items) != 3 || runningOnOurNodes(ctx, t, cp, "app=spread") != 3 {
				return false
			}
			out = map[string]string{}
			for _, nc := range claims.Items {
				_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
				if !ok || nc.DeletionTimestamp != nil || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
					return false
				}
				out[nc.Name] = id
			}
			return done(out)
		}, 4*time.Minute, time.Second, what)
		return out
	}
	before := nodes("three spread nodes", func(map[string]string) bool { return true })
	var names []string
	for name := range before {
		names = append(names, name)
	}
	stopping, scheduled, rebalanced := names[0], names[1], names[2]

	// 1,000 messages that must change nothing, with the 3 real ones in the
	// middle, sent 10 at a time.
	var bodies []string
	for i := 0; i < 1000; i++ {
		switch i % 3 {
		case 0:
			bodies = append(bodies, fmt.Sprintf("not json %d {", i))
		case 1:
			bodies = append(bodies, `{"version":"0","id":"x","detail-type":"EC2 Something New","source":"aws.ec2","time":"2026-12-02T00:00:00Z","detail":{}}`)
		default:
			b, err := e.local.InterruptionBody(ctx, awslocal.Interruption{QueueURL: queueURL, Kind: awslocal.InterruptionSpot, InstanceID: fmt.Sprintf("i-0%016x", i)})
			require.NoError(t, err)
			bodies = append(bodies, b)
		}
		if i == 500 {
			for _, in := range []awslocal.Interruption{
				{QueueURL: queueURL, Kind: awslocal.InterruptionStateChange, State: "stopping", InstanceID: before[stopping]},
				{QueueURL: queueURL, Kind: awslocal.InterruptionScheduledChange, InstanceID: before[scheduled]},
				{QueueURL: queueURL, Kind: awslocal.InterruptionRebalance, InstanceID: before[rebalanced]},
			} {
				b, err := e.local.InterruptionBody(ctx, in)
				require.NoError(t, err)
				bodies = append(bodies, b)
			}
		}
	}
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(start + i)), MessageBody: aws.String(b)})
		}
		out, err := sqsAPI.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: queue.QueueUrl, Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}

	after := nodes("the stopping and scheduled nodes replaced", func(m map[string]string) bool {
		_, a := m[stopping]
		_, b := m[scheduled]
		return !a && !b
	})
	require.NotContains(t, after, stopping, "the stopping node was drained")
	require.NotContains(t, after, scheduled, "the scheduled-change node was drained")
	require.Contains(t, after, rebalanced, "a rebalance recommendation only records an event")
	require.Eventually(t, func() bool {
		attrs, err := sqsAPI.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		return err == nil && attrs.Attributes["ApproximateNumberOfMessages"] == "0" && attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
	}, 2*time.Minute, time.Second, "the queue should drain to empty")
	// A worker counts its message a moment after deleting it.
	var received, deleted float64
	require.Eventually(t, func() bool {
		samples, err := scrapeMetrics(ctx, e.metricsPort)
		if err != nil {
			return false
		}
		received, deleted = 0, 0
		for _, m := range samples {
			switch m.name {
			case "karpenter_interruption_received_messages_total":
				received += m.value
			case "karpenter_interruption_deleted_messages_total":
				deleted += m.value
			}
		}
		return received == float64(len(bodies)) && deleted == float64(len(bodies))
	}, 30*time.Second, time.Second, "every message counted as received and deleted")
	require.Equal(t, float64(len(bodies)), received)
	require.Equal(t, float64(len(bodies)), deleted)
	require.NoError(t, syscall.Kill(pid, 0), "the controller is still running")
	require.NotContains(t, controllerLog(t, cp), "panic", "no panic, recovered or not")

	var events corev1.EventList
	require.NoError(t, cp.Client.List(ctx, &events))
	reasons := map[string][]string{}
	for _, ev := range events.Items {
		reasons[ev.InvolvedObject.Name] = append(reasons[ev.InvolvedObject.Name], ev.Reason)
	}
	require.Contains(t, reasons[stopping], "InstanceStopping")
	require.Contains(t, reasons[rebalanced], "SpotRebalanceRecommendation")

	// An impaired instance status replaces its node once it has lasted
	// 120 s (the check runs every 5 s here, every minute by default).
	require.NoError(t, e.local.SetInstanceStatus(before[rebalanced], awslocal.StatusImpaired, ""))
	impaired := time.Now()
	time.Sleep(60 * time.Second)
	var held v1.NodeClaim
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: rebalanced}, &held))
	require.Nil(t, held.DeletionTimestamp, "60 s of impairment does nothing")
	final := nodes("the impaired node replaced", func(m map[string]string) bool { _, ok := m[rebalanced]; return !ok })
	require.NotContains(t, final, rebalanced)
	require.GreaterOrEqual(t, time.Since(impaired), interruption.ImpairmentToleration, "not replaced before 120 s of impairment")

	// A capacity-reservation interruption warning drains its node too.
	var reserved string
	for name := range final {
		reserved = name
	}
	_, err = e.local.SendInterruption(ctx, awslocal.Interruption{QueueURL: queueURL, Kind: awslocal.InterruptionCapacityReservation, InstanceID: final[reserved]})
	require.NoError(t, err)
	nodes("the reservation-interrupted node replaced", func(m map[string]string) bool { _, ok := m[reserved]; return !ok })
	require.Len(t, e.liveInstances(t, ctx), 3, "no instance left behind")
}
