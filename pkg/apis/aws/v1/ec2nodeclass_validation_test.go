package v1_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// baseNodeClass is the smallest EC2NodeClass upstream accepts. Each case
// merges a spec fragment into it, so a case shows only what it breaks.
const baseNodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: test
spec:
  role: KarpenterNodeRole
  amiSelectorTerms:
  - alias: al2023@latest
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: test
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: test
`

// validationCase is one spec fragment and, when it must be rejected, the
// field path and message fragment the API server must report.
type validationCase struct {
	name  string
	patch string // YAML merged into .spec (JSON merge patch: null deletes, lists replace)
	field string // empty: the object must be accepted
	msg   string
}

func TestEC2NodeClassRejected(t *testing.T) {
	cases := []validationCase{
		// role xor instanceProfile
		{name: "role and instanceProfile", patch: `instanceProfile: KarpenterNodeProfile`,
			field: "spec", msg: "must specify exactly one of ['role', 'instanceProfile']"},
		{name: "neither role nor instanceProfile", patch: `role: null`,
			field: "spec", msg: "must specify exactly one of ['role', 'instanceProfile']"},
		{name: "empty role", patch: `role: ""`,
			field: "spec.role", msg: "role cannot be empty"},
		{name: "empty instanceProfile", patch: "role: null\ninstanceProfile: \"\"",
			field: "spec.instanceProfile", msg: "instanceProfile cannot be empty"},

		// subnetSelectorTerms
		{name: "missing subnetSelectorTerms", patch: `subnetSelectorTerms: null`,
			field: "spec.subnetSelectorTerms", msg: "Required value"},
		{name: "empty subnetSelectorTerms", patch: `subnetSelectorTerms: []`,
			field: "spec.subnetSelectorTerms", msg: "subnetSelectorTerms cannot be empty"},
		{name: "empty subnet term", patch: `subnetSelectorTerms: [{}]`,
			field: "spec.subnetSelectorTerms", msg: "expected at least one, got none, ['tags', 'id']"},
		{name: "subnet id with tags in the only term", patch: `subnetSelectorTerms: [{id: subnet-0a1b2c, tags: {a: b}}]`,
			field: "spec.subnetSelectorTerms", msg: "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
		{name: "subnet id with tags in every term", patch: `subnetSelectorTerms: [{id: subnet-0a1b2c, tags: {a: b}}, {id: subnet-0d, tags: {c: d}}]`,
			field: "spec.subnetSelectorTerms", msg: "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
		{name: "subnet id pattern", patch: `subnetSelectorTerms: [{id: sn-0a1b2c}]`,
			field: "spec.subnetSelectorTerms[0].id", msg: "should match 'subnet-[0-9a-z]+'"},
		{name: "subnet empty tag value", patch: `subnetSelectorTerms: [{tags: {a: ""}}]`,
			field: "spec.subnetSelectorTerms[0].tags", msg: "empty tag keys or values aren't supported"},
		{name: "subnet empty tag key", patch: `subnetSelectorTerms: [{tags: {"": b}}]`,
			field: "spec.subnetSelectorTerms[0].tags", msg: "empty tag keys or values aren't supported"},
		{name: "31 subnet terms", patch: "subnetSelectorTerms: " + repeatTerms(31, `{id: subnet-%d}`),
			field: "spec.subnetSelectorTerms", msg: "must have at most 30 items"},
		{name: "21 subnet tags", patch: "subnetSelectorTerms: [{tags: " + repeatTags(21) + "}]",
			field: "spec.subnetSelectorTerms[0].tags", msg: "must have at most 20 items"},

		// securityGroupSelectorTerms
		{name: "missing securityGroupSelectorTerms", patch: `securityGroupSelectorTerms: null`,
			field: "spec.securityGroupSelectorTerms", msg: "Required value"},
		{name: "empty securityGroupSelectorTerms", patch: `securityGroupSelectorTerms: []`,
			field: "spec.securityGroupSelectorTerms", msg: "securityGroupSelectorTerms cannot be empty"},
		{name: "empty security group term", patch: `securityGroupSelectorTerms: [{}]`,
			field: "spec.securityGroupSelectorTerms", msg: "expected at least one, got none, ['tags', 'id', 'name']"},
		{name: "security group id with name", patch: `securityGroupSelectorTerms: [{id: sg-0a1b, name: workers}]`,
			field: "spec.securityGroupSelectorTerms", msg: "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		{name: "security group name with tags", patch: `securityGroupSelectorTerms: [{name: workers, tags: {a: b}}]`,
			field: "spec.securityGroupSelectorTerms", msg: "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		{name: "security group id pattern", patch: `securityGroupSelectorTerms: [{id: group-0a1b}]`,
			field: "spec.securityGroupSelectorTerms[0].id", msg: "should match 'sg-[0-9a-z]+'"},

		// capacityReservationSelectorTerms
		{name: "capacity reservation term with only ownerID", patch: `capacityReservationSelectorTerms: [{ownerID: "012345678901"}]`,
			field: "spec.capacityReservationSelectorTerms", msg: "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
		{name: "capacity reservation id with ownerID", patch: `capacityReservationSelectorTerms: [{id: cr-0a1b, ownerID: "012345678901"}]`,
			field: "spec.capacityReservationSelectorTerms", msg: "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
		{name: "capacity reservation id pattern", patch: `capacityReservationSelectorTerms: [{id: cr_0a1b}]`,
			field: "spec.capacityReservationSelectorTerms[0].id", msg: "should match '^cr-[0-9a-z]+$'"},
		{name: "capacity reservation ownerID pattern", patch: `capacityReservationSelectorTerms: [{tags: {a: b}, ownerID: "01234567890"}]`,
			field: "spec.capacityReservationSelectorTerms[0].ownerID", msg: "should match '^[0-9]{12}$'"},
		{name: "capacity reservation instanceMatchCriteria enum", patch: `capacityReservationSelectorTerms: [{instanceMatchCriteria: closed}]`,
			field: "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria", msg: `supported values: "open", "targeted"`},

		// amiSelectorTerms: exists() rules, so one bad term is enough
		{name: "missing amiSelectorTerms", patch: `amiSelectorTerms: null`,
			field: "spec.amiSelectorTerms", msg: "Required value"},
		{name: "empty amiSelectorTerms", patch: "amiFamily: AL2023\namiSelectorTerms: []",
			field: "spec.amiSelectorTerms", msg: "should have at least 1 items"},
		{name: "empty ami term", patch: "amiFamily: AL2023\namiSelectorTerms: [{}]",
			field: "spec.amiSelectorTerms", msg: "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
		{name: "ami id with tags", patch: "amiFamily: AL2023\namiSelectorTerms: [{id: ami-0a1b, tags: {a: b}}]",
			field: "spec.amiSelectorTerms", msg: "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		{name: "ami id with tags in one of two terms (exists, unlike subnets)", patch: "amiFamily: AL2023\namiSelectorTerms: [{id: ami-0a1b, tags: {a: b}}, {tags: {c: d}}]",
			field: "spec.amiSelectorTerms", msg: "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		{name: "ami id pattern", patch: "amiFamily: AL2023\namiSelectorTerms: [{id: img-0a1b}]",
			field: "spec.amiSelectorTerms[0].id", msg: "should match 'ami-[0-9a-z]+'"},
		{name: "alias with owner", patch: `amiSelectorTerms: [{alias: al2023@latest, owner: amazon}]`,
			field: "spec.amiSelectorTerms", msg: "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		{name: "alias with a second term", patch: `amiSelectorTerms: [{alias: al2023@latest}, {tags: {a: b}}]`,
			field: "spec.amiSelectorTerms", msg: "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
		{name: "alias without @", patch: `amiSelectorTerms: [{alias: al2023latest}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "'alias' is improperly formatted, must match the format 'family@version'"},
		{name: "alias without version", patch: `amiSelectorTerms: [{alias: "al2023@"}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "'alias' is improperly formatted, must match the format 'family@version'"},
		{name: "alias unknown family", patch: `amiSelectorTerms: [{alias: ubuntu@latest}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
		{name: "alias over 30 bytes", patch: `amiSelectorTerms: [{alias: al2023@v20240625-0123456789abcd}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "may not be more than 30 bytes"},
		{name: "windows2019 alias pinned", patch: `amiSelectorTerms: [{alias: windows2019@v20240101}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "windows families may only specify version 'latest'"},
		{name: "windows2025 alias pinned", patch: `amiSelectorTerms: [{alias: windows2025@2025.01.01}]`,
			field: "spec.amiSelectorTerms[0].alias", msg: "windows families may only specify version 'latest'"},

		// amiFamily
		{name: "amiFamily unknown", patch: `amiFamily: Ubuntu`,
			field: "spec.amiFamily", msg: `Unsupported value: "Ubuntu"`},
		{name: "amiFamily required without alias", patch: `amiSelectorTerms: [{id: ami-0a1b}]`,
			field: "spec", msg: "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		{name: "amiFamily disagrees with al2 alias", patch: "amiFamily: AL2023\namiSelectorTerms: [{alias: al2@latest}]",
			field: "spec", msg: "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
		{name: "amiFamily disagrees with al2023 alias", patch: `amiFamily: Bottlerocket`,
			field: "spec", msg: "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
		{name: "amiFamily disagrees with bottlerocket alias", patch: "amiFamily: AL2023\namiSelectorTerms: [{alias: bottlerocket@v1.20.0}]",
			field: "spec", msg: "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
		{name: "amiFamily disagrees with windows2019 alias", patch: "amiFamily: Windows2022\namiSelectorTerms: [{alias: windows2019@latest}]",
			field: "spec", msg: "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"},
		{name: "amiFamily disagrees with windows2022 alias", patch: "amiFamily: Windows2019\namiSelectorTerms: [{alias: windows2022@latest}]",
			field: "spec", msg: "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"},
		{name: "amiFamily disagrees with windows2025 alias", patch: "amiFamily: Windows2022\namiSelectorTerms: [{alias: windows2025@latest}]",
			field: "spec", msg: "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"},

		// tags Karpenter owns
		{name: "empty tag key", patch: `tags: {"": x}`,
			field: "spec.tags", msg: "empty tag keys aren't supported"},
		{name: "tag eks:eks-cluster-name", patch: `tags: {"eks:eks-cluster-name": x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching eks:eks-cluster-name"},
		{name: "tag kubernetes.io/cluster/", patch: `tags: {kubernetes.io/cluster/test: owned}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching kubernetes.io/cluster/"},
		{name: "tag karpenter.sh/nodepool", patch: `tags: {karpenter.sh/nodepool: x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching karpenter.sh/nodepool"},
		{name: "tag karpenter.sh/nodeclaim", patch: `tags: {karpenter.sh/nodeclaim: x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching karpenter.sh/nodeclaim"},
		{name: "tag karpenter.k8s.aws/ec2nodeclass", patch: `tags: {karpenter.k8s.aws/ec2nodeclass: x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"},
		{name: "tag karpenter-go.io/ prefix", patch: `tags: {karpenter-go.io/launch-state: x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching karpenter-go.io/"},
		{name: "tag karpenter-go.io/ member prefix", patch: `tags: {karpenter-go.io/launch-members-0: x}`,
			field: "spec.tags", msg: "tag contains a restricted tag matching karpenter-go.io/"},

		// blockDeviceMappings
		{name: "two root volumes", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi}}, {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 20Gi}}]`,
			field: "spec.blockDeviceMappings", msg: "must have only one blockDeviceMappings with rootVolume"},
		{name: "ebs without snapshot or size", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]`,
			field: "spec.blockDeviceMappings[0].ebs", msg: "snapshotID or volumeSize must be defined"},
		{name: "volumeInitializationRate without snapshot", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}}]`,
			field: "spec.blockDeviceMappings[0].ebs", msg: "snapshotID must be set when volumeInitializationRate is set"},
		{name: "volumeInitializationRate below 100", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {snapshotID: snap-0a1b, volumeInitializationRate: 99}}]`,
			field: "spec.blockDeviceMappings[0].ebs.volumeInitializationRate", msg: "should be greater than or equal to 100"},
		{name: "volumeSize too large", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100000Gi}}]`,
			field: "spec.blockDeviceMappings[0].ebs.volumeSize", msg: "should match '^((?:[1-9][0-9]{0,3}"},
		{name: "volumeSize in Mi", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20480Mi}}]`,
			field: "spec.blockDeviceMappings[0].ebs.volumeSize", msg: "should match"},
		{name: "volumeType unknown", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp4}}]`,
			field: "spec.blockDeviceMappings[0].ebs.volumeType", msg: `Unsupported value: "gp4"`},
		{name: "51 block devices", patch: "blockDeviceMappings: " + repeatTerms(51, `{deviceName: /dev/xvd%d, ebs: {volumeSize: 1Gi}}`),
			field: "spec.blockDeviceMappings", msg: "must have at most 50 items"},

		// metadataOptions
		{name: "httpTokens unknown", patch: `metadataOptions: {httpTokens: sometimes}`,
			field: "spec.metadataOptions.httpTokens", msg: `supported values: "required", "optional"`},
		{name: "httpEndpoint unknown", patch: `metadataOptions: {httpEndpoint: "on"}`,
			field: "spec.metadataOptions.httpEndpoint", msg: `supported values: "enabled", "disabled"`},
		{name: "httpProtocolIPv6 unknown", patch: `metadataOptions: {httpProtocolIPv6: "yes"}`,
			field: "spec.metadataOptions.httpProtocolIPv6", msg: `supported values: "enabled", "disabled"`},
		{name: "hop limit 0", patch: `metadataOptions: {httpPutResponseHopLimit: 0}`,
			field: "spec.metadataOptions.httpPutResponseHopLimit", msg: "should be greater than or equal to 1"},
		{name: "hop limit 65", patch: `metadataOptions: {httpPutResponseHopLimit: 65}`,
			field: "spec.metadataOptions.httpPutResponseHopLimit", msg: "should be less than or equal to 64"},

		// the rest
		{name: "instanceStorePolicy unknown", patch: `instanceStorePolicy: RAID1`,
			field: "spec.instanceStorePolicy", msg: `supported values: "RAID0"`},
		{name: "network interfaces without primary", patch: `networkInterfaces: [{networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}]`,
			field: "spec.networkInterfaces", msg: "networkInterfaces must include a primary interface with interfaceType='interface'"},
		{name: "network interfaces duplicate slot", patch: `networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]`,
			field: "spec.networkInterfaces", msg: "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
		{name: "network interfaces two efa-only on one card", patch: `networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}]`,
			field: "spec.networkInterfaces", msg: "can have at most one efa device per network card"},
		{name: "network interface type unknown", patch: `networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: trunk}]`,
			field: "spec.networkInterfaces[0].interfaceType", msg: `supported values: "interface", "efa-only"`},
		{name: "network interface without deviceIndex", patch: `networkInterfaces: [{networkCardIndex: 0, interfaceType: interface}]`,
			field: "spec.networkInterfaces[0].deviceIndex", msg: "Required value"},
		{name: "placement group neither name nor id", patch: `placementGroupSelector: {}`,
			field: "spec.placementGroupSelector", msg: "expected at least one, got none, ['name', 'id']"},
		{name: "placement group name and id", patch: `placementGroupSelector: {name: training, id: pg-0a1b}`,
			field: "spec.placementGroupSelector", msg: "'name' and 'id' are mutually exclusive"},
		{name: "placement group id pattern", patch: `placementGroupSelector: {id: placement-0a1b}`,
			field: "spec.placementGroupSelector.id", msg: "should match '^pg-[0-9a-z]+$'"},
		{name: "placement group empty name", patch: `placementGroupSelector: {name: ""}`,
			field: "spec.placementGroupSelector.name", msg: "should be at least 1 chars long"},
		{name: "negative ipPrefixCount", patch: `ipPrefixCount: -1`,
			field: "spec.ipPrefixCount", msg: "should be greater than or equal to 0"},
		{name: "nestedVirtualization unknown", patch: `cpuOptions: {nestedVirtualization: "on"}`,
			field: "spec.cpuOptions.nestedVirtualization", msg: `supported values: "enabled", "disabled"`},
		{name: "connectionTracking empty", patch: `connectionTracking: {}`,
			field: "spec.connectionTracking", msg: "expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']"},
		{name: "tcpEstablishedTimeout below 60", patch: `connectionTracking: {tcpEstablishedTimeout: 59}`,
			field: "spec.connectionTracking.tcpEstablishedTimeout", msg: "should be greater than or equal to 60"},
		{name: "udpTimeout above 60", patch: `connectionTracking: {udpTimeout: 61}`,
			field: "spec.connectionTracking.udpTimeout", msg: "should be less than or equal to 60"},
		{name: "kubelet not an object", patch: `kubelet: [maxPods]`,
			field: "spec.kubelet", msg: `must be of type object`},
	}
	runCases(t, cases)
}

func TestEC2NodeClassAccepted(t *testing.T) {
	cases := []validationCase{
		{name: "base object"},
		{name: "instanceProfile instead of role", patch: "role: null\ninstanceProfile: KarpenterNodeProfile"},
		// The upstream quirk: these "id is mutually exclusive" rules use
		// !self.all(...), so they only fire when every term mixes id with
		// another field. One clean term lets the bad one through.
		{name: "subnet id with tags next to a clean term", patch: `subnetSelectorTerms: [{id: subnet-0a1b, tags: {a: b}}, {tags: {c: d}}]`},
		{name: "security group id with name next to a clean term", patch: `securityGroupSelectorTerms: [{id: sg-0a1b, name: workers}, {tags: {c: d}}]`},
		{name: "security group name with tags next to a clean term", patch: `securityGroupSelectorTerms: [{name: workers, tags: {a: b}}, {id: sg-0a1b}]`},
		{name: "capacity reservation id with ownerID next to a clean term", patch: `capacityReservationSelectorTerms: [{id: cr-0a1b, ownerID: "012345678901"}, {tags: {a: b}}]`},
		{name: "ami terms without alias", patch: "amiFamily: AL2023\namiSelectorTerms: [{id: ami-0a1b}, {name: my-ami-*, owner: self}, {ssmParameter: /my/ami}, {tags: {a: '*'}}]"},
		{name: "alias with matching amiFamily", patch: `amiFamily: AL2023`},
		{name: "alias with Custom amiFamily", patch: "amiFamily: Custom\nuserData: echo hi"},
		{name: "alias pinned version", patch: `amiSelectorTerms: [{alias: al2023@v20240625}]`},
		{name: "bottlerocket alias pinned", patch: `amiSelectorTerms: [{alias: bottlerocket@v1.20.0}]`},
		{name: "windows2025 latest, family inferred", patch: `amiSelectorTerms: [{alias: windows2025@latest}]`},
		{name: "alias exactly 30 bytes", patch: `amiSelectorTerms: [{alias: al2023@v20240625-0123456789abc}]`},
		{name: "kubelet passthrough fields", patch: `kubelet: {maxPods: 110, containerLogMaxSize: 50Mi, evictionHard: {memory.available: 5%}, kubeReserved: {cpu: "max(60, vcpus * 30)"}}`},
		{name: "user tags", patch: `tags: {team: platform, kubernetes.io/role: worker, karpenter.sh/discovery: test}`},
		{name: "user tags near our prefix", patch: `tags: {example.com/karpenter-go.io/x: a, karpenter-go.io: b, karpenter-go.iox/y: c}`},
		{name: "block devices", patch: `blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100Gi, volumeType: gp3, iops: 3000, throughput: 125, encrypted: true, deleteOnTermination: true, kmsKeyID: alias/ebs}}, {deviceName: /dev/xvdb, ebs: {snapshotID: snap-0a1b, volumeInitializationRate: 300}}, {deviceName: /dev/xvdc, ebs: {volumeSize: 64T}}]`},
		{name: "network interfaces with efa-only", patch: `networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 2, deviceIndex: 0, interfaceType: efa-only}]`},
		{name: "placement group by id", patch: `placementGroupSelector: {id: pg-0a1b2c}`},
		{name: "everything else", patch: `{associatePublicIPAddress: false, ipPrefixCount: 1, detailedMonitoring: true, instanceStorePolicy: RAID0, context: c-0a1b, cpuOptions: {nestedVirtualization: enabled}, connectionTracking: {tcpEstablishedTimeout: 432000, udpStreamTimeout: 60, udpTimeout: 30}, metadataOptions: {httpEndpoint: disabled, httpProtocolIPv6: enabled, httpPutResponseHopLimit: 64, httpTokens: optional}}`},
	}
	runCases(t, cases)
}

// TestEC2NodeClassDefaults reads a stored object back: metadataOptions is
// defaulted as a whole when absent and field by field when partly set.
func TestEC2NodeClassDefaults(t *testing.T) {
	ctx := testContext(t)
	for _, tc := range []struct {
		name  string
		patch string
		want  map[string]any
	}{
		{name: "absent", want: map[string]any{
			"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(1), "httpTokens": "required"}},
		{name: "partial", patch: `metadataOptions: {httpTokens: optional, httpPutResponseHopLimit: 2}`, want: map[string]any{
			"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(2), "httpTokens": "optional"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := nodeClass(t, tc.patch)
			obj.SetName("defaults-" + tc.name)
			require.NoError(t, cp.Client.Create(ctx, obj))
			t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), obj) })

			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), got))
			opts, found, err := unstructured.NestedMap(got.Object, "spec", "metadataOptions")
			require.NoError(t, err)
			require.True(t, found, "metadataOptions not defaulted")
			require.Equal(t, tc.want, opts)
		})
	}
}

// TestSeedVerdicts applies the EC2NodeClasses quoted by the seed documents and
// expects the verdicts upstream's own CRDs give them.
func TestSeedVerdicts(t *testing.T) {
	ctx := testContext(t)
	for _, tc := range []struct {
		file  string
		field string // empty: accepted
		msg   string
	}{
		{file: "seed-003-default.yaml"},
		{file: "seed-002-general-purpose-restored.yaml"},
		{file: "seed-002-general-purpose-flattened.yaml",
			field: "spec.amiSelectorTerms[0].alias", msg: "'alias' is improperly formatted, must match the format 'family@version'"},
		{file: "seed-001-lab-general.yaml",
			field: "spec.amiSelectorTerms[0].alias", msg: "may not be more than 30 bytes"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			objs, err := controlplane.DecodeManifests(data)
			require.NoError(t, err)
			require.Len(t, objs, 1)
			err = cp.Client.Create(ctx, objs[0], client.DryRunAll)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			requireRejected(t, err, tc.field, tc.msg)
		})
	}
}

// TestUpstreamExamples dry-runs the EC2NodeClasses of upstream's example
// manifests when the reference copy is present; upstream accepts them all.
func TestUpstreamExamples(t *testing.T) {
	const dir = "/work/shared/reference/upstream-examples/v1"
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("no upstream examples at %s", dir)
	}
	ctx := testContext(t)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			data = []byte(strings.ReplaceAll(string(data), "${CLUSTER_NAME}", "test-cluster"))
			objs, err := controlplane.DecodeManifests(data)
			require.NoError(t, err)
			for _, obj := range objs {
				if obj.GetKind() != "EC2NodeClass" {
					continue
				}
				require.NoError(t, cp.Client.Create(ctx, obj, client.DryRunAll), "EC2NodeClass %s", obj.GetName())
			}
		})
	}
}

// runCases dry-runs each case's object so nothing is stored and names never
// collide; validation and defaulting still run in full.
func runCases(t *testing.T, cases []validationCase) {
	t.Helper()
	ctx := testContext(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cp.Client.Create(ctx, nodeClass(t, tc.patch), client.DryRunAll)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			requireRejected(t, err, tc.field, tc.msg)
		})
	}
}

// requireRejected asserts the API server refused the object as invalid and
// named the field with a message containing msg.
func requireRejected(t *testing.T, err error, field, msg string) {
	t.Helper()
	require.Error(t, err, "expected rejection on %s: %s", field, msg)
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status))
	var causes []metav1.StatusCause
	if details := status.Status().Details; details != nil {
		causes = details.Causes
	}
	for _, c := range causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	var got strings.Builder
	for _, c := range causes {
		fmt.Fprintf(&got, "\n  %s: %s", c.Field, c.Message)
	}
	t.Fatalf("no cause on %q containing %q; causes:%s", field, msg, got.String())
}

// nodeClass builds baseNodeClass with patch merged into its spec.
func nodeClass(t *testing.T, patch string) *unstructured.Unstructured {
	t.Helper()
	base := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(baseNodeClass), &base))
	if patch != "" {
		p := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(patch), &p), "patch %q", patch)
		base["spec"] = mergePatch(base["spec"].(map[string]any), p)
	}
	return &unstructured.Unstructured{Object: base}
}

// mergePatch applies a JSON merge patch (RFC 7386) to dst: maps merge, null
// removes a key, anything else replaces.
func mergePatch(dst, patch map[string]any) map[string]any {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			if dv, ok := dst[k].(map[string]any); ok {
				dst[k] = mergePatch(dv, pv)
			} else {
				dst[k] = pv
			}
		default:
			dst[k] = v
		}
	}
	return dst
}

// repeatTerms renders a YAML flow list of n items from a format taking the
// item index.
func repeatTerms(n int, format string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(format, i)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// repeatTags renders a YAML flow map of n distinct tags.
func repeatTags(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("k%d: v", i)
	}
	return "{" + strings.Join(items, ", ") + "}"
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
