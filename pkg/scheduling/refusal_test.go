package scheduling

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRefusalsAreTyped checks that every kind of refusal comes out with its
// kind and the figures a caller needs, and that the text is rendered from
// them.
func TestRefusalsAreTyped(t *testing.T) {
	gpu := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	limits := func(remaining, limit corev1.ResourceList) func(*NodePool) {
		return func(np *NodePool) { np.Remaining, np.Limits = remaining, limit }
	}
	q := resource.MustParse
	minTypes := NewRequirement(LabelInstanceType, OpExists)
	minTypes.MinValues = 20
	unavailable := stdTypes()
	for _, it := range unavailable {
		for i := range it.Offerings {
			it.Offerings[i].Available = false
		}
	}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	gp3 := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc}
	volumeNode := mkNode("n1", "8", "32Gi", nil, mkPod("old", "100m", "", withClaim("old-data")))
	volumeNode.VolumeLimits = map[string]int{"ebs.csi.aws.com": 1}
	spreadNode := mkNode("n1", "8", "32Gi", nil, mkPod("web-0", "100m", "", withLabels("app", "web")))
	matchFields := func(p *corev1.Pod) {
		affinity(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{nsr("metadata.name", corev1.NodeSelectorOpIn, "x")}}}}}
	}

	cases := []struct {
		name  string
		in    *Input
		kind  RefusalKind
		check func(t *testing.T, e PlacementError)
		text  string // part of the rendered reason
	}{
		{"taint", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes(), poolTaints(gpu))}},
			RefusalTaintNotTolerated, func(t *testing.T, e PlacementError) {
				require.NotNil(t, e.Taint)
				assert.Equal(t, gpu, *e.Taint)
			}, "did not tolerate taint gpu=true:NoSchedule"},
		{"requirement", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withNodeSelector(LabelArch, "arm64"))},
			NodePools: []*NodePool{mkPool("p", stdTypes(), poolReqs(NewRequirement(LabelArch, OpIn, "amd64")))}},
			RefusalRequirementMismatch, func(t *testing.T, e PlacementError) {
				assert.Equal(t, LabelArch, e.Key)
				assert.Equal(t, "NodePool", e.Owner)
				require.NotNil(t, e.NodeRequirement)
				require.NotNil(t, e.PodRequirement)
				assert.Equal(t, []string{"amd64"}, e.NodeRequirement.Values())
				assert.Equal(t, []string{"arm64"}, e.PodRequirement.Values())
			}, "kubernetes.io/arch In [arm64] not in NodePool's [amd64]"},
		{"unknown label", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withNodeSelector("example.com/team", "x"))},
			NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalUnknownLabel, func(t *testing.T, e PlacementError) {
				assert.Equal(t, "example.com/team", e.Key)
				assert.Nil(t, e.NodeRequirement)
				assert.Equal(t, []string{"x"}, e.PodRequirement.Values())
			}, `label "example.com/team" does not have known values on NodePool`},
		{"cpu limit", &Input{Pods: []*corev1.Pod{mkPod("a", "3", "1Gi")},
			NodePools: []*NodePool{mkPool("p", stdTypes(), limits(corev1.ResourceList{"cpu": q("2")}, corev1.ResourceList{"cpu": q("10")}))}},
			RefusalLimitExceeded, func(t *testing.T, e PlacementError) {
				assert.Equal(t, corev1.ResourceCPU, e.Resource)
				for name, want := range map[string]struct {
					got  *resource.Quantity
					want string
				}{"limit": {e.Limit, "10"}, "used": {e.Used, "8"}, "remaining": {e.Remaining, "2"}, "needed": {e.Needed, "4"}} {
					require.NotNil(t, want.got, name)
					assert.Zero(t, want.got.Cmp(q(want.want)), "%s: %s", name, want.got)
				}
			}, "exceed the nodepool's limits (cpu: needs 4, 2 left of 10)"},
		{"nodes limit", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")},
			NodePools: []*NodePool{mkPool("p", stdTypes(), limits(corev1.ResourceList{"nodes": q("0")}, corev1.ResourceList{"nodes": q("5")}))}},
			RefusalLimitExceeded, func(t *testing.T, e PlacementError) {
				assert.Equal(t, ResourceNodes, e.Resource)
				require.NotNil(t, e.Limit)
				assert.Zero(t, e.Limit.Cmp(q("5")))
			}, "nodepool limit on nodes reached (limit 5)"},
		{"no instance type", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withNodeSelector(LabelInstanceType, "m.999x"))},
			NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalNoInstanceType, nil, "no instance type matches"},
		{"no offering", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")}, NodePools: []*NodePool{mkPool("p", unavailable)}},
			RefusalNoOffering, nil, "no instance type with an available offering"},
		{"resources", &Input{Pods: []*corev1.Pod{mkPod("a", "100", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalResources, func(t *testing.T, e PlacementError) {
				cpu := e.Requests[corev1.ResourceCPU]
				assert.Zero(t, cpu.Cmp(q("100")))
			}, "no instance type has room for requests cpu=100, memory=1Gi"},
		{"min values", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes(), poolReqs(minTypes))}},
			RefusalMinValues, func(t *testing.T, e PlacementError) {
				assert.Equal(t, LabelInstanceType, e.Key)
				assert.Equal(t, 20, e.MinValues)
			}, "minValues 20 of node.kubernetes.io/instance-type not met"},
		{"host port", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withHostPort(80))},
			Nodes: []*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("x", "100m", "", withHostPort(80)))}},
			RefusalHostPort, func(t *testing.T, e PlacementError) {
				assert.Equal(t, int32(80), e.HostPort)
				assert.Equal(t, "TCP", e.Protocol)
				assert.Equal(t, "n1", e.Node)
				assert.Equal(t, 1, e.Nodes)
			}, "none of 1 fit (first: n1: host port 80/TCP in use)"},
		{"hostname", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withNodeSelector(LabelHostname, "gone"))}, NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalHostname, func(t *testing.T, e PlacementError) { assert.Equal(t, []string{"gone"}, e.PodRequirement.Values()) },
			"which a new node cannot have"},
		{"volume", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withClaim("data"))}, NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalVolume, func(t *testing.T, e PlacementError) { assert.Equal(t, "data", e.Volume) },
			`persistentvolumeclaim "data" not found`},
		{"volume zone", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withClaim("data"))},
			NodePools:              []*NodePool{mkPool("p", stdTypes(), poolReqs(NewRequirement(LabelZone, OpIn, "zone-a")))},
			PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data", "gp3", "pv-1")},
			PersistentVolumes:      []*corev1.PersistentVolume{pvInZone("pv-1", LabelZone, "zone-b")}, StorageClasses: []*storagev1.StorageClass{gp3}},
			RefusalVolumeZone, func(t *testing.T, e PlacementError) {
				assert.Equal(t, "data", e.Volume)
				assert.Equal(t, LabelZone, e.Key)
				assert.Equal(t, []string{"zone-b"}, e.PodRequirement.Values())
				assert.Equal(t, []string{"zone-a"}, e.NodeRequirement.Values())
			}, "(from volume data)"},
		{"volume limit", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withClaim("data"))}, Nodes: []*ExistingNode{volumeNode},
			PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data", "gp3", ""), pvc("old-data", "gp3", "")},
			StorageClasses:         []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com"}}},
			RefusalVolumeLimit, func(t *testing.T, e PlacementError) {
				assert.Equal(t, "ebs.csi.aws.com", e.Driver)
				assert.Equal(t, 1, e.AttachLimit)
			}, "volume attach limit of ebs.csi.aws.com reached (1)"},
		{"topology", &Input{Pods: []*corev1.Pod{mkPod("web-1", "1", "1Gi", withLabels("app", "web"),
			withSpread(LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"app": "web"}))}, Nodes: []*ExistingNode{spreadNode}},
			RefusalTopology, func(t *testing.T, e PlacementError) { assert.Equal(t, LabelHostname, e.Key) },
			"topology spread on kubernetes.io/hostname (maxSkew 1) would be exceeded"},
		{"affinity", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withPodAffinity(term(LabelZone, map[string]string{"app": "db"})))},
			NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalAffinity, func(t *testing.T, e PlacementError) { assert.Equal(t, LabelZone, e.Key) },
			"no matching pod is scheduled yet"},
		{"no capacity", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")}}, RefusalNoCapacity, nil, "no NodePools and no existing nodes"},
		{"invalid pod", &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", matchFields)}, NodePools: []*NodePool{mkPool("p", stdTypes())}},
			RefusalInvalidPod, nil, "matchFields"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := solveOK(t, tc.in)
			pl := res.Placements[0]
			require.False(t, pl.Scheduled())
			require.Len(t, pl.Errors, 1, pl.Why())
			e := pl.Errors[0]
			assert.Equal(t, tc.kind, e.Kind, e.Reason)
			assert.Equal(t, e.Message(), e.Reason, "the reason is rendered from the fields")
			assert.Contains(t, e.Reason, tc.text)
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}
