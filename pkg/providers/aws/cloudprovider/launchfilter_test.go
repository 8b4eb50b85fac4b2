package cloudprovider_test

import (
	"context"
	"sort"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// TestLaunchFiltersOnTheFleetRequest: the CreateFleet request the local AWS
// receives for a NodePool of GPU, metal and general types offers only the
// general types to CPU-only pods and only the GPU types to a GPU pod; and
// the 60 types of a wide launch keep a minValues the 60 cheapest miss.
func TestLaunchFiltersOnTheFleetRequest(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)
	mixed := []string{"g5.xlarge", "g5.2xlarge", "p4d.24xlarge", "m5.metal", "m5.xlarge", "c5.xlarge", "m6i.xlarge"}

	fleetTypes := func(t *testing.T) map[string]bool {
		in := rec.last(t)
		out := map[string]bool{}
		for _, c := range in.LaunchTemplateConfigs {
			for _, o := range c.Overrides {
				out[string(o.InstanceType)] = true
			}
		}
		return out
	}
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name     string
		requests corev1.ResourceList
		want     []string
	}{
		{"CPU-only pods get no GPU or metal type", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			[]string{"c5.xlarge", "m5.xlarge", "m6i.xlarge"}},
		{"a GPU pod gets a GPU type", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), awsv1.ResourceNVIDIAGPU: resource.MustParse("1")},
			[]string{"g5.2xlarge", "g5.xlarge", "p4d.24xlarge"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := e.nodeClaim(t, instance.CapacityTypeOnDemand)
			nc.Spec.Requirements[0].Values = mixed
			nc.Spec.Resources.Requests = tc.requests
			got, err := e.cp.Create(ctx, nc)
			require.NoError(t, err)
			assert.Equal(t, tc.want, keys(fleetTypes(t)))
			assert.Contains(t, tc.want, got.Labels[corev1.LabelInstanceTypeStable], "what EC2 launched")
			cleanup(t, e, got)
		})
	}

	t.Run("truncation keeps minValues", func(t *testing.T) {
		// Every amd64 type with an on-demand offering, cheapest first: the
		// 60 cheapest have few CPU counts, so ask for more than they have.
		its, err := e.types.List(ctx, e.nodeClass)
		require.NoError(t, err)
		type priced struct {
			name  string
			cpu   string
			price float64
		}
		var all []priced
		for _, it := range its {
			if !it.Requirements.Get(corev1.LabelArchStable).Has("amd64") {
				continue
			}
			for _, o := range it.Offerings {
				if o.Available && o.Zone == zone && o.CapacityType == instance.CapacityTypeOnDemand {
					all = append(all, priced{it.Name, it.Requirements.Get(awsv1.LabelInstanceCPU).Any(), o.Price})
				}
			}
		}
		sort.Slice(all, func(i, j int) bool {
			if all[i].price != all[j].price {
				return all[i].price < all[j].price
			}
			return all[i].name < all[j].name
		})
		require.Greater(t, len(all), instance.MaxInstanceTypes)
		cheapest, every := map[string]bool{}, map[string]bool{}
		for i, p := range all {
			every[p.cpu] = true
			if i < instance.MaxInstanceTypes {
				cheapest[p.cpu] = true
			}
		}
		minValues := len(cheapest) + 3
		require.LessOrEqual(t, minValues, len(every), "the catalog has enough CPU counts")

		nc := e.nodeClaim(t, instance.CapacityTypeOnDemand)
		nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{instance.CapacityTypeOnDemand}},
			{Key: awsv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"0"}, MinValues: &minValues},
		}
		got, err := e.cp.Create(ctx, nc)
		require.NoError(t, err)
		types := fleetTypes(t)
		assert.Len(t, types, instance.MaxInstanceTypes)
		cpus := map[string]bool{}
		for _, p := range all {
			if types[p.name] {
				cpus[p.cpu] = true
			}
		}
		assert.GreaterOrEqual(t, len(cpus), minValues, "distinct CPU counts offered: %v", keys(cpus))
		cleanup(t, e, got)

		// No 60 types can offer more CPU counts than the catalog has.
		tooMany := len(every) + 1
		nc = e.nodeClaim(t, instance.CapacityTypeOnDemand)
		nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{instance.CapacityTypeOnDemand}},
			{Key: awsv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"0"}, MinValues: &tooMany},
		}
		_, err = e.cp.Create(ctx, nc)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "minValues "+strconv.Itoa(tooMany))
	})
}

// TestLaunchWithClassInterfaceSettings: a class with ipPrefixCount,
// connectionTracking and context launches on the local AWS; the fleet
// request carries the Context (unless the NodeClaim's minValues were
// relaxed) and the template the fleet names carries the interface
// settings.
func TestLaunchWithClassInterfaceSettings(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)
	e.nodeClass.Spec.IPPrefixCount = aws.Int32(1)
	e.nodeClass.Spec.ConnectionTracking = &awsv1.ConnectionTracking{UDPStreamTimeout: aws.Int32(120)}
	e.nodeClass.Spec.Context = aws.String("c-0123456789")
	require.NoError(t, kube.Update(ctx, e.nodeClass))

	nc := e.nodeClaim(t)
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	in := rec.last(t)
	assert.Equal(t, "c-0123456789", aws.ToString(in.Context))
	require.NotEmpty(t, in.LaunchTemplateConfigs)
	versions, err := ec2API.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName, Versions: []string{"$Latest"}})
	require.NoError(t, err)
	require.Len(t, versions.LaunchTemplateVersions, 1)
	data := versions.LaunchTemplateVersions[0].LaunchTemplateData
	require.Len(t, data.NetworkInterfaces, 1)
	assert.EqualValues(t, 1, aws.ToInt32(data.NetworkInterfaces[0].Ipv4PrefixCount))
	assert.EqualValues(t, 120, aws.ToInt32(data.NetworkInterfaces[0].ConnectionTrackingSpecification.UdpStreamTimeout))
	// What EC2 launched is in the class's security group.
	inst := instancesOf(t, nc.Name)
	require.Len(t, inst, 1)
	require.NotEmpty(t, inst[0].SecurityGroups)
	assert.Equal(t, e.nodeClass.Status.SecurityGroups[0].ID, aws.ToString(inst[0].SecurityGroups[0].GroupId))
	cleanup(t, e, got)

	relaxed := e.nodeClaim(t)
	relaxed.Annotations = map[string]string{v1.NodeClaimMinValuesRelaxedAnnotationKey: "true"}
	got, err = e.cp.Create(ctx, relaxed)
	require.NoError(t, err)
	assert.Nil(t, rec.last(t).Context, "relaxed minValues: no Context")
	cleanup(t, e, got)
}
