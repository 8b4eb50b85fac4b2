package kwok

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// The committed JSON must be exactly what the generator produces, so that
// nobody edits one without the other.
func TestBuiltInCatalogsMatchGenerator(t *testing.T) {
	for name, entries := range map[string][]CatalogEntry{
		CatalogDefault:      DefaultCatalog(),
		CatalogUpstreamKWOK: UpstreamKWOKCatalog(),
	} {
		t.Run(name, func(t *testing.T) {
			want, err := MarshalCatalog(entries)
			require.NoError(t, err)
			got, err := catalogFS.ReadFile(catalogFiles[name])
			require.NoError(t, err)
			assert.True(t, string(want) == string(got), "catalogs/%s.json is stale: run go run ./pkg/providers/kwok/gen", name)
		})
	}
}

func loadCatalog(t *testing.T, name string) map[string]*cloudprovider.InstanceType {
	t.Helper()
	its, err := LoadCatalog(name)
	require.NoError(t, err)
	out := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}

func label(it *cloudprovider.InstanceType, key string) string {
	r := it.Requirements.Get(key)
	if r.Operator() != scheduling.OpIn || len(r.Values()) != 1 {
		return ""
	}
	return r.Values()[0]
}

func TestDefaultCatalog(t *testing.T) {
	its := loadCatalog(t, CatalogDefault)

	type archRange struct{ minCPU, maxCPU int64 }
	ranges := map[string]*archRange{}
	families := map[string]map[string]bool{} // arch -> categories
	for _, it := range its {
		arch := label(it, corev1.LabelArchStable)
		require.NotEmpty(t, arch, it.Name)
		// Every type is offered in every zone as spot and on-demand.
		seen := map[string]bool{}
		for _, o := range it.Offerings {
			seen[o.Zone+"/"+o.CapacityType] = o.Available
		}
		for _, z := range Zones {
			for _, ct := range []string{"spot", "on-demand"} {
				assert.True(t, seen[z+"/"+ct], "%s lacks %s/%s", it.Name, z, ct)
			}
		}
		for _, k := range []string{
			awsv1.LabelInstanceCategory, awsv1.LabelInstanceFamily, awsv1.LabelInstanceGeneration,
			awsv1.LabelInstanceSize, awsv1.LabelInstanceCPU, awsv1.LabelInstanceMemory, kwokv1alpha1.LabelInstanceFamily,
		} {
			assert.NotEmpty(t, label(it, k), "%s lacks %s", it.Name, k)
		}
		cat := label(it, awsv1.LabelInstanceCategory)
		if cat == "c" || cat == "m" || cat == "r" {
			if families[arch] == nil {
				families[arch] = map[string]bool{}
			}
			families[arch][cat] = true
			cpu := it.Capacity.Cpu().Value()
			if ranges[arch] == nil {
				ranges[arch] = &archRange{cpu, cpu}
			}
			ranges[arch].minCPU = min(ranges[arch].minCPU, cpu)
			ranges[arch].maxCPU = max(ranges[arch].maxCPU, cpu)
			assert.Equal(t, scheduling.OpDoesNotExist, it.Requirements.Get(awsv1.LabelInstanceGPUName).Operator(),
				"%s: plain types must not satisfy a GPU requirement", it.Name)
		}
		// allocatable stays positive and below capacity
		alloc := cloudprovider.Allocatable(it)
		assert.True(t, alloc.Cpu().Sign() > 0 && alloc.Cpu().Cmp(*it.Capacity.Cpu()) < 0, it.Name)
		assert.True(t, alloc.Memory().Sign() > 0 && alloc.Memory().Cmp(*it.Capacity.Memory()) < 0, it.Name)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		assert.Equal(t, map[string]bool{"c": true, "m": true, "r": true}, families[arch], arch)
		require.NotNil(t, ranges[arch], arch)
		assert.Equal(t, int64(1), ranges[arch].minCPU, arch)
		assert.Equal(t, int64(192), ranges[arch].maxCPU, arch)
	}

	accel := []struct {
		name     string
		resource corev1.ResourceName
		key      string
		value    string
	}{
		{"g5.xlarge", awsv1.ResourceNVIDIAGPU, awsv1.LabelInstanceGPUManufacturer, "nvidia"},
		{"g6.xlarge", awsv1.ResourceNVIDIAGPU, awsv1.LabelInstanceGPUName, "l4"},
		{"g5g.xlarge", awsv1.ResourceNVIDIAGPU, corev1.LabelArchStable, "arm64"},
		{"g4ad.xlarge", awsv1.ResourceAMDGPU, awsv1.LabelInstanceGPUManufacturer, "amd"},
		{"inf2.xlarge", awsv1.ResourceAWSNeuron, awsv1.LabelInstanceAcceleratorName, "inferentia"},
		{"trn1.2xlarge", awsv1.ResourceAWSNeuron, awsv1.LabelInstanceAcceleratorName, "trainium"},
	}
	for _, a := range accel {
		it := its[a.name]
		require.NotNil(t, it, a.name)
		q := it.Capacity[a.resource]
		assert.True(t, q.Value() >= 1, "%s has %s", a.name, a.resource)
		assert.Equal(t, a.value, label(it, a.key), a.name)
	}
	assert.Equal(t, "4", label(its["g5.12xlarge"], awsv1.LabelInstanceGPUCount))
	assert.Equal(t, "24576", label(its["g5.xlarge"], awsv1.LabelInstanceGPUMemory))
	assert.Equal(t, scheduling.OpDoesNotExist, its["inf2.xlarge"].Requirements.Get(awsv1.LabelInstanceGPUName).Operator())
}

// The AWS example NodePools select on instance-category/-generation and, for
// min-values-family, need five amd64 c/m/r families.
func TestDefaultCatalogServesAWSExamples(t *testing.T) {
	its := loadCatalog(t, CatalogDefault)
	mv := 5
	pool, err := scheduling.RequirementsFromMinValues([]scheduling.RequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: "In", Values: []string{"amd64"}},
		{Key: corev1.LabelOSStable, Operator: "In", Values: []string{"linux"}},
		{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"spot"}},
		{Key: awsv1.LabelInstanceCategory, Operator: "In", Values: []string{"c", "m", "r"}},
		{Key: awsv1.LabelInstanceGeneration, Operator: "Gt", Values: []string{"2"}},
		{Key: awsv1.LabelInstanceFamily, Operator: "Exists", MinValues: &mv},
	})
	require.NoError(t, err)
	fams := map[string]bool{}
	for _, it := range its {
		if pool.Intersects(it.Requirements) == nil {
			fams[label(it, awsv1.LabelInstanceFamily)] = true
		}
	}
	assert.GreaterOrEqual(t, len(fams), 5, "families: %v", fams)

	large, err := scheduling.RequirementsFromNodeSelector([]corev1.NodeSelectorRequirement{
		{Key: awsv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"3"}},
		{Key: awsv1.LabelInstanceMemory, Operator: corev1.NodeSelectorOpGt, Values: []string{"8191"}},
	})
	require.NoError(t, err)
	assert.NoError(t, large.Intersects(its["m7a.xlarge"].Requirements))
	assert.Error(t, large.Intersects(its["m7a.large"].Requirements))
}

func TestDefaultCatalogPrices(t *testing.T) {
	its := loadCatalog(t, CatalogDefault)
	tests := []struct {
		name string
		want float64 // on-demand
	}{
		{"c7i.large", BasePrice(2, 4<<30) * 1.0},
		{"m7a.xlarge", BasePrice(4, 16<<30) * 0.9},
		{"r7g.medium", BasePrice(1, 8<<30) * 0.8},
		{"c8g.48xlarge", BasePrice(192, 384<<30) * 0.8 * 1.0625},
		{"g5.12xlarge", BasePrice(48, 192<<30)*0.9 + 4*0.80},
		{"trn1.2xlarge", BasePrice(8, 32<<30)*1.0 + 0.95},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := its[tt.name]
			require.NotNil(t, it)
			for _, o := range it.Offerings {
				want := tt.want
				if o.CapacityType == "spot" {
					want *= SpotDiscount
				}
				assert.InDelta(t, want, o.Price, 1e-12, "%s %s", o.Zone, o.CapacityType)
			}
		})
	}
}

func TestUpstreamKWOKCatalog(t *testing.T) {
	its := loadCatalog(t, CatalogUpstreamKWOK)
	require.Len(t, its, 144)

	// Upstream's own generated values for its smallest type.
	c1 := its["c-1x-amd64-linux"]
	require.NotNil(t, c1)
	for _, o := range c1.Offerings {
		if o.CapacityType == "spot" {
			assert.Equal(t, 0.019003238553599998, o.Price)
		} else {
			assert.Equal(t, 0.027147483648, o.Price)
		}
	}
	assert.Equal(t, "1", label(c1, kwokv1alpha1.LabelInstanceSize))
	assert.Equal(t, "c", label(c1, kwokv1alpha1.LabelInstanceFamily))
	assert.Equal(t, "1", label(c1, kwokv1alpha1.LabelInstanceCPU))
	assert.Equal(t, "2Gi", label(c1, kwokv1alpha1.LabelInstanceMemory))
	assert.True(t, c1.Overhead.Cpu().Equal(resource.MustParse("100m")))
	assert.True(t, c1.Overhead.Memory().Equal(resource.MustParse("10Mi")))

	for _, cpu := range []int64{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256} {
		for fam, factor := range map[string]int64{"c": 2, "s": 4, "m": 8} {
			for _, os := range []string{"linux", "windows"} {
				for _, arch := range []string{"amd64", "arm64"} {
					name := fmt.Sprintf("%s-%dx-%s-%s", fam, cpu, arch, os)
					it := its[name]
					require.NotNil(t, it, name)
					assert.Equal(t, cpu, it.Capacity.Cpu().Value(), name)
					assert.Equal(t, cpu*factor<<30, it.Capacity.Memory().Value(), name)
					assert.Equal(t, min(16*cpu, 1024), it.Capacity.Pods().Value(), name)
					assert.Equal(t, os, label(it, corev1.LabelOSStable))
					assert.Equal(t, arch, label(it, corev1.LabelArchStable))
					od := 0.025*float64(cpu) + 0.001*float64(cpu*factor<<30)/1e9
					require.Len(t, it.Offerings, 8)
					for _, o := range it.Offerings {
						want := od
						if o.CapacityType == "spot" {
							want = od * 0.7
						}
						assert.Equal(t, want, o.Price, "%s %s", name, o.CapacityType)
						assert.True(t, o.Available)
					}
				}
			}
		}
	}
}

func TestParseCatalog(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		wantErr string
		check   func(t *testing.T, its []*cloudprovider.InstanceType)
	}{
		{
			name: "defaults",
			json: `[{"name":"x-2","architecture":"amd64","resources":{"cpu":"2","memory":"4Gi"},"offerings":[{"zone":"z1","capacityType":"spot","price":0.1}]}]`,
			check: func(t *testing.T, its []*cloudprovider.InstanceType) {
				it := its[0]
				assert.True(t, it.Capacity.Pods().Equal(resource.MustParse("110")))
				assert.True(t, it.Offerings[0].Available)
				assert.Equal(t, "linux", label(it, corev1.LabelOSStable))
				assert.Equal(t, "x", label(it, kwokv1alpha1.LabelInstanceFamily))
				assert.Equal(t, "2", label(it, kwokv1alpha1.LabelInstanceSize))
				assert.Equal(t, "z1", label(it, corev1.LabelTopologyZone))
			},
		},
		{
			name: "upstream formats: capitalised fields and offering requirements",
			json: `[{"name":"m5.large","architecture":"amd64","operatingSystems":["linux"],"resources":{"cpu":"2","memory":"8Gi","pods":"29"},
				"offerings":[
				  {"Price":0.05,"Available":true,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},{"key":"topology.kubernetes.io/zone","operator":"In","values":["z1"]}]},
				  {"CapacityType":"on-demand","Zone":"z2","Price":0.09,"Available":false}]}]`,
			check: func(t *testing.T, its []*cloudprovider.InstanceType) {
				it := its[0]
				require.Len(t, it.Offerings, 2)
				assert.Equal(t, "z1", it.Offerings[0].Zone)
				assert.Equal(t, "spot", it.Offerings[0].CapacityType)
				assert.Empty(t, it.Offerings[0].Requirements)
				assert.Equal(t, "z2", it.Offerings[1].Zone)
				assert.False(t, it.Offerings[1].Available)
				assert.Equal(t, "large", label(it, kwokv1alpha1.LabelInstanceSize))
				assert.Equal(t, "m5", label(it, kwokv1alpha1.LabelInstanceFamily))
				assert.Equal(t, []string{"z1", "z2"}, it.Requirements.Get(corev1.LabelTopologyZone).Values())
			},
		},
		{
			name: "reserved offering",
			json: `[{"name":"r","architecture":"arm64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"zone":"z","capacityType":"reserved","price":0,"reservationID":"cr-1","reservationCapacity":2}]}]`,
			check: func(t *testing.T, its []*cloudprovider.InstanceType) {
				assert.Equal(t, "cr-1", its[0].Offerings[0].ReservationID)
				assert.Equal(t, 2, its[0].Offerings[0].ReservationCapacity)
			},
		},
		{name: "not json", json: `{`, wantErr: "decoding catalog"},
		{name: "no name", json: `[{"architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"zone":"z","capacityType":"spot"}]}]`, wantErr: "name is required"},
		{name: "no memory", json: `[{"name":"a","architecture":"amd64","resources":{"cpu":"1"},"offerings":[{"zone":"z","capacityType":"spot"}]}]`, wantErr: "cpu and memory"},
		{name: "no offerings", json: `[{"name":"a","architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"}}]`, wantErr: "at least one offering"},
		{name: "no zone", json: `[{"name":"a","architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"capacityType":"spot"}]}]`, wantErr: "zone is required"},
		{name: "reserved without id", json: `[{"name":"a","architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"zone":"z","capacityType":"reserved"}]}]`, wantErr: "reservationID"},
		{
			name:    "duplicate",
			json:    `[{"name":"a","architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"zone":"z","capacityType":"spot"}]},{"name":"a","architecture":"amd64","resources":{"cpu":"1","memory":"1Gi"},"offerings":[{"zone":"z","capacityType":"spot"}]}]`,
			wantErr: "duplicate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its, err := ParseCatalog([]byte(tt.json))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, its)
		})
	}

	_, err := LoadCatalog("nope")
	assert.Error(t, err)
}

func TestAWSOverhead(t *testing.T) {
	tests := []struct {
		cpu, pods int64
		wantCPU   string
		wantMem   string
	}{
		{1, 8, "60m", "443Mi"},
		{2, 29, "70m", "674Mi"},
		{4, 58, "80m", "993Mi"},
		{8, 58, "90m", "993Mi"},
		{192, 737, "550m", strconv.Itoa(11*737+355) + "Mi"},
	}
	for _, tt := range tests {
		got := awsOverhead(tt.cpu, tt.pods)
		assert.True(t, got.Cpu().Equal(resource.MustParse(tt.wantCPU)), "cpu %d: got %s", tt.cpu, got.Cpu())
		assert.True(t, got.Memory().Equal(resource.MustParse(tt.wantMem)), "cpu %d: got %s", tt.cpu, got.Memory())
	}
	assert.False(t, math.IsNaN(BasePrice(1, 1)))
}
