package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// benchAWSPool is the AWS benchmark's NodePool: c, m and r families of
// generation 5 and later, linux/amd64, on the examples' EC2NodeClass, with
// the kwok benchmark's disruption settings.
const benchAWSPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: bench
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: kubernetes.io/os, operator: In, values: ["linux"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets:
      - nodes: "100%"
`

// BenchmarkProvisioningAWS1000 is BenchmarkProvisioning1000 on the AWS
// provider: the controller binary with --cloud-provider=aws against the
// local AWS (moto behind our front), the examples' EC2NodeClass, and the
// instances CreateFleet launches booted into Nodes from their user data.
// Besides the kwok benchmark's figures it reports the CreateFleet and
// CreateTags calls (batching) and prices each NodeClaim at the local AWS's
// on-demand or spot price. After the run an ARC zonal shift takes the
// busiest zone away (zonalShiftPhase): the next round and consolidation
// launch nothing there, and once it is cancelled the zone is used again. It
// runs only with -bench, e.g.
//
//	go test ./test/e2e -run '^$' -bench ProvisioningAWS1000 -benchtime 1x -timeout 50m
func BenchmarkProvisioningAWS1000(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
	})
	if err != nil {
		b.Fatalf("starting control plane: %v", err)
	}
	b.Cleanup(cp.Stop)
	local, err := awslocal.Start(ctx, awslocal.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatalf("starting the local AWS: %v", err)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("moto log (tail):\n%s", local.LogTail())
		}
		local.Stop()
	})
	// Three /20 subnets (4,091 addresses each) hold far more instances
	// than the benchmark launches.
	if _, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: awsClusterName, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		b.Fatalf("seeding the local AWS: %v", err)
	}
	// The cluster is registered with ARC zonal shift and the controller
	// runs with ENABLE_ZONAL_SHIFT, for the shift that follows the run.
	arn, err := local.EnableZonalShift(ctx, awsClusterName, false)
	if err != nil {
		b.Fatalf("registering the cluster with ARC: %v", err)
	}
	booter := local.Boot(context.Background(), cp.Client, awslocal.BootOptions{ClusterName: awsClusterName})
	b.Cleanup(booter.Stop)
	class, err := os.ReadFile(filepath.Join("../../examples", "00-ec2nodeclass.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := controlplane.Apply(ctx, cp.Client, append(append(class, "\n---\n"...), benchAWSPool...)); err != nil {
		b.Fatalf("applying the EC2NodeClass and NodePool: %v", err)
	}
	env := append(local.Env(), "CLUSTER_NAME="+awsClusterName, "CLUSTER_ENDPOINT="+cp.Config.Host, "ENABLE_ZONAL_SHIFT=true")
	pid, err := cp.SpawnEnv(controllerBin, "controller", env,
		"--cloud-provider=aws",
		"--kubeconfig="+cp.KubeconfigPath,
		"--metrics-port="+strconv.Itoa(freePort(b)), "--health-probe-port="+strconv.Itoa(freePort(b)),
		"--leader-election-namespace=kube-system")
	if err != nil {
		b.Fatalf("starting controller: %v", err)
	}

	calls := func() map[string]int {
		out := map[string]int{}
		for _, a := range []string{"CreateFleet", "CreateTags", "DescribeInstances", "RunInstances"} {
			out[a] = local.Calls("ec2", a)
		}
		return out
	}
	var before map[string]int
	res := provisioningBench{
		cp: cp, pid: pid, pool: "bench", timeout: 20 * time.Minute,
		beforeStart: func() { before = calls() },
		price: func(nc *v1.NodeClaim, _ *corev1.Node) float64 {
			it, zone := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]
			if nc.Labels[v1.CapacityTypeLabelKey] == "spot" {
				p, _ := local.SpotPrice("us-east-1", zone, it)
				return p
			}
			p, _ := local.OnDemandPrice(it, "us-east-1")
			return p
		},
	}.run(b, ctx)
	after := calls()
	fleets := after["CreateFleet"] - before["CreateFleet"]
	b.ReportMetric(float64(fleets), "createfleet-calls")
	b.ReportMetric(float64(after["CreateTags"]-before["CreateTags"]), "createtags-calls")
	b.Logf("EC2 calls during the scale-up: CreateFleet %d, CreateTags %d, DescribeInstances %d",
		fleets, after["CreateTags"]-before["CreateTags"], after["DescribeInstances"]-before["DescribeInstances"])
	b.Logf("1000 pods on AWS: bound in %.1fs, Running in %.1fs; %d NodeClaims through %d CreateFleet call(s) in %d round(s) %v; $%.2f/h; controller peak RSS %.0f MiB, CPU %.1fs",
		res.bound.Seconds(), res.running.Seconds(), len(res.claims), fleets, res.rounds, res.types, res.cost, res.peakMiB, res.cpuSeconds)
	zonalShiftPhase(b, ctx, cp, local, arn)
}
