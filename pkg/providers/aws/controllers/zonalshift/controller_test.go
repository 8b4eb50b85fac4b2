package zonalshift_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/zonalshift"
	shifts "github.com/karpenter-go/karpenter/pkg/providers/aws/zonalshift"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var (
	cp    *controlplane.ControlPlane
	local *awslocal.Local
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{"1.34"}}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

type recorder struct{ events []string }

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	np := obj.(*v1.NodePool)
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", np.Name, eventType, reason, fmt.Sprintf(messageFmt, args...)))
}

func (r *recorder) take() []string {
	out := r.events
	r.events = nil
	sort.Strings(out)
	return out
}

func pool(name, class string, zones ...string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
	if len(zones) > 0 {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones})
	}
	return np
}

// TestZonalShiftsReachNodePools runs the provider and the controller
// against the local AWS's ARC: the cluster must be registered for the
// provider to start; a zonal shift away from use1-az1 (us-east-1a) is seen
// as shifted and tells the NodePools that can launch in us-east-1a, and
// not the one pinned to us-east-1b; a pass without change says nothing;
// when the shift is cancelled the same NodePools hear it cleared; a shift
// that expires stops counting at its expiry; an autoshift counts like a
// zonal shift once the resource has autoshift enabled.
func TestZonalShiftsReachNodePools(t *testing.T) {
	ctx := context.Background()
	_, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: "zs"})
	require.NoError(t, err)
	cfg := local.Config(ctx)
	eksAPI, arcAPI := eks.NewFromConfig(cfg), arczonalshift.NewFromConfig(cfg)
	clk := clocktesting.NewFakeClock(time.Now())

	_, err = shifts.Discover(ctx, eksAPI, arcAPI, "zs", clk)
	require.ErrorContains(t, err, "cluster not registered to Zonal Shift", "zonal shift not enabled on the cluster")
	arn, err := local.EnableZonalShift(ctx, "zs", false)
	require.NoError(t, err)
	p, err := shifts.Discover(ctx, eksAPI, arcAPI, "zs", clk)
	require.NoError(t, err)
	require.Equal(t, arn, p.ClusterARN())
	require.Empty(t, p.ShiftedZoneIDs())

	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "zs"}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-zs",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "zs"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "zs"}}},
	}}
	require.NoError(t, cp.Client.Create(ctx, class))
	class.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"}, {ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2"}}
	require.NoError(t, cp.Client.Status().Update(ctx, class))
	for _, np := range []*v1.NodePool{pool("any-zone", "zs"), pool("zone-a", "zs", "us-east-1a"), pool("zone-b", "zs", "us-east-1b")} {
		require.NoError(t, cp.Client.Create(ctx, np))
	}

	rec := &recorder{}
	c := zonalshift.NewController(cp.Client, p, rec, 0, logr.Discard())
	require.NoError(t, c.Pass(ctx))
	require.Empty(t, rec.take(), "no shift, no event")

	z, err := local.StartZonalShift(ctx, arn, "use1-az1", 30*time.Minute)
	require.NoError(t, err)
	require.NoError(t, c.Pass(ctx))
	require.Equal(t, []string{"use1-az1"}, p.ShiftedZoneIDs())
	require.True(t, p.IsShifted("use1-az1"))
	require.False(t, p.IsShifted("use1-az2"))
	active := "Warning ZonalShiftActive: Zonal shift detected: offerings in zone us-east-1a (use1-az1) are unavailable for this NodePool"
	require.Equal(t, []string{"any-zone " + active, "zone-a " + active}, rec.take())
	require.NoError(t, c.Pass(ctx))
	require.Empty(t, rec.take(), "no change, no event")

	_, err = local.CancelZonalShift(z.ID)
	require.NoError(t, err)
	require.NoError(t, c.Pass(ctx))
	require.Empty(t, p.ShiftedZoneIDs())
	cleared := "Normal ZonalShiftCleared: Zonal shift cleared: offerings in zone us-east-1a (use1-az1) are restored for this NodePool"
	require.Equal(t, []string{"any-zone " + cleared, "zone-a " + cleared}, rec.take())

	// A shift past its expiry no longer counts, even before ARC lists it
	// as expired.
	_, err = local.StartZonalShift(ctx, arn, "use1-az2", time.Minute)
	require.NoError(t, err)
	require.NoError(t, c.Pass(ctx))
	require.True(t, p.IsShifted("use1-az2"))
	require.Len(t, rec.take(), 2, "any-zone and zone-b")
	clk.Step(2 * time.Minute)
	require.False(t, p.IsShifted("use1-az2"))

	// An autoshift applies once the resource opts in.
	require.NoError(t, local.StartAutoshift(ctx, "use1-az1"))
	defer local.EndAutoshift("use1-az1")
	require.NoError(t, p.Update(ctx))
	require.False(t, p.IsShifted("use1-az1"), "autoshift is off on the cluster")
	_, err = local.EnableZonalShift(ctx, "zs", true)
	require.NoError(t, err)
	require.NoError(t, p.Update(ctx))
	require.True(t, p.IsShifted("use1-az1"))
}
