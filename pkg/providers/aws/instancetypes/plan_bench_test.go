package instancetypes_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// BenchmarkPlanAWSBurst is test/e2e's BenchmarkProvisioningAWS1000 burst
// (500 pods of 900m/3100Mi and 500 of 3500m/28Gi on its c/m/r, generation
// 5+ pool) planned in one solve over the local AWS's instance types and
// prices (spot included: the pool does not restrict the capacity type),
// without a cluster: the $/h and NodeClaims the provisioner's first round
// would plan. "uncapped" grows NodeClaims as upstream does, "capped" with
// the provisioner's CapGrowth; each logs the NodeClaims by cheapest type.
//
//	go test ./pkg/providers/aws/instancetypes -run '^$' -bench PlanAWSBurst -benchtime 1x
func BenchmarkPlanAWSBurst(b *testing.B) {
	ctx := context.Background()
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}},
		Status: awsv1.EC2NodeClassStatus{Subnets: []awsv1.Subnet{
			{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az6"},
			{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az1"},
			{ID: "subnet-c", Zone: "us-east-1c", ZoneID: "use1-az2"},
		}},
	}
	p := newProvider(instancetypes.Options{})
	if err := p.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	its, err := p.List(ctx, class)
	if err != nil {
		b.Fatal(err)
	}
	reqs, err := scheduling.RequirementsFromMinValues([]scheduling.RequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: "In", Values: []string{"amd64"}},
		{Key: corev1.LabelOSStable, Operator: "In", Values: []string{"linux"}},
		{Key: awsv1.LabelInstanceCategory, Operator: "In", Values: []string{"c", "m", "r"}},
		{Key: awsv1.LabelInstanceGeneration, Operator: "Gt", Values: []string{"4"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, d := range []struct{ name, cpu, mem string }{{"bench-small", "900m", "3100Mi"}, {"bench-large", "3500m", "28Gi"}} {
		for i := range 500 {
			name := fmt.Sprintf("%s-%03d", d.name, i)
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: types.UID(name), Labels: map[string]string{"app": d.name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(d.cpu), corev1.ResourceMemory: resource.MustParse(d.mem)}}}}},
			})
		}
	}
	for _, capped := range []bool{false, true} {
		b.Run(map[bool]string{false: "uncapped", true: "capped"}[capped], func(b *testing.B) {
			in := &scheduling.Input{
				Pods:            pods,
				NodePools:       []*scheduling.NodePool{{Name: "bench", Requirements: reqs, InstanceTypes: its}},
				WellKnownLabels: sets.List(awsv1.WellKnownLabels),
				Options:         scheduling.Options{Robust: true, CapGrowth: capped},
			}
			var res *scheduling.Result
			for b.Loop() {
				res = scheduling.Solve(in)
			}
			b.StopTimer()
			byType := map[string]int{}
			for _, nc := range res.NewNodeClaims {
				byType[fmt.Sprintf("%s $%.3f", nc.InstanceTypes[0].Name, nc.Price)]++
			}
			var lines []string
			for k, n := range byType {
				lines = append(lines, fmt.Sprintf("%d × %s", n, k))
			}
			sort.Strings(lines)
			b.Logf("%d NodeClaims, $%.2f/h: %s", len(res.NewNodeClaims), res.Cost(), strings.Join(lines, ", "))
			b.ReportMetric(float64(len(res.NewNodeClaims)), "nodeclaims")
			b.ReportMetric(res.Cost(), "$/h")
			b.ReportMetric(float64(len(res.Unscheduled())), "unscheduled")
		})
	}
}
