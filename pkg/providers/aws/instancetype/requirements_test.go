package instancetype

import (
	"testing"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// absent marks a key that must be present as DoesNotExist (an empty set),
// so that a pod requiring it never lands on the type.
const absent = "<DoesNotExist>"

// TestRequirements checks the labels of a few types against what the
// inventory (§2.1, §4.4) and upstream's documentation say they carry.
func TestRequirements(t *testing.T) {
	infos := loadInfos(t)
	zones := []Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}}
	common := map[string][]string{
		scheduling.LabelOS:                              {"linux"},
		scheduling.LabelRegion:                          {"us-east-1"},
		scheduling.LabelZone:                            {"us-east-1a", "us-east-1b"},
		awsv1.LabelTopologyZoneID:                       {"use1-az1", "use1-az2"},
		scheduling.LabelCapacityType:                    {"on-demand", "spot"},
		scheduling.LabelWindowsBuild:                    {absent},
		scheduling.LabelReservationID:                   {absent},
		awsv1.LabelCapacityReservationType:              {absent},
		awsv1.LabelInstanceTenancy:                      {"dedicated", "default"},
		awsv1.LabelInstanceCapabilityFlex:               {"false"},
		awsv1.LabelInstanceCPUManufacturer:              {"intel"},
		awsv1.LabelInstanceEncryptionInTransitSupported: {"true"},
	}
	noGPU := map[string][]string{
		awsv1.LabelInstanceGPUName: {absent}, awsv1.LabelInstanceGPUManufacturer: {absent},
		awsv1.LabelInstanceGPUCount: {absent}, awsv1.LabelInstanceGPUMemory: {absent},
	}
	noAccel := map[string][]string{
		awsv1.LabelInstanceAcceleratorName: {absent}, awsv1.LabelInstanceAcceleratorManufacturer: {absent},
		awsv1.LabelInstanceAcceleratorCount: {absent},
	}
	cases := []struct {
		name string
		want []map[string][]string
	}{
		{"m5.large", []map[string][]string{common, noGPU, noAccel, {
			scheduling.LabelInstanceType:                    {"m5.large"},
			scheduling.LabelArch:                            {"amd64"},
			awsv1.LabelInstanceCategory:                     {"m"},
			awsv1.LabelInstanceFamily:                       {"m5"},
			awsv1.LabelInstanceGeneration:                   {"5"},
			awsv1.LabelInstanceSize:                         {"large"},
			awsv1.LabelInstanceCPU:                          {"2"},
			awsv1.LabelInstanceCPUSustainedClockSpeedMhz:    {"3100"},
			awsv1.LabelInstanceMemory:                       {"8192"},
			awsv1.LabelInstanceNetworkBandwidth:             {"750"},
			awsv1.LabelInstanceEBSBandwidth:                 {"4750"},
			awsv1.LabelInstanceHypervisor:                   {"nitro"},
			awsv1.LabelInstanceEncryptionInTransitSupported: {"false"},
			awsv1.LabelInstanceLocalNVME:                    {absent},
		}}},
		// Bare metal: no hypervisor, so the label is the empty string.
		{"m5.metal", []map[string][]string{common, noGPU, noAccel, {
			awsv1.LabelInstanceSize:                         {"metal"},
			awsv1.LabelInstanceHypervisor:                   {""},
			awsv1.LabelInstanceCPU:                          {"96"},
			awsv1.LabelInstanceNetworkBandwidth:             {"25000"},
			awsv1.LabelInstanceEncryptionInTransitSupported: {"false"},
		}}},
		// Four network cards: bandwidth sums them; capacity-block usage
		// is not a capacity type.
		{"p4d.24xlarge", []map[string][]string{common, noAccel, {
			awsv1.LabelInstanceCategory:         {"p"},
			awsv1.LabelInstanceGeneration:       {"4"},
			awsv1.LabelInstanceFamily:           {"p4d"},
			awsv1.LabelInstanceGPUName:          {"a100"},
			awsv1.LabelInstanceGPUManufacturer:  {"nvidia"},
			awsv1.LabelInstanceGPUCount:         {"8"},
			awsv1.LabelInstanceGPUMemory:        {"40960"},
			awsv1.LabelInstanceLocalNVME:        {"8000"},
			awsv1.LabelInstanceNetworkBandwidth: {"400000"},
		}}},
		{"p3dn.24xlarge", []map[string][]string{common, noAccel, {
			awsv1.LabelInstanceGPUName:  {"v100"},
			awsv1.LabelInstanceGPUCount: {"8"},
			awsv1.LabelInstanceFamily:   {"p3dn"},
		}}},
		// Multi-word names are kebab-cased.
		{"g4ad.xlarge", []map[string][]string{noAccel, {
			awsv1.LabelInstanceGPUName:         {"radeon-pro-v520"},
			awsv1.LabelInstanceGPUManufacturer: {"amd"},
			awsv1.LabelInstanceCPUManufacturer: {"amd"},
		}}},
		{"dl1.24xlarge", []map[string][]string{{
			awsv1.LabelInstanceGPUName:         {"gaudi-hl-205"},
			awsv1.LabelInstanceGPUManufacturer: {"habana"},
		}}},
		// Neuron types: accelerator labels come from NeuronInfo (inf1 also
		// lists an inference accelerator; Neuron wins).
		{"inf1.xlarge", []map[string][]string{common, noGPU, {
			awsv1.LabelInstanceAcceleratorName:         {"inferentia"},
			awsv1.LabelInstanceAcceleratorManufacturer: {"aws"},
			awsv1.LabelInstanceAcceleratorCount:        {"1"},
		}}},
		{"inf2.xlarge", []map[string][]string{noGPU, {
			awsv1.LabelInstanceAcceleratorName:  {"inferentia2"},
			awsv1.LabelInstanceCPUManufacturer:  {"amd"},
			awsv1.LabelInstanceNetworkBandwidth: {"2083"},
		}}},
		{"trn1.32xlarge", []map[string][]string{noGPU, {
			awsv1.LabelInstanceAcceleratorName:         {"trainium"},
			awsv1.LabelInstanceAcceleratorManufacturer: {"aws"},
			awsv1.LabelInstanceAcceleratorCount:        {"16"},
			awsv1.LabelInstanceCategory:                {"trn"},
			awsv1.LabelInstanceGeneration:              {"1"},
		}}},
		{"c7i-flex.large", []map[string][]string{noGPU, noAccel, {
			awsv1.LabelInstanceFamily:         {"c7i-flex"},
			awsv1.LabelInstanceCategory:       {"c"},
			awsv1.LabelInstanceGeneration:     {"7"},
			awsv1.LabelInstanceCapabilityFlex: {"true"},
		}}},
		{"t4g.small", []map[string][]string{{
			scheduling.LabelArch:               {"arm64"},
			awsv1.LabelInstanceCPUManufacturer: {"aws"},
		}}},
		{"i3.large", []map[string][]string{{
			awsv1.LabelInstanceHypervisor: {"xen"},
			awsv1.LabelInstanceLocalNVME:  {"475"},
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, ok := infos[c.name]
			if !ok {
				t.Fatalf("no testdata record for %s", c.name)
			}
			reqs, err := Requirements(info, awsv1.AMIFamilyAL2023, "us-east-1", zones, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Later maps override earlier ones (type-specific over common).
			merged := map[string][]string{}
			for _, want := range c.want {
				for key, vals := range want {
					merged[key] = vals
				}
			}
			for key, vals := range merged {
				expectRequirement(t, reqs, key, vals)
			}
			// Every AWS label the API defines that describes the type is
			// present, as a value or as DoesNotExist.
			for _, key := range []string{
				awsv1.LabelInstanceCategory, awsv1.LabelInstanceFamily, awsv1.LabelInstanceGeneration,
				awsv1.LabelInstanceSize, awsv1.LabelInstanceCPU, awsv1.LabelInstanceCPUManufacturer,
				awsv1.LabelInstanceCPUSustainedClockSpeedMhz, awsv1.LabelInstanceMemory,
				awsv1.LabelInstanceEBSBandwidth, awsv1.LabelInstanceNetworkBandwidth, awsv1.LabelInstanceLocalNVME,
				awsv1.LabelInstanceHypervisor, awsv1.LabelInstanceEncryptionInTransitSupported,
				awsv1.LabelInstanceCapabilityFlex, awsv1.LabelInstanceGPUName, awsv1.LabelInstanceGPUManufacturer,
				awsv1.LabelInstanceGPUCount, awsv1.LabelInstanceGPUMemory, awsv1.LabelInstanceAcceleratorName,
				awsv1.LabelInstanceAcceleratorManufacturer, awsv1.LabelInstanceAcceleratorCount, awsv1.LabelInstanceTenancy,
			} {
				if !reqs.Has(key) {
					t.Errorf("missing requirement %s", key)
				}
			}
		})
	}
}

func expectRequirement(t *testing.T, reqs scheduling.Requirements, key string, vals []string) {
	t.Helper()
	if !reqs.Has(key) {
		t.Errorf("%s: missing", key)
		return
	}
	r := reqs.Get(key)
	if len(vals) == 1 && vals[0] == absent {
		if r.Operator() != scheduling.OpDoesNotExist {
			t.Errorf("%s = %s, want DoesNotExist", key, r)
		}
		return
	}
	got := r.Values()
	if r.Operator() != scheduling.OpIn || len(got) != len(vals) {
		t.Errorf("%s = %s, want In %v", key, r, vals)
		return
	}
	for i := range vals {
		if got[i] != vals[i] {
			t.Errorf("%s = %s, want In %v", key, r, vals)
			return
		}
	}
}

// TestRequirementsFamilyAndReservations covers what the EC2NodeClass adds:
// Windows OS and build (amd64 only) and reserved capacity.
func TestRequirementsFamilyAndReservations(t *testing.T) {
	infos := loadInfos(t)
	win, err := Requirements(infos["m5.large"], awsv1.AMIFamilyWindows2022, "us-east-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectRequirement(t, win, scheduling.LabelOS, []string{"windows"})
	expectRequirement(t, win, scheduling.LabelWindowsBuild, []string{"10.0.20348"})
	arm, err := Requirements(infos["t4g.small"], awsv1.AMIFamilyWindows2019, "us-east-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No Windows AMI runs on arm64: the OS set is empty, so nothing fits.
	expectRequirement(t, arm, scheduling.LabelOS, []string{absent})

	res := []awsv1.CapacityReservation{
		{ID: "cr-1", InstanceType: "m5.large", ReservationType: awsv1.CapacityReservationTypeCapacityBlock},
		{ID: "cr-2", InstanceType: "m5.large"},
		{ID: "cr-3", InstanceType: "c5.large"},
	}
	reqs, err := Requirements(infos["m5.large"], awsv1.AMIFamilyAL2023, "us-east-1", nil, res)
	if err != nil {
		t.Fatal(err)
	}
	expectRequirement(t, reqs, scheduling.LabelCapacityType, []string{"on-demand", "reserved", "spot"})
	expectRequirement(t, reqs, scheduling.LabelReservationID, []string{"cr-1", "cr-2"})
	expectRequirement(t, reqs, awsv1.LabelCapacityReservationType, []string{"capacity-block", "default"})

	if _, err := Requirements(infos["m5.large"], "", "us-east-1", nil, nil); err == nil {
		t.Error("no AMI family: want an error")
	}
}

// TestNew assembles the solver's instance type: requirements, capacity and
// the summed overhead, with no offerings.
func TestNew(t *testing.T) {
	infos := loadInfos(t)
	it, err := New(infos["m5.large"], nodeClass("al2023@latest", nil), "us-east-1", []Zone{{Name: "us-east-1a"}}, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if it.Name != "m5.large" || len(it.Offerings) != 0 {
		t.Fatalf("name %q, %d offerings", it.Name, len(it.Offerings))
	}
	expectRequirement(t, it.Requirements, scheduling.LabelZone, []string{"us-east-1a"})
	// 574Mi kube-reserved + 100Mi eviction; 70m cpu; 1Gi + 2Gi disk.
	for name, want := range map[string]string{"memory": "674Mi", "cpu": "70m", "ephemeral-storage": "3Gi"} {
		got := it.Overhead[corevName(name)]
		if got.Cmp(mustQ(want)) != 0 {
			t.Errorf("overhead %s = %s, want %s", name, got.String(), want)
		}
	}
}
