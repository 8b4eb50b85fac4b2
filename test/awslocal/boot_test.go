package awslocal_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const al2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "the user's own script"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: test-cluster
    apiServerEndpoint: https://test-cluster.example.com
    certificateAuthority: Y2E=
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 42
      clusterDNS:
      - 10.100.0.10
      kubeReserved:
        cpu: 70m
        memory: 442Mi
      evictionHard:
        memory.available: 5%
    flags:
    - --node-labels=karpenter.sh/nodepool=default,karpenter.sh/capacity-type=on-demand,team=ml
    - --register-with-taints=dedicated=ml:NoSchedule,karpenter.sh/unregistered:NoExecute

--//--
`

const bottlerocketUserData = `[settings]
[settings.kubernetes]
cluster-name = "test-cluster"
api-server = "https://test-cluster.example.com"
cluster-certificate = "Y2E="
max-pods = 29 # from the NodeClass

[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "storage"
team = "storage"

[settings.kubernetes.node-taints]
"dedicated" = ["storage:NoSchedule"]

[settings.kubernetes.kube-reserved]
cpu = "80m"
memory = "893Mi"
`

const al2UserData = `#!/bin/bash -xe
exec > >(tee /var/log/user-data.log) 2>&1
/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://test-cluster.example.com' --b64-cluster-ca 'Y2E=' \
--use-max-pods false \
--kubelet-extra-args '--node-labels="karpenter.sh/nodepool=web,team=web" --register-with-taints="dedicated=web:NoExecute" --max-pods=17'
`

func withUserData(image, userData string) envOption {
	return func(d *ec2types.RequestLaunchTemplateData) {
		d.ImageId = aws.String(image)
		d.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(userData)))
	}
}

func image(t *testing.T, s awslocal.Series) string {
	img, ok := local.LatestImage(s)
	require.True(t, ok, s.String())
	return img.ID
}

// kubeletLabels are the labels the kubelet (and the cloud's node
// controller) put on every Node, plus kwok's marker.
func kubeletLabels(inst ec2types.Instance) map[string]string {
	return map[string]string{
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": *inst.PrivateDnsName,
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
		"node.kubernetes.io/instance-type": string(inst.InstanceType),
		"topology.kubernetes.io/zone":      *inst.Placement.AvailabilityZone, "topology.kubernetes.io/region": "us-east-1",
		"kwok.x-k8s.io/node": "fake",
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestBootRegistersNodesFromUserData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{SkipCRDs: true, Kwok: true})
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	booter := local.Boot(ctx, cp.Client, awslocal.BootOptions{ClusterName: "test-cluster"})
	t.Cleanup(booter.Stop)

	launch := func(t *testing.T, opt envOption, instanceType string) ec2types.Instance {
		t.Helper()
		e := newFleetEnv(t, opt)
		out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides(instanceType))
		require.NoError(t, err)
		require.Len(t, instanceIDs(out), 1, "%v", out.Errors)
		desc, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: instanceIDs(out)})
		require.NoError(t, err)
		return desc.Reservations[0].Instances[0]
	}
	nodeOf := func(t *testing.T, inst ec2types.Instance) *corev1.Node {
		t.Helper()
		node := &corev1.Node{}
		require.Eventually(t, func() bool {
			// The booter records its result once the Node is registered.
			r, ok := booter.Result(*inst.InstanceId)
			return ok && r.Node == *inst.PrivateDnsName && cp.Client.Get(ctx, client.ObjectKey{Name: r.Node}, node) == nil
		}, 30*time.Second, 100*time.Millisecond, "no node for %s: %+v", *inst.InstanceId, result(booter, *inst.InstanceId))
		return node
	}
	mi := func(n int64) resource.Quantity { return *resource.NewQuantity(n*1024*1024, resource.BinarySI) }
	requireQty := func(t *testing.T, want resource.Quantity, got resource.Quantity, what string) {
		t.Helper()
		require.Zerof(t, want.Cmp(got), "%s: want %s, got %s", what, want.String(), got.String())
	}

	t.Run("AL2023 nodeadm NodeConfig, then termination", func(t *testing.T) {
		inst := launch(t, withUserData(image(t, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"}), al2023UserData), "m5.large")
		node := nodeOf(t, inst)
		require.Equal(t, "aws:///us-east-1a/"+*inst.InstanceId, node.Spec.ProviderID)
		require.Equal(t, merge(kubeletLabels(inst), map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand", "team": "ml"}), node.Labels)
		require.Equal(t, []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}, userTaints(node))
		// m5.large: 2 vCPUs, 8 GiB less the 7.5% VM overhead; pods from maxPods.
		mem := int64(8192 - 615)
		requireQty(t, resource.MustParse("2"), node.Status.Capacity[corev1.ResourceCPU], "cpu")
		requireQty(t, mi(mem), node.Status.Capacity[corev1.ResourceMemory], "memory")
		requireQty(t, resource.MustParse("42"), node.Status.Capacity[corev1.ResourcePods], "pods")
		requireQty(t, resource.MustParse("80Gi"), node.Status.Capacity[corev1.ResourceEphemeralStorage], "ephemeral-storage")
		requireQty(t, resource.MustParse("1930m"), node.Status.Allocatable[corev1.ResourceCPU], "allocatable cpu")
		evict := resource.NewQuantity((mem*1024*1024*5+99)/100, resource.BinarySI)
		wantMem := mi(mem - 442)
		wantMem.Sub(*evict)
		requireQty(t, wantMem, node.Status.Allocatable[corev1.ResourceMemory], "allocatable memory")
		// kwok plays the kubelet from here on: the node goes Ready.
		require.Eventually(t, func() bool {
			n := &corev1.Node{}
			if cp.Client.Get(ctx, client.ObjectKeyFromObject(node), n) != nil {
				return false
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}, 30*time.Second, 200*time.Millisecond, "kwok keeps the node Ready")

		_, err := ec2Client(t).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{*inst.InstanceId}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{}))
		}, 30*time.Second, 100*time.Millisecond, "the terminated instance's node goes away")
		// The booter marks the result gone just after its delete returns,
		// so the node can be seen gone a moment before the mark.
		require.Eventually(t, func() bool {
			r, _ := booter.Result(*inst.InstanceId)
			return r.Gone
		}, 5*time.Second, 50*time.Millisecond, "the boot result is marked gone")
	})

	t.Run("Bottlerocket TOML", func(t *testing.T) {
		inst := launch(t, withUserData(image(t, awslocal.Series{Family: awslocal.FamilyBottlerocket, KubernetesVersion: "1.33", Arch: "x86_64"}), bottlerocketUserData), "c5.xlarge")
		node := nodeOf(t, inst)
		require.Equal(t, merge(kubeletLabels(inst), map[string]string{"karpenter.sh/nodepool": "storage", "team": "storage"}), node.Labels)
		require.Equal(t, []corev1.Taint{{Key: "dedicated", Value: "storage", Effect: corev1.TaintEffectNoSchedule}}, userTaints(node))
		requireQty(t, resource.MustParse("29"), node.Status.Capacity[corev1.ResourcePods], "pods")
		requireQty(t, resource.MustParse("4"), node.Status.Capacity[corev1.ResourceCPU], "cpu")
		requireQty(t, resource.MustParse("3920m"), node.Status.Allocatable[corev1.ResourceCPU], "allocatable cpu")
		r, _ := booter.Result(*inst.InstanceId)
		require.Equal(t, awslocal.FamilyBottlerocket, r.Family)
	})

	t.Run("AL2 bootstrap.sh", func(t *testing.T) {
		inst := launch(t, withUserData(image(t, awslocal.Series{Family: awslocal.FamilyAL2, KubernetesVersion: "1.33", Arch: "x86_64"}), al2UserData), "m5.large")
		node := nodeOf(t, inst)
		require.Equal(t, merge(kubeletLabels(inst), map[string]string{"karpenter.sh/nodepool": "web", "team": "web"}), node.Labels)
		require.Equal(t, []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoExecute}}, userTaints(node))
		requireQty(t, resource.MustParse("17"), node.Status.Capacity[corev1.ResourcePods], "pods")
	})

	t.Run("wrong user data makes no node", func(t *testing.T) {
		al2023 := image(t, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
		cases := []struct {
			name, image, userData, reason string
		}{
			{"Bottlerocket TOML on an AL2023 AMI", al2023, bottlerocketUserData, "no NodeConfig"},
			{"a label the kubelet refuses", al2023, replace(al2023UserData, "team=ml", "node-role.kubernetes.io/worker=true"), "node-role.kubernetes.io/worker"},
			{"another cluster", al2023, replace(al2023UserData, "name: test-cluster", "name: other-cluster"), "other-cluster"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				inst := launch(t, withUserData(tc.image, tc.userData), "m5.large")
				require.Eventually(t, func() bool { _, ok := booter.Result(*inst.InstanceId); return ok }, 30*time.Second, 100*time.Millisecond)
				r, _ := booter.Result(*inst.InstanceId)
				require.Empty(t, r.Node)
				require.Contains(t, r.Error, tc.reason)
				err := cp.Client.Get(ctx, client.ObjectKey{Name: *inst.PrivateDnsName}, &corev1.Node{})
				require.True(t, apierrors.IsNotFound(err), "no node registered: %v", err)
			})
		}
	})
}

// TestBootRegistersFleetInstancesAtOnce: the instances CreateFleet launches
// register as soon as the launch returns, not at the booter's next scan
// nor a scan later, as the kwok provider's Nodes appear with their launch.
func TestBootRegistersFleetInstancesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{SkipCRDs: true, Kwok: true})
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	// A scan a minute: only the launch itself can make the booter look
	// within the test's wait.
	booter := local.Boot(ctx, cp.Client, awslocal.BootOptions{ClusterName: "test-cluster", Interval: time.Minute})
	t.Cleanup(booter.Stop)
	al2023 := image(t, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})

	for _, tc := range []struct {
		name  string
		count int32
	}{
		{"one instance", 1},
		{"a fleet of four", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFleetEnv(t, withUserData(al2023, al2023UserData))
			out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"), func(in *ec2.CreateFleetInput) {
				in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(tc.count)
			})
			require.NoError(t, err)
			ids := instanceIDs(out)
			require.Len(t, ids, int(tc.count), "%v", out.Errors)
			for _, id := range ids {
				require.Eventually(t, func() bool {
					r, ok := booter.Result(id)
					return ok && r.Node != "" && cp.Client.Get(ctx, client.ObjectKey{Name: r.Node}, &corev1.Node{}) == nil
				}, 20*time.Second, 50*time.Millisecond, "no node for %s: %+v", id, result(booter, id))
			}
		})
	}
}

// userTaints are the node's taints less node.kubernetes.io/not-ready,
// which the API server's TaintNodesByCondition admission adds to every
// Node a kubelet creates.
func userTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			out = append(out, t)
		}
	}
	return out
}

func result(b *awslocal.Booter, id string) awslocal.BootResult {
	r, _ := b.Result(id)
	return r
}

func replace(s, old, new string) string {
	out := ""
	for {
		i := indexOf(s, old)
		if i < 0 {
			return out + s
		}
		out += s[:i] + new
		s = s[i+len(old):]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
