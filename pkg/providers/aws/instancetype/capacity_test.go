package instancetype

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

func corevName(s string) corev1.ResourceName { return corev1.ResourceName(s) }

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

// TestCapacityBeyondVectors covers the rules the vectors do not exercise:
// RESERVED_ENIS, EFA-only interfaces, multi-card types, Windows, Custom,
// Bottlerocket's data volume, eviction edge cases and accelerators other
// than the vectors' types. Expected values are worked from the formulas in
// capacity-vectors.md.
func TestCapacityBeyondVectors(t *testing.T) {
	infos := loadInfos(t)
	efaOnly := func(nc *awsv1.EC2NodeClass) *awsv1.EC2NodeClass {
		nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}
		return nc
	}
	bdm := func(nc *awsv1.EC2NodeClass, devs ...string) *awsv1.EC2NodeClass {
		for i := 0; i+1 < len(devs); i += 2 {
			dev, size := devs[i], resource.MustParse(devs[i+1])
			nc.Spec.BlockDeviceMappings = append(nc.Spec.BlockDeviceMappings, &awsv1.BlockDeviceMapping{
				DeviceName: &dev, EBS: &awsv1.BlockDevice{VolumeSize: &size},
			})
		}
		return nc
	}
	custom := func() *awsv1.EC2NodeClass {
		nc := nodeClass("", nil)
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-123"}}
		fam := awsv1.AMIFamilyCustom
		nc.Spec.AMIFamily = &fam
		return nc
	}
	cases := []struct {
		name     string
		typ      string
		nc       *awsv1.EC2NodeClass
		settings Settings
		want     map[string]map[corev1.ResourceName]string // list -> resource -> value
	}{
		{
			// 3 ENIs - 1 reserved = 2 × 9 + 2; kube-reserved memory keeps
			// the unreserved 29 pods (AL2023).
			name: "reserved ENIs", typ: "m5.large", nc: nodeClass("al2023@latest", nil),
			settings: Settings{VMMemoryOverheadPercent: 0.075, ReservedENIs: 1},
			want: map[string]map[corev1.ResourceName]string{
				"capacity":     {corev1.ResourcePods: "20"},
				"kubeReserved": {corev1.ResourceMemory: "574Mi"},
			},
		},
		{
			name: "reserved ENIs exhaust the card", typ: "m5.large", nc: nodeClass("al2023@latest", nil),
			settings: Settings{VMMemoryOverheadPercent: 0.075, ReservedENIs: 3},
			want:     map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourcePods: "0"}},
		},
		{
			// Only card 0's EFA-only interface takes a pod-IP slot; EFA
			// count is the EFA-only interfaces the class lays out.
			name: "EFA-only interfaces", typ: "p4d.24xlarge", nc: efaOnly(nodeClass("al2023@latest", nil)),
			settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {corev1.ResourcePods: "688", awsv1.ResourceEFA: "2", awsv1.ResourceNVIDIAGPU: "8"},
			},
		},
		{
			// Four cards of 15 ENIs: the CNI uses card 0 only.
			name: "multi-card type", typ: "p4d.24xlarge", nc: nodeClass("al2023@latest", nil), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {corev1.ResourcePods: "737", awsv1.ResourceEFA: "4", awsv1.ResourceAWSPodENI: "62"},
			},
		},
		{
			name: "neuron cores", typ: "trn1.32xlarge", nc: nodeClass("al2023@latest", nil), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {awsv1.ResourceAWSNeuron: "16", awsv1.ResourceAWSNeuronCore: "32", awsv1.ResourceEFA: "8"},
			},
		},
		{
			name: "habana", typ: "dl1.24xlarge", nc: nodeClass("al2023@latest", nil), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {awsv1.ResourceHabanaGaudi: "8", awsv1.ResourceNVIDIAGPU: "0"},
			},
		},
		{
			name: "amd", typ: "g4ad.xlarge", nc: nodeClass("al2023@latest", nil), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{"capacity": {awsv1.ResourceAMDGPU: "1"}},
		},
		{
			// Windows: no ENI-limited density (110), 50Gi /dev/sda1, pod
			// IPs advertised, kube-reserved memory from the real pods.
			name: "windows", typ: "m5.large", nc: nodeClass("windows2022@latest", nil), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {
					corev1.ResourcePods: "110", corev1.ResourceEphemeralStorage: "50Gi",
					awsv1.ResourcePrivateIPv4Address: "9",
				},
				"kubeReserved": {corev1.ResourceMemory: "1465Mi"},
				"eviction":     {corev1.ResourceEphemeralStorage: "5368709120"},
			},
		},
		{
			// Custom: the last mapping is the data volume.
			name: "custom last mapping", typ: "m5.large", nc: bdm(custom(), "/dev/xvda", "30Gi", "/dev/xvdz", "80Gi"),
			settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"capacity": {corev1.ResourceEphemeralStorage: "80Gi", corev1.ResourcePods: "29"},
			},
		},
		{
			name: "custom without mappings", typ: "m5.large", nc: custom(), settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourceEphemeralStorage: "20Gi"}},
		},
		{
			// Bottlerocket's kubelet lives on /dev/xvdb; /dev/xvda is the OS.
			name: "bottlerocket data volume", typ: "m5.large",
			nc:       bdm(nodeClass("bottlerocket@latest", nil), "/dev/xvda", "10Gi", "/dev/xvdb", "60Gi"),
			settings: DefaultSettings(),
			want:     map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourceEphemeralStorage: "60Gi"}},
		},
		{
			// AL2023 with a non-root mapping on its device.
			name: "al2023 device mapping", typ: "m5.large", nc: bdm(nodeClass("al2023@latest", nil), "/dev/xvda", "40Gi"),
			settings: DefaultSettings(),
			want:     map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourceEphemeralStorage: "40Gi"}},
		},
		{
			// 100% disables the threshold; a plain quantity is used as given;
			// evictionSoft never lowers allocatable.
			name: "eviction edge cases", typ: "m5.large",
			nc: nodeClass("al2023@latest", kubelet(`{"evictionHard": {"memory.available": "100%", "nodefs.available": "3Gi"},
				"evictionSoft": {"memory.available": "50%", "nodefs.available": "50%"}}`)),
			settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"eviction": {corev1.ResourceMemory: "0", corev1.ResourceEphemeralStorage: "3Gi"},
			},
		},
		{
			// maxPods and podsPerCore together: the smaller wins.
			name: "maxPods capped by podsPerCore", typ: "m5.xlarge",
			nc:       nodeClass("al2023@latest", kubelet(`{"maxPods": 30, "podsPerCore": 5}`)),
			settings: DefaultSettings(),
			want:     map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourcePods: "20"}},
		},
		{
			// kubeReserved replaces only the keys it names.
			name: "kubeReserved memory override", typ: "m5.large",
			nc:       nodeClass("al2023@latest", kubelet(`{"kubeReserved": {"memory": "1Gi"}}`)),
			settings: DefaultSettings(),
			want: map[string]map[corev1.ResourceName]string{
				"kubeReserved": {corev1.ResourceMemory: "1Gi", corev1.ResourceCPU: "70m"},
			},
		},
		{
			name: "no VM overhead", typ: "m5.large", nc: nodeClass("al2023@latest", nil),
			settings: Settings{VMMemoryOverheadPercent: 0},
			want:     map[string]map[corev1.ResourceName]string{"capacity": {corev1.ResourceMemory: "8Gi"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Compute(infos[c.typ], c.nc, c.settings)
			if err != nil {
				t.Fatal(err)
			}
			lists := map[string]corev1.ResourceList{
				"capacity": res.Capacity, "kubeReserved": res.KubeReserved, "eviction": res.EvictionThreshold,
			}
			for list, want := range c.want {
				for name, v := range want {
					got, ok := lists[list][name]
					if !ok || got.Cmp(resource.MustParse(v)) != 0 {
						t.Errorf("%s %s = %s (present %v), want %s", list, name, got.String(), ok, v)
					}
				}
			}
		})
	}
}

// TestComputeRefuses checks the errors: bad kubelet values and records or
// classes the formulas cannot use.
func TestComputeRefuses(t *testing.T) {
	infos := loadInfos(t)
	for name, nc := range map[string]*awsv1.EC2NodeClass{
		"maxPods not an integer":     nodeClass("al2023@latest", kubelet(`{"maxPods": "self.max_pods"}`)),
		"negative podsPerCore":       nodeClass("al2023@latest", kubelet(`{"podsPerCore": -1}`)),
		"bad kubeReserved quantity":  nodeClass("al2023@latest", kubelet(`{"kubeReserved": {"cpu": "lots"}}`)),
		"bad eviction percentage":    nodeClass("al2023@latest", kubelet(`{"evictionHard": {"memory.available": "150%"}}`)),
		"bad eviction quantity":      nodeClass("al2023@latest", kubelet(`{"evictionHard": {"nodefs.available": "x"}}`)),
		"systemReserved not a map":   nodeClass("al2023@latest", kubelet(`{"systemReserved": "1Gi"}`)),
		"no AMI family":              nodeClass("", nil),
		"unknown AMI family in term": nodeClass("ubuntu@latest", nil),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Compute(infos["m5.large"], nc, DefaultSettings()); err == nil {
				t.Error("want an error")
			}
		})
	}
	broken := infos["m5.large"]
	broken.MemoryInfo = nil
	if _, err := Compute(broken, nodeClass("al2023@latest", nil), DefaultSettings()); err == nil {
		t.Error("record without MemoryInfo: want an error")
	}
}

// TestBranchInterfaceTable checks the embedded pod-eni table parses and
// holds the facts the vectors rely on, plus a non-trunking type.
func TestBranchInterfaceTable(t *testing.T) {
	if len(branchInterfaces) < 900 {
		t.Fatalf("branch interface table has %d types, want the full VPC resource controller list", len(branchInterfaces))
	}
	for typ, want := range map[string]int64{"m5.metal": 120, "m5.24xlarge": 107, "i4i.2xlarge": 26, "t3.micro": 0, "i3.large": 0, "p4d.24xlarge": 62} {
		if got := podENIs(typ); got != want {
			t.Errorf("pod-eni %s = %d, want %d", typ, got, want)
		}
	}
	for _, bad := range []string{"m5.large 9", "m5.large\tnine", "m5.large\t9\nm5.large\t9"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("parsing %q: want a panic", bad)
				}
			}()
			mustParseBranchInterfaces(bad)
		}()
	}
}
