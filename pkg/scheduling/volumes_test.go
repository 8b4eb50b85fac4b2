package scheduling

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func withClaim(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

func pvc(name, sc, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(sc), VolumeName: volume}}
}

func pvInZone(name, key, zone string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{nsr(key, corev1.NodeSelectorOpIn, zone)}}}}}}}
}

func TestVolumes(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	sc := func(name string, mode storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
		s := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &mode}
		if len(zones) > 0 {
			s.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: LabelZone, Values: zones}}}}
		}
		return s
	}
	cases := []struct {
		name  string
		pvcs  []*corev1.PersistentVolumeClaim
		pvs   []*corev1.PersistentVolume
		scs   []*storagev1.StorageClass
		zones []string // expected zone requirement of the claim; nil = unplaced
		why   string
	}{
		{"bound PV pins zone", []*corev1.PersistentVolumeClaim{pvc("data", "gp3", "pv-1")}, []*corev1.PersistentVolume{pvInZone("pv-1", LabelZone, "zone-b")},
			[]*storagev1.StorageClass{sc("gp3", wffc)}, []string{"zone-b"}, ""},
		{"EBS zone alias", []*corev1.PersistentVolumeClaim{pvc("data", "gp3", "pv-1")}, []*corev1.PersistentVolume{pvInZone("pv-1", "topology.ebs.csi.aws.com/zone", "zone-c")},
			[]*storagev1.StorageClass{sc("gp3", wffc)}, []string{"zone-c"}, ""},
		{"hostname affinity of local PV ignored", []*corev1.PersistentVolumeClaim{pvc("data", "local", "pv-1")}, []*corev1.PersistentVolume{pvInZone("pv-1", LabelHostname, "old-node")},
			[]*storagev1.StorageClass{sc("local", wffc)}, []string{"zone-a", "zone-b", "zone-c"}, ""},
		{"unbound WFFC allowed topologies", []*corev1.PersistentVolumeClaim{pvc("data", "zonal", "")}, nil,
			[]*storagev1.StorageClass{sc("zonal", wffc, "zone-a")}, []string{"zone-a"}, ""},
		{"unbound immediate class adds nothing", []*corev1.PersistentVolumeClaim{pvc("data", "zonal", "")}, nil,
			[]*storagev1.StorageClass{sc("zonal", immediate, "zone-a")}, []string{"zone-a", "zone-b", "zone-c"}, ""},
		{"missing claim", nil, nil, nil, nil, `persistentvolumeclaim "data" not found`},
		{"missing class", []*corev1.PersistentVolumeClaim{pvc("data", "nope", "")}, nil, nil, nil, `storageclass "nope" not found`},
		{"PV zone nobody offers", []*corev1.PersistentVolumeClaim{pvc("data", "gp3", "pv-1")}, []*corev1.PersistentVolume{pvInZone("pv-1", LabelZone, "zone-q")},
			[]*storagev1.StorageClass{sc("gp3", wffc)}, nil, "no instance type matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withClaim("data"))}, NodePools: []*NodePool{mkPool("p", stdTypes())},
				PersistentVolumeClaims: tc.pvcs, PersistentVolumes: tc.pvs, StorageClasses: tc.scs}
			res := solveOK(t, in)
			p := res.Placements[0]
			if tc.zones == nil {
				require.False(t, p.Scheduled())
				assert.Contains(t, p.Why(), tc.why)
				return
			}
			require.True(t, p.Scheduled(), p.Why())
			assert.Equal(t, tc.zones, res.NewNodeClaims[p.NodeClaim].Requirements.Get(LabelZone).Values())
		})
	}
}

func TestVolumeAttachLimit(t *testing.T) {
	gp3 := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com"}
	old := mkPod("old", "100m", "", withClaim("old-data"))
	n := mkNode("n1", "8", "32Gi", nil, old)
	n.VolumeLimits = map[string]int{"ebs.csi.aws.com": 1}
	in := &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withClaim("data"))}, Nodes: []*ExistingNode{n},
		NodePools:              []*NodePool{mkPool("p", stdTypes())},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data", "gp3", ""), pvc("old-data", "gp3", "")},
		StorageClasses:         []*storagev1.StorageClass{gp3}}
	res := solveOK(t, in)
	assert.Equal(t, "claim:0", where(res)["a"])
	n.VolumeLimits["ebs.csi.aws.com"] = 2
	res = solveOK(t, in)
	assert.Equal(t, "node:n1", where(res)["a"])
}

func TestMissingDaemonOnStartingNode(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1")}}}}
	starting := mkNode("n1", "2", "8Gi", nil)
	starting.Initialized = false
	in := &Input{Pods: []*corev1.Pod{mkPod("a", "1500m", "1Gi")}, Nodes: []*ExistingNode{starting}, DaemonSets: []*appsv1.DaemonSet{ds},
		NodePools: []*NodePool{mkPool("p", stdTypes())}}
	res := solveOK(t, in)
	assert.Equal(t, "claim:0", where(res)["a"], "the daemon will take 1 of the 2 cpus")
	// once the daemon pod is bound, its request is already counted once
	dp := mkPod("agent-xyz", "1", "", withNS("kube-system"))
	dp.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	starting.Pods = []*corev1.Pod{dp}
	in.Pods = []*corev1.Pod{mkPod("b", "900m", "1Gi")}
	res = solveOK(t, in)
	assert.Equal(t, "node:n1", where(res)["b"])
}
