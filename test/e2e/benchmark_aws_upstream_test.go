package e2e_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// upstreamAWSResult is upstream's AWS controller's run of the 1,000-pod
// burst, with the EC2 calls it made.
type upstreamAWSResult struct {
	provisioningResult
	calls    map[string]int
	launched int
}

// upstreamAWSProvisioning runs BenchmarkProvisioningAWS1000's burst with
// upstream Karpenter's own AWS controller (test/anchors; `make tools`
// builds it) on a control plane and local AWS of its own, set up as ours
// gets them: the examples' EC2NodeClass, the benchmark's NodePool, the
// instances booted into Nodes, the controller signing as an IAM principal
// under upstream's policy (evaluated, not enforced: a denial is logged, so
// that a call upstream's controller makes and our policy model lacks does
// not end its run) and throttled at EC2's figures. Everything is stopped
// on return, so the run that follows has the machine to itself. ok is
// false, with the reason logged, when the anchors are not built.
//
// BENCH_SKIP_UPSTREAM=1 skips the run (ok false), for iterating on ours.
func upstreamAWSProvisioning(b *testing.B) (upstreamAWSResult, bool) {
	if os.Getenv("BENCH_SKIP_UPSTREAM") != "" {
		b.Logf("upstream's AWS controller not run: BENCH_SKIP_UPSTREAM is set")
		return upstreamAWSResult{}, false
	}
	bins, err := anchors.Find("")
	if err != nil {
		b.Logf("upstream's AWS controller not run: %v", err)
		return upstreamAWSResult{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
	})
	if err != nil {
		b.Fatalf("starting control plane: %v", err)
	}
	defer cp.Stop()
	b.Cleanup(cp.Stop)
	local, err := awslocal.Start(ctx, awsOptions(b.TempDir()))
	if err != nil {
		b.Fatalf("starting the local AWS: %v", err)
	}
	defer local.Stop()
	if _, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: awsClusterName, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		b.Fatalf("seeding the local AWS: %v", err)
	}
	booter := local.Boot(context.Background(), cp.Client, awslocal.BootOptions{ClusterName: awsClusterName})
	defer booter.Stop()
	applyExamples(b, ctx, cp, "00-ec2nodeclass.yaml")
	if err := controlplane.Apply(ctx, cp.Client, []byte(benchAWSPool)); err != nil {
		b.Fatalf("applying the NodePool: %v", err)
	}
	upstreamPolicy, shipped := controllerPolicies(b)
	creds, err := local.AddPrincipal(awslocal.Principal{Name: controllerPrincipal, Policies: upstreamPolicy,
		Shadow: map[string][]awslocal.Policy{"shipped": shipped}, AuditOnly: true})
	if err != nil {
		b.Fatalf("adding the controller's principal: %v", err)
	}
	ports, err := anchors.FreePorts()
	if err != nil {
		b.Fatal(err)
	}
	pid, err := anchors.StartAWS(cp, bins, "controller", ports,
		append(local.EnvWith(creds), "CLUSTER_NAME="+awsClusterName, "CLUSTER_ENDPOINT="+cp.Config.Host)...)
	if err != nil {
		b.Fatalf("starting upstream's AWS controller: %v", err)
	}
	defer cp.Kill(pid)
	var before map[string]int
	res := provisioningBench{
		cp: cp, pid: pid, pool: "bench", timeout: 20 * time.Minute, leaderless: true, label: "upstream-aws",
		beforeStart: func() { before = local.CallsBy(controllerPrincipal) },
		price:       localAWSPrice(local),
	}.run(b, ctx)
	after := local.CallsBy(controllerPrincipal)
	calls := map[string]int{}
	for api, n := range after {
		if d := n - before[api]; d > 0 {
			calls[api] = d
		}
	}
	e := &awsEnv{cp: cp, local: local, ec2: ec2.NewFromConfig(local.Config(ctx))}
	launched := len(clusterInstances(b, ctx, e))
	if denied := local.Denials(controllerPrincipal); len(denied) > 0 {
		b.Logf("upstream's AWS controller: %d call(s) its own policy denies in our model, e.g.:\n%s", len(denied), summarizeDenials(denied, 8))
	}
	b.Logf("upstream's AWS controller on the local AWS: bound in %.1fs, Running in %.1fs; %d NodeClaims %v, %d instances live, %d CreateFleet call(s), %d round(s); $%.2f/h; peak RSS %.0f MiB, CPU %.1fs",
		res.bound.Seconds(), res.running.Seconds(), len(res.claims), res.types, launched, calls["ec2:CreateFleet"], res.rounds, res.cost, res.peakMiB, res.cpuSeconds)
	b.Logf("upstream's EC2 calls per launched node during the scale-up (%d nodes): %s", launched, perNode(map[string]int{}, calls, launched))
	return upstreamAWSResult{provisioningResult: res, calls: calls, launched: launched}, true
}

// localAWSPrice prices a NodeClaim at the local AWS's on-demand or spot
// price for its type and zone, as the AWS benchmarks report $/h.
func localAWSPrice(local *awslocal.Local) func(*v1.NodeClaim, *corev1.Node) float64 {
	return func(nc *v1.NodeClaim, _ *corev1.Node) float64 {
		it, zone := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]
		if nc.Labels[v1.CapacityTypeLabelKey] == "spot" {
			p, _ := local.SpotPrice("us-east-1", zone, it)
			return p
		}
		p, _ := local.OnDemandPrice(it, "us-east-1")
		return p
	}
}
