package awslocal

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestParseUserData(t *testing.T) {
	i64 := func(n int64) *int64 { return &n }
	cases := []struct {
		name, family, data string
		want               *kubeletConfig
		err                string
	}{
		{name: "bare NodeConfig, config taints and later documents win", family: FamilyAL2023, data: `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 10
      registerWithTaints:
      - key: a
        effect: NoSchedule
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: c1
  kubelet:
    config:
      maxPods: 20
    flags: ["--node-labels", "x=1", "--max-pods=30"]
`, want: &kubeletConfig{Family: FamilyAL2023, ClusterName: "c1", Labels: map[string]string{"x": "1"}, MaxPods: i64(30),
			Taints: []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}}},
		{name: "nodeadm ignores shell parts", family: FamilyAL2023, data: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho hi\n--B--\n", err: "no NodeConfig"},
		{name: "bad taint effect", family: FamilyAL2023, data: "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--register-with-taints=a=b:Never']\n", err: "effect"},
		{name: "Bottlerocket inline and dotted keys", family: FamilyBottlerocket, data: `settings.kubernetes.max-pods = 7
settings.kubernetes.node-labels = { "a/b" = "c", 'lit' = 'v # not a comment' }
[settings.kubernetes.node-taints]
k = "v:NoExecute"
k2 = [":PreferNoSchedule", "w:NoSchedule"]
[settings.kubernetes.eviction-hard]
"memory.available" = "10%"
`, want: &kubeletConfig{Family: FamilyBottlerocket, Labels: map[string]string{"a/b": "c", "lit": "v # not a comment"}, MaxPods: i64(7),
			Taints:       []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}, {Key: "k2", Effect: corev1.TaintEffectPreferNoSchedule}, {Key: "k2", Value: "w", Effect: corev1.TaintEffectNoSchedule}},
			KubeReserved: map[string]string{}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{"memory.available": "10%"}}},
		{name: "Bottlerocket without kubernetes settings", family: FamilyBottlerocket, data: "[settings.host-containers.admin]\nenabled = true\n", err: "no [settings.kubernetes]"},
		{name: "Bottlerocket max-pods as a string", family: FamilyBottlerocket, data: "[settings.kubernetes]\nmax-pods = \"7\"\n", err: "not an integer"},
		{name: "AL2 in MIME with reserved and eviction flags", family: FamilyAL2, data: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n/etc/eks/bootstrap.sh prod --kubelet-extra-args \"--kube-reserved=cpu=80m,memory=1Gi --eviction-hard=memory.available<200Mi,nodefs.available<5% --node-labels=a=b\"\n--B--\n",
			want: &kubeletConfig{Family: FamilyAL2, ClusterName: "prod", Labels: map[string]string{"a": "b"}, KubeReserved: map[string]string{"cpu": "80m", "memory": "1Gi"},
				SystemReserved: map[string]string{}, EvictionHard: map[string]string{"memory.available": "200Mi", "nodefs.available": "5%"}}},
		{name: "AL2 without bootstrap.sh", family: FamilyAL2, data: "#!/bin/bash\n# /etc/eks/bootstrap.sh is commented out\necho hi\n", err: "no /etc/eks/bootstrap.sh"},
		{name: "unknown image detects the shape", family: "", data: "[settings.kubernetes]\ncluster-name = \"x\"\n", want: &kubeletConfig{Family: FamilyBottlerocket, ClusterName: "x",
			Labels: map[string]string{}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}}},
		{name: "no bootstrap at all", family: "", data: "#!/bin/bash\necho hello\n", err: "no node bootstrap"},
		{name: "nodeadm flags quoted as Karpenter writes them", family: FamilyAL2023, data: "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--node-labels=\"karpenter.sh/nodepool=web,team=web\"']\n",
			want: &kubeletConfig{Family: FamilyAL2023, Labels: map[string]string{"karpenter.sh/nodepool": "web", "team": "web"}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}}},
		{name: "kubelet-allowed kubernetes.io labels pass", family: FamilyAL2023, data: "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--node-labels=node.kubernetes.io/lifecycle=spot,topology.kubernetes.io/zone=z']\n",
			want: &kubeletConfig{Family: FamilyAL2023, Labels: map[string]string{"node.kubernetes.io/lifecycle": "spot", "topology.kubernetes.io/zone": "z"}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}}},
		{name: "restricted k8s.io label", family: FamilyAL2023, data: "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--node-labels=example.k8s.io/x=y']\n", err: "example.k8s.io/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseUserData(tc.family, []byte(tc.data))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseTOMLRefusesWhatItCannotRead(t *testing.T) {
	for _, doc := range []string{"[[a]]\n", "a = \"\"\"x\"\"\"\n", "a = [1,\n2]\n", "a = 1\na = 2\n", "a = 1\n[a]\n", "a = nope\n", "[a\n"} {
		_, err := parseTOML([]byte(doc))
		require.Error(t, err, doc)
	}
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(` a 'b c' "d \"e\"" f\ g; ignored`)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b c", `d "e"`, "f g"}, got)
	_, err = shellWords(`'open`)
	require.Error(t, err)
}
