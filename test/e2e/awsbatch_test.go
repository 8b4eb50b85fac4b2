package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// batchPool is the NodePool of the batched scale-up: on-demand m5.large
// only, so every NodeClaim's launch is the same request and they batch.
const batchPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: batch
spec:
  disruption:
    consolidateAfter: Never
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: kubernetes.io/os, operator: In, values: ["linux"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

// batchClaims and classTags size the batched scale-up.
const (
	batchClaims = 600
	classTags   = 45
)

// TestAWSBatchedScaleUp loads the local AWS (moto) more than any other
// test: make test runs it alone after every other test (hack/test.sh).
//
// TestAWSBatchedScaleUp creates 600 NodeClaims at once on an EC2NodeClass
// carrying 45 tags of its own, under IAM and EC2's throttling: the
// controller launches them through batched CreateFleet calls, every
// instance ends up claimed by exactly one NodeClaim (its
// karpenter.sh/nodeclaim tag, the NodeClaim's providerID), no instance
// carries more than EC2's 50 user tags (the local AWS refuses a 51st),
// every instance carries the class's tags, and deleting the NodeClaims
// terminates every instance: none leaked. Nodes are not booted, so the test
// measures the launch path alone.
func TestAWSBatchedScaleUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	e.booter.Stop()
	cp := e.cp
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(batchPool)))
	class := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	class.Spec.Tags = map[string]string{}
	for i := range classTags {
		class.Spec.Tags[fmt.Sprintf("team.example.com/tag-%02d", i)] = fmt.Sprintf("value-%02d", i)
	}
	require.NoError(t, cp.Client.Update(ctx, class))
	e.startAWSController(t, "controller")
	require.Eventually(t, func() bool {
		return cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class) == nil && metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady)
	}, 2*time.Minute, time.Second, "EC2NodeClass default should go Ready")

	fleetsBefore := e.local.Calls("ec2", "CreateFleet")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, batchClaims)
	sem := make(chan struct{}, 32)
	for i := range batchClaims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			nc := &v1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("batch-%03d", i), Labels: map[string]string{v1.NodePoolLabelKey: "batch"}},
				Spec: v1.NodeClaimSpec{
					NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
					Requirements: []v1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
						{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
						{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
						{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
						{Key: v1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"batch"}},
					},
					Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				},
			}
			errs <- cp.Client.Create(ctx, nc)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Every NodeClaim launched.
	var claims v1.NodeClaimList
	require.Eventually(t, func() bool {
		if err := cp.Client.List(ctx, &claims); err != nil {
			return false
		}
		launched := 0
		for _, nc := range claims.Items {
			if conditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) && nc.Status.ProviderID != "" {
				launched++
			}
		}
		return launched == batchClaims
	}, 10*time.Minute, 2*time.Second, "all %d NodeClaims should launch", batchClaims)
	launchedIn := time.Since(start)
	fleets := e.local.Calls("ec2", "CreateFleet") - fleetsBefore

	// Every instance of the cluster is claimed by exactly one NodeClaim,
	// and within EC2's tag limit.
	byID := map[string]string{}
	for _, nc := range claims.Items {
		_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
		require.Truef(t, ok, "providerID %q", nc.Status.ProviderID)
		require.Emptyf(t, byID[id], "instance %s is claimed by %s and %s", id, byID[id], nc.Name)
		byID[id] = nc.Name
	}
	// A NodeClaim launches as soon as CreateFleet returns; its instance's
	// claim (karpenter.sh/nodeclaim) is written after.
	var cluster map[string]ec2types.Instance
	unclaimed := 0
	claimed := func() bool {
		cluster = clusterInstances(t, ctx, e)
		unclaimed = 0
		for id, inst := range cluster {
			if tagValue(inst.Tags, awsv1.NodeClaimTagKey) != byID[id] {
				unclaimed++
			}
		}
		return unclaimed == 0
	}
	for deadline := time.Now().Add(3 * time.Minute); !claimed() && time.Now().Before(deadline); {
		time.Sleep(2 * time.Second)
	}
	if unclaimed > 0 {
		for _, line := range strings.Split(controllerLog(t, cp), "\n") {
			if strings.Contains(line, "claim") && !strings.Contains(line, "launched nodeclaim") {
				t.Log(line)
			}
		}
	}
	require.Zerof(t, unclaimed, "every instance should be claimed by its NodeClaim (%d of %d are not)", unclaimed, len(cluster))
	t.Logf("every instance claimed %.1fs after the last NodeClaim launched", time.Since(start).Seconds()-launchedIn.Seconds())
	require.Len(t, cluster, batchClaims, "one instance per NodeClaim: none leaked, none launched twice")
	maxTags := 0
	for id, inst := range cluster {
		tags := map[string]string{}
		user := 0
		for _, tag := range inst.Tags {
			k := aws.ToString(tag.Key)
			tags[k] = aws.ToString(tag.Value)
			if !strings.HasPrefix(k, "aws:") {
				user++
			}
		}
		maxTags = max(maxTags, user)
		require.LessOrEqualf(t, user, 50, "instance %s carries %d user tags", id, user)
		require.Equalf(t, byID[id], tags[awsv1.NodeClaimTagKey], "instance %s is claimed by its NodeClaim", id)
		for k, v := range class.Spec.Tags {
			require.Equalf(t, v, tags[k], "instance %s carries the class's tag %s", id, k)
		}
	}
	t.Logf("%d NodeClaims launched in %.1fs through %d CreateFleet call(s); at most %d user tags on an instance; throttled: %s",
		batchClaims, launchedIn.Seconds(), fleets, maxTags, e.local.ThrottleSummary())
	require.Less(t, fleets, batchClaims, "identical launches are batched")

	// Deleting the NodeClaims terminates every instance.
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
	require.Eventually(t, func() bool {
		var left v1.NodeClaimList
		return cp.Client.List(ctx, &left) == nil && len(left.Items) == 0 && len(clusterInstances(t, ctx, e)) == 0
	}, 10*time.Minute, 2*time.Second, "every NodeClaim and instance should be gone")
}

// clusterInstances are the pending and running instances tagged as the
// cluster's, claimed or not.
func clusterInstances(t testing.TB, ctx context.Context, e *awsEnv) map[string]ec2types.Instance {
	t.Helper()
	out := map[string]ec2types.Instance{}
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + awsv1.EKSClusterNameTagKey), Values: []string{awsClusterName}},
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

// tagValue is the value of key among tags, or "".
func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
