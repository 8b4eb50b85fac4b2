package instancetype

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// The vectors file is a copy of shared/reference/aws/capacity-vectors.md:
// upstream Karpenter's own numbers for the moto DescribeInstanceTypes
// records in testdata/instance_types.json.
const vectorsFile = "testdata/capacity-vectors.md"

// accelerators are the keys the vectors' accelerators column lists when
// non-zero; every other row must have them at 0.
var accelerators = []corev1.ResourceName{
	awsv1.ResourceNVIDIAGPU, awsv1.ResourceAMDGPU, awsv1.ResourceAWSNeuron,
	awsv1.ResourceAWSNeuronCore, awsv1.ResourceHabanaGaudi, awsv1.ResourceEFA,
}

// vectorConfigs builds the EC2NodeClass of every configuration the vectors
// file names, from its spec column.
var vectorConfigs = map[string]func() *awsv1.EC2NodeClass{
	"al2023-default":       func() *awsv1.EC2NodeClass { return nodeClass("al2023@latest", nil) },
	"al2023-maxpods110":    func() *awsv1.EC2NodeClass { return nodeClass("al2023@latest", kubelet(`{"maxPods": 110}`)) },
	"al2023-podspercore4":  func() *awsv1.EC2NodeClass { return nodeClass("al2023@latest", kubelet(`{"podsPerCore": 4}`)) },
	"bottlerocket-default": func() *awsv1.EC2NodeClass { return nodeClass("bottlerocket@latest", nil) },
	"bottlerocket-podspercore4": func() *awsv1.EC2NodeClass {
		return nodeClass("bottlerocket@latest", kubelet(`{"podsPerCore": 4}`))
	},
	"bottlerocket-maxpods110": func() *awsv1.EC2NodeClass {
		return nodeClass("bottlerocket@latest", kubelet(`{"maxPods": 110}`))
	},
	"al2023-reserved-eviction": func() *awsv1.EC2NodeClass {
		return nodeClass("al2023@latest", kubelet(`{"kubeReserved": {"cpu": "250m"},
			"systemReserved": {"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
			"evictionHard": {"memory.available": "5%", "nodefs.available": "15%"}}`))
	},
	"al2023-raid0": func() *awsv1.EC2NodeClass {
		nc := nodeClass("al2023@latest", nil)
		raid0 := awsv1.InstanceStorePolicyRAID0
		nc.Spec.InstanceStorePolicy = &raid0
		return nc
	},
	"al2023-root100gi": func() *awsv1.EC2NodeClass {
		nc := nodeClass("al2023@latest", nil)
		dev, size, gp3, yes := "/dev/xvda", resource.MustParse("100Gi"), "gp3", true
		nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
			DeviceName: &dev, RootVolume: true,
			EBS: &awsv1.BlockDevice{VolumeSize: &size, VolumeType: &gp3, Encrypted: &yes},
		}}
		return nc
	},
}

func nodeClass(alias string, kc awsv1.KubeletConfiguration) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "vectors"
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
	nc.Spec.Kubelet = kc
	return nc
}

func kubelet(js string) awsv1.KubeletConfiguration {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		panic(err)
	}
	kc := awsv1.KubeletConfiguration{}
	for k, v := range raw {
		kc[k] = apiextensionsv1.JSON{Raw: v}
	}
	return kc
}

// loadInfos reads the moto records the vectors were computed from.
func loadInfos(t *testing.T) map[string]ec2types.InstanceTypeInfo {
	t.Helper()
	raw, err := os.ReadFile("testdata/instance_types.json")
	if err != nil {
		t.Fatal(err)
	}
	var infos []ec2types.InstanceTypeInfo
	if err := json.Unmarshal(raw, &infos); err != nil {
		t.Fatalf("decoding moto records into ec2types.InstanceTypeInfo: %v", err)
	}
	out := map[string]ec2types.InstanceTypeInfo{}
	for _, info := range infos {
		out[string(info.InstanceType)] = info
	}
	return out
}

// vectors is the parsed markdown: the configuration names with their spec
// text, the inputs table and each configuration's expected rows.
type vectors struct {
	configs map[string]string
	inputs  []map[string]string
	rows    map[string][]map[string]string
}

func parseVectors(t *testing.T) vectors {
	t.Helper()
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	v := vectors{configs: map[string]string{}, rows: map[string][]map[string]string{}}
	section, sub := "", ""
	var header []string
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section, sub, header = strings.TrimPrefix(line, "## "), "", nil
			continue
		case strings.HasPrefix(line, "### "):
			sub, header = strings.Trim(strings.TrimPrefix(line, "### "), "` "), nil
			continue
		case !strings.HasPrefix(line, "|"):
			continue
		}
		cells := splitRow(line)
		if header == nil {
			header = cells
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("vectors row has %d cells, header %d: %s", len(cells), len(header), line)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		switch {
		case section == "Configurations":
			v.configs[strings.Trim(row["name"], "`")] = row["spec"]
		case strings.HasPrefix(section, "Inputs"):
			v.inputs = append(v.inputs, row)
		case section == "Vectors" && sub != "":
			v.rows[sub] = append(v.rows[sub], row)
		}
	}
	return v
}

func splitRow(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var identicalTo = regexp.MustCompile("identical to `([a-z0-9-]+)`")

// TestCapacityVectors reproduces every row of the vectors file: capacity,
// overhead and allocatable for each configuration, including the two
// configurations the file states are identical to another one.
func TestCapacityVectors(t *testing.T) {
	infos := loadInfos(t)
	v := parseVectors(t)
	if len(v.configs) != len(vectorConfigs) {
		t.Fatalf("vectors list %d configurations, the test builds %d: %v", len(v.configs), len(vectorConfigs), sortedNames(v.configs))
	}
	types := map[string]bool{}
	for _, in := range v.inputs {
		types[in["type"]] = true
	}
	rows, cells := 0, 0
	for _, name := range sortedNames(v.configs) {
		build, ok := vectorConfigs[name]
		if !ok {
			t.Fatalf("configuration %q in the vectors is not built by the test", name)
		}
		expected, source := v.rows[name], name
		if expected == nil {
			m := identicalTo.FindStringSubmatch(v.configs[name])
			if m == nil {
				t.Fatalf("configuration %q has no table and no \"identical to\" reference", name)
			}
			// Follow the chain: bottlerocket-podspercore4 is identical to
			// bottlerocket-default, which is identical to al2023-default.
			for source = m[1]; v.rows[source] == nil; {
				m = identicalTo.FindStringSubmatch(v.configs[source])
				if m == nil {
					t.Fatalf("configuration %q refers to %q, which has no table", name, source)
				}
				source = m[1]
			}
			expected = v.rows[source]
		}
		if len(expected) != len(types) {
			t.Errorf("configuration %s (rows of %s): %d rows, want one per input type (%d)", name, source, len(expected), len(types))
		}
		for _, row := range expected {
			info, ok := infos[row["type"]]
			if !ok {
				t.Fatalf("no moto record for %s in testdata", row["type"])
			}
			nc := build()
			res, err := Compute(info, nc, DefaultSettings())
			if err != nil {
				t.Fatalf("%s/%s: %v", name, row["type"], err)
			}
			n, bad := compareRow(res, row)
			cells += n
			for _, b := range bad {
				t.Errorf("%s/%s: %s", name, row["type"], b)
			}
			if len(bad) == 0 {
				rows++
			}
		}
	}
	t.Logf("%d rows (%d configurations) match, %d values compared", rows, len(v.configs), cells)
	if rows == 0 {
		t.Fatal("no vector rows were compared")
	}
}

// compareRow checks every column of one expected row by value (the file
// prints values as upstream's Quantity.String(), e.g. 2.147483648e+09).
func compareRow(res Resources, row map[string]string) (int, []string) {
	alloc := res.Allocatable()
	checks := []struct {
		column string
		got    corev1.ResourceList
		name   corev1.ResourceName
	}{
		{"cpu", res.Capacity, corev1.ResourceCPU},
		{"memory", res.Capacity, corev1.ResourceMemory},
		{"pods", res.Capacity, corev1.ResourcePods},
		{"ephemeral-storage", res.Capacity, corev1.ResourceEphemeralStorage},
		{"pod-eni", res.Capacity, awsv1.ResourceAWSPodENI},
		{"kube-reserved cpu", res.KubeReserved, corev1.ResourceCPU},
		{"kube-reserved memory", res.KubeReserved, corev1.ResourceMemory},
		{"kube-reserved ephemeral-storage", res.KubeReserved, corev1.ResourceEphemeralStorage},
		{"eviction memory", res.EvictionThreshold, corev1.ResourceMemory},
		{"eviction ephemeral-storage", res.EvictionThreshold, corev1.ResourceEphemeralStorage},
		{"allocatable cpu", alloc, corev1.ResourceCPU},
		{"allocatable memory", alloc, corev1.ResourceMemory},
		{"allocatable pods", alloc, corev1.ResourcePods},
		{"allocatable ephemeral-storage", alloc, corev1.ResourceEphemeralStorage},
	}
	var bad []string
	n := 0
	for _, c := range checks {
		n++
		want, err := resource.ParseQuantity(row[c.column])
		if err != nil {
			bad = append(bad, fmt.Sprintf("column %q: cannot parse %q: %v", c.column, row[c.column], err))
			continue
		}
		got, ok := c.got[c.name]
		if !ok || got.Cmp(want) != 0 {
			bad = append(bad, fmt.Sprintf("%s = %s, want %s", c.column, got.String(), want.String()))
		}
	}
	// Accelerators: the listed keys at their values, all others at 0, and
	// every key present (upstream always advertises them).
	wantAcc := map[corev1.ResourceName]string{}
	if s := row["accelerators"]; s != "-" {
		for _, kv := range strings.Split(s, ",") {
			k, val, _ := strings.Cut(kv, "=")
			wantAcc[corev1.ResourceName(k)] = val
		}
	}
	for _, name := range accelerators {
		n++
		want := resource.MustParse("0")
		if s, ok := wantAcc[name]; ok {
			want = resource.MustParse(s)
			delete(wantAcc, name)
		}
		got, ok := res.Capacity[name]
		if !ok || got.Cmp(want) != 0 {
			bad = append(bad, fmt.Sprintf("capacity %s = %s (present %v), want %s", name, got.String(), ok, want.String()))
		}
	}
	for k := range wantAcc {
		bad = append(bad, fmt.Sprintf("vectors list accelerator %s the test does not know", k))
	}
	// System-reserved is exactly kubelet.systemReserved.
	n++
	wantSys := corev1.ResourceList{}
	if s := row["system-reserved"]; s != "-" {
		for _, kv := range strings.Split(s, ",") {
			k, val, _ := strings.Cut(kv, "=")
			wantSys[corev1.ResourceName(k)] = resource.MustParse(val)
		}
	}
	if !equalLists(res.SystemReserved, wantSys) {
		bad = append(bad, fmt.Sprintf("system-reserved = %v, want %v", res.SystemReserved, wantSys))
	}
	return n, bad
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// TestVectorInputs checks the testdata records are the ones the vectors
// describe, so a swapped or edited record cannot pass unnoticed.
func TestVectorInputs(t *testing.T) {
	infos := loadInfos(t)
	v := parseVectors(t)
	if len(v.inputs) == 0 {
		t.Fatal("no inputs table in the vectors file")
	}
	for _, in := range v.inputs {
		info, ok := infos[in["type"]]
		if !ok {
			t.Errorf("no testdata record for %s", in["type"])
			continue
		}
		card := info.NetworkInfo.NetworkCards[aws32(info.NetworkInfo.DefaultNetworkCardIndex)]
		got := map[string]string{
			"vCPUs":               fmt.Sprint(*info.VCpuInfo.DefaultVCpus),
			"SizeInMiB":           fmt.Sprint(*info.MemoryInfo.SizeInMiB),
			"arch[0]":             string(info.ProcessorInfo.SupportedArchitectures[0]),
			"ENIs (default card)": fmt.Sprint(*card.MaximumNetworkInterfaces),
			"IPv4/ENI":            fmt.Sprint(*info.NetworkInfo.Ipv4AddressesPerInterface),
			"EFA max":             "-",
			"instance store GB":   "-",
		}
		if info.NetworkInfo.EfaInfo != nil {
			got["EFA max"] = fmt.Sprint(*info.NetworkInfo.EfaInfo.MaximumEfaInterfaces)
		}
		if info.InstanceStorageInfo != nil {
			got["instance store GB"] = fmt.Sprint(*info.InstanceStorageInfo.TotalSizeInGB)
		}
		for col, g := range got {
			if in[col] != g {
				t.Errorf("%s %s = %s, vectors say %s", in["type"], col, g, in[col])
			}
		}
	}
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
