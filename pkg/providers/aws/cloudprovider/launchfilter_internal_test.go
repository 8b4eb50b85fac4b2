package cloudprovider

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

func offering(ct, zone string, price float64) scheduling.Offering {
	return scheduling.Offering{CapacityType: ct, Zone: zone, Price: price, Available: true}
}

func typeWith(name, size string, gpus int64, offerings ...scheduling.Offering) *scheduling.InstanceType {
	reqs := scheduling.Requirements{}
	r, _ := scheduling.ParseRequirement(awsv1.LabelInstanceSize, "In", []string{size}, 0)
	reqs.Add(r)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	if gpus > 0 {
		capacity[awsv1.ResourceNVIDIAGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &scheduling.InstanceType{Name: name, Requirements: reqs, Capacity: capacity, Offerings: offerings}
}

func names(its []*scheduling.InstanceType) []string {
	var out []string
	for _, it := range its {
		out = append(out, it.Name)
	}
	sort.Strings(out)
	return out
}

func capacityTypes(t *testing.T, minValues int, cts ...string) scheduling.Requirements {
	t.Helper()
	reqs := scheduling.Requirements{}
	r, err := scheduling.ParseRequirement(scheduling.LabelCapacityType, "In", cts, 0)
	require.NoError(t, err)
	reqs.Add(r)
	if minValues > 0 {
		r, err = scheduling.ParseRequirement(scheduling.LabelInstanceType, "Exists", nil, minValues)
		require.NoError(t, err)
		reqs.Add(r)
	}
	return reqs
}

func TestFilterLaunchTypes(t *testing.T) {
	m5 := typeWith("m5.xlarge", "xlarge", 0, offering("on-demand", "a", 0.192), offering("spot", "a", 0.08))
	c5 := typeWith("c5.xlarge", "xlarge", 0, offering("on-demand", "a", 0.17), offering("spot", "a", 0.25))
	r5 := typeWith("r5.xlarge", "xlarge", 0, offering("spot", "a", 0.30), offering("spot", "b", 0.10))
	g5 := typeWith("g5.xlarge", "xlarge", 1, offering("on-demand", "a", 1.006), offering("spot", "a", 0.05))
	metal := typeWith("m5.metal", "metal", 0, offering("on-demand", "a", 4.6), offering("spot", "a", 0.04))
	spotAndOD := []string{"spot", "on-demand"}
	for _, tc := range []struct {
		name      string
		its       []*scheduling.InstanceType
		reqs      scheduling.Requirements
		want      []string
		wantZones map[string][]string // the offerings kept, per type, as capacityType/zone
	}{
		{"accelerator and metal types go when others fit", []*scheduling.InstanceType{m5, g5, metal}, capacityTypes(t, 0, "on-demand"),
			[]string{"m5.xlarge"}, nil},
		{"they stay when nothing else fits", []*scheduling.InstanceType{g5, metal}, capacityTypes(t, 0, "on-demand"),
			[]string{"g5.xlarge", "m5.metal"}, nil},
		{"minValues skips the filters", []*scheduling.InstanceType{m5, g5}, capacityTypes(t, 2, "spot", "on-demand"),
			[]string{"g5.xlarge", "m5.xlarge"}, nil},
		{"spot dearer than the cheapest on-demand goes, offering by offering", []*scheduling.InstanceType{m5, c5, r5}, capacityTypes(t, 0, spotAndOD...),
			[]string{"c5.xlarge", "m5.xlarge", "r5.xlarge"}, map[string][]string{
				"m5.xlarge": {"on-demand/a", "spot/a"}, "c5.xlarge": {"on-demand/a"}, "r5.xlarge": {"spot/b"}}},
		{"spot-only NodeClaims keep every spot offering", []*scheduling.InstanceType{c5, r5}, capacityTypes(t, 0, "spot"),
			[]string{"c5.xlarge", "r5.xlarge"}, map[string][]string{
				"c5.xlarge": {"on-demand/a", "spot/a"}, "r5.xlarge": {"spot/a", "spot/b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := filterLaunchTypes(tc.its, tc.reqs)
			assert.Equal(t, tc.want, names(got))
			for _, it := range got {
				want, ok := tc.wantZones[it.Name]
				if !ok {
					continue
				}
				var have []string
				for _, o := range it.Offerings {
					have = append(have, o.CapacityType+"/"+o.Zone)
				}
				sort.Strings(have)
				assert.Equal(t, want, have, it.Name)
			}
		})
	}
	// The filters copy what they change: the catalog's types keep their
	// offerings.
	assert.Len(t, c5.Offerings, 2)
	assert.Len(t, r5.Offerings, 2)
}

func TestTruncateTypes(t *testing.T) {
	size := func(name, s string, price float64) *scheduling.InstanceType {
		return typeWith(name, s, 0, offering("on-demand", "a", price))
	}
	its := []*scheduling.InstanceType{
		size("a", "large", 1), size("b", "large", 2), size("c", "large", 3),
		size("d", "xlarge", 4), size("e", "2xlarge", 5), size("f", "4xlarge", 6),
		typeWith("s", "large", 0, offering("spot", "a", 0.1)),
	}
	sizes := func(t *testing.T, min int) scheduling.Requirements {
		reqs := capacityTypes(t, 0, "on-demand")
		r, err := scheduling.ParseRequirement(awsv1.LabelInstanceSize, "Exists", nil, min)
		require.NoError(t, err)
		reqs.Add(r)
		return reqs
	}
	for _, tc := range []struct {
		name    string
		reqs    scheduling.Requirements
		limit   int
		want    []string
		wantErr bool
	}{
		{"under the limit: every type of the capacity type", capacityTypes(t, 0, "on-demand"), 10, []string{"a", "b", "c", "d", "e", "f"}, false},
		{"the cheapest", capacityTypes(t, 0, "on-demand"), 3, []string{"a", "b", "c"}, false},
		{"minValues reach past the cheapest", sizes(t, 3), 3, []string{"a", "d", "e"}, false},
		{"minValues first, then the cheapest", sizes(t, 2), 3, []string{"a", "b", "d"}, false},
		{"no choice meets them", sizes(t, 4), 3, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := truncateTypes(its, tc.reqs, "on-demand", tc.limit)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, names(got))
		})
	}
}
