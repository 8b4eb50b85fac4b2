package workload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCatalogue(t *testing.T) {
	cat := Catalogue()
	require.Len(t, cat, CatalogueSize)
	for _, tc := range []struct {
		k               int
		name            string
		allocCPU        string
		allocMem        string
		pods            int64
		size            string
		specialOperator corev1.NodeSelectorOperator
	}{
		{1, "fake-it-0", "900m", "2038Mi", 10, SizeSmall, corev1.NodeSelectorOpDoesNotExist},
		{4, "fake-it-3", "3900m", "8182Mi", 40, SizeSmall, corev1.NodeSelectorOpDoesNotExist},
		{5, "fake-it-4", "4900m", "10230Mi", 50, SizeLarge, corev1.NodeSelectorOpIn},
		{400, "fake-it-399", "399900m", "819190Mi", 4000, SizeLarge, corev1.NodeSelectorOpIn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := cat[tc.k-1]
			assert.Equal(t, tc.name, it.Name)
			assert.Equal(t, tc.k, it.K)
			alloc := it.Allocatable()
			assert.Zero(t, alloc.Cpu().Cmp(resource.MustParse(tc.allocCPU)), alloc.Cpu().String())
			assert.Zero(t, alloc.Memory().Cmp(resource.MustParse(tc.allocMem)), alloc.Memory().String())
			assert.Equal(t, tc.pods, alloc.Pods().Value())

			require.Len(t, it.Offerings, 5)
			zones := map[string][]string{}
			for _, o := range it.Offerings {
				assert.True(t, o.Available)
				assert.InDelta(t, 0.3147483648*float64(tc.k), o.Price, 1e-9)
				zones[o.CapacityType] = append(zones[o.CapacityType], o.Zone)
			}
			assert.Equal(t, []string{"test-zone-1", "test-zone-2"}, zones[CapacitySpot])
			assert.Equal(t, Zones, zones[CapacityOnDemand])

			req := map[string]corev1.NodeSelectorRequirement{}
			for _, r := range it.Requirements {
				req[r.Key] = r
			}
			assert.Equal(t, []string{tc.name}, req[corev1.LabelInstanceTypeStable].Values)
			assert.Equal(t, []string{"amd64"}, req[corev1.LabelArchStable].Values)
			assert.Equal(t, []string{"darwin", "linux", "windows"}, req[corev1.LabelOSStable].Values)
			assert.Equal(t, Zones, req[corev1.LabelTopologyZone].Values)
			assert.Equal(t, []string{CapacitySpot, CapacityOnDemand}, req[CapacityTypeKey].Values)
			assert.Equal(t, []string{tc.size}, req[SizeLabel].Values)
			assert.Equal(t, tc.specialOperator, req[SpecialLabel].Operator)
		})
	}
}
