package workload

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// The published fingerprints and request totals of the canonical stream
// (shared/bench/scheduling-workload.md, section 3).
var published = []struct {
	name   string
	sha256 string
	cpu    string // cores, one decimal
	memGiB string // GiB, one decimal
}{
	{"Scheduling1", "3afa38896a481b1c08883004c48163dc854f7932c8318b689897bf006332183f", "0.5", "0.5"},
	{"Scheduling50", "4a8842ffff6ed5f064250f53342242b0f38bb89be6c999a840afe5f43477c217", "34.8", "68.9"},
	{"Scheduling100", "2d0c8759ecd3a81a8a41bbb6240424275c3cc41f4a73a3b150e2c85b857e598e", "63.4", "126.3"},
	{"Scheduling500", "791066a68c2b53dddfdf70643a5e24e4bf85215de934d3dc14da3d0e65fee392", "320.8", "709.5"},
	{"Scheduling1000", "a41339f9bc7b2d5b8567a50d9d0bd2147cd44a92bf6750364cd4c1e124286ec7", "686.3", "1272.6"},
	{"Scheduling2000", "41a261d91cb99e3858b8fab32830575fed9e78f9406d6c64beefd51e85905c8a", "1303.2", "2612.4"},
	{"Scheduling5000", "d8f76f90360bcd7501d42e632523009e8033910bcb02741d5e0be862b56376ee", "3332.2", "6507.8"},
	{"Scheduling10000", "46e5a91ec2e051b580e0a6274bac353ab26d854c15368b335bb5eb092828b929", "6712.1", "12950.1"},
	{"Scheduling20000", "c1c720fb49535eba448a73476c6b8ee1b7b50c9c207f42b1c7772c0a7db7a685", "13443.7", "26179.2"},
	{"RespectPreferences", "403d829e00be4fcfa18dfc0a118751ecc2b1efc5243b414c24bab5b73a6fe8c5", "6000.0", "390.6"},
	{"IgnorePreferences", "55393cff66afa32b86224c117f5f76d8f38e30b1bc54d7970cb908792bd6f0bd", "2000.0", "1000.0"},
}

func TestCasesMatchPublishedFingerprints(t *testing.T) {
	cases := Cases()
	require.Len(t, cases, len(published))
	for i, want := range published {
		c := cases[i]
		t.Run(want.name, func(t *testing.T) {
			assert.Equal(t, want.name, c.Name)
			assert.Len(t, c.Pods, c.PodCount)
			// The hash of the pods themselves, not only of the draws.
			assert.Equal(t, want.sha256, Fingerprint(c.Pods))
			assert.Equal(t, want.sha256, FingerprintRecords(c.Records))

			d := TotalDemand(c.Pods)
			assert.Equal(t, want.cpu, fmt.Sprintf("%.1f", d[corev1.ResourceCPU]))
			assert.Equal(t, want.memGiB, fmt.Sprintf("%.1f", d[corev1.ResourceMemory]/(1<<30)))
			assert.Equal(t, float64(c.PodCount), d[corev1.ResourcePods])
		})
	}
}

func TestCaseByNameMatchesFullStream(t *testing.T) {
	for _, name := range []string{"Scheduling1", "Scheduling500", "RespectPreferences", "IgnorePreferences"} {
		t.Run(name, func(t *testing.T) {
			c, err := CaseByName(name)
			require.NoError(t, err)
			for _, want := range published {
				if want.name == name {
					assert.Equal(t, want.sha256, Fingerprint(c.Pods))
				}
			}
		})
	}
	_, err := CaseByName("Scheduling7")
	assert.Error(t, err)
}

func TestPreferenceStreamDraws(t *testing.T) {
	c, err := CaseByName("RespectPreferences")
	require.NoError(t, err)
	assert.False(t, c.IgnorePreferences)
	assert.Equal(t, Record{Group: Preference, CPUMilli: 1500, MemMi: 100}, c.Records[0])
	c, err = CaseByName("IgnorePreferences")
	require.NoError(t, err)
	assert.True(t, c.IgnorePreferences)
	assert.Equal(t, Record{Group: Preference, CPUMilli: 500, MemMi: 256}, c.Records[3999])
}

func TestDiverseGroupLayout(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want map[Group]int
	}{
		{1, map[Group]int{Generic: 1}},
		{4, map[Group]int{Generic: 4}},
		{7, map[Group]int{Generic: 3, SpreadZone: 1, SpreadHostname: 1, AffinityZone: 1, AntiHostname: 1}},
		{50, map[Group]int{Generic: 10, SpreadZone: 10, SpreadHostname: 10, AffinityZone: 10, AntiHostname: 10}},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			recs := NewStream().DiverseRecords(tc.n)
			got := map[Group]int{}
			for _, r := range recs {
				got[r.Group]++
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBuildPodShapes(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 678, time.UTC)
	s := NewStream()
	s.Now = func() time.Time { return now }
	s.UIDSource = bytes.NewReader(bytes.Repeat([]byte{7}, 16*6))
	recs := []Record{
		{Group: Generic, CPUMilli: 100, MemMi: 256, Label: "a"},
		{Group: SpreadZone, CPUMilli: 250, MemMi: 512, Label: "b", Selector: "c"},
		{Group: SpreadHostname, CPUMilli: 500, MemMi: 1024, Label: "d", Selector: "e"},
		{Group: AffinityZone, CPUMilli: 1000, MemMi: 2048, Label: "f"},
		{Group: AntiHostname, CPUMilli: 1500, MemMi: 4096},
		{Group: Preference, CPUMilli: 1500, MemMi: 100},
	}
	pods := s.Build(recs)
	for i, p := range pods {
		t.Run(string(recs[i].Group), func(t *testing.T) {
			assert.Equal(t, recs[i], Describe(p), "pod must round-trip to its record")
			assert.Equal(t, Namespace, p.Namespace)
			assert.Equal(t, ClusterValue, p.Labels[ClusterLabel])
			assert.Equal(t, now.Truncate(time.Second), p.CreationTimestamp.Time)
			assert.Len(t, string(p.UID), 36)
			assert.Equal(t, byte('4'), string(p.UID)[14], "v4 UID")
			assert.NotEmpty(t, p.Name)
			require.Len(t, p.Spec.Containers, 1)
			assert.Empty(t, p.Spec.Containers[0].Resources.Limits)
			assert.Empty(t, p.Spec.NodeSelector)
			assert.Empty(t, p.Spec.Tolerations)
			assert.Empty(t, p.Status.Phase)
		})
	}

	zone := pods[1].Spec.TopologySpreadConstraints[0]
	assert.Equal(t, int32(1), zone.MaxSkew)
	assert.Equal(t, ZoneKey, zone.TopologyKey)
	assert.Equal(t, corev1.DoNotSchedule, zone.WhenUnsatisfiable)
	assert.Equal(t, map[string]string{MyLabel: "c"}, zone.LabelSelector.MatchLabels)
	assert.Equal(t, "b", pods[1].Labels[MyLabel])

	aff := pods[3].Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, aff, 1)
	assert.Equal(t, ZoneKey, aff[0].TopologyKey)
	assert.Equal(t, map[string]string{MyAffinityLabel: "f"}, aff[0].LabelSelector.MatchLabels)

	anti := pods[4].Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, anti, 1)
	assert.Equal(t, HostnameKey, anti[0].TopologyKey)
	assert.Equal(t, AppValue, pods[4].Labels[AppLabel])

	pref := pods[5].Spec.Affinity
	require.Len(t, pref.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	na := pref.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0]
	assert.Equal(t, int32(1), na.Weight)
	assert.Equal(t, []string{"test-zone-1"}, na.Preference.MatchExpressions[0].Values)
	pa := pref.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	require.Len(t, pa, 2)
	assert.Equal(t, int32(10), pa[0].Weight)
	assert.Equal(t, ZoneKey, pa[0].PodAffinityTerm.TopologyKey)
	assert.Equal(t, int32(1), pa[1].Weight)
	assert.Equal(t, HostnameKey, pa[1].PodAffinityTerm.TopologyKey)
}

// UIDs must not come from the seeded stream: building pods or not must leave
// later draws unchanged.
func TestBuildDoesNotConsumeStream(t *testing.T) {
	a, b := NewStream(), NewStream()
	a.Build(a.DiverseRecords(100))
	b.DiverseRecords(100)
	assert.Equal(t, b.DiverseRecords(50), a.DiverseRecords(50))
}
