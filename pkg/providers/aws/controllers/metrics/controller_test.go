package metrics_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	awsmetrics "github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/metrics"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, controlplane.Options{}, &cp)) }

// byPool answers GetInstanceTypes from a table per NodePool name.
type byPool map[string][]*cloudprovider.InstanceType

func (b byPool) GetInstanceTypes(_ context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, ok := b[np.Name]
	if !ok {
		return nil, errors.New("no such class")
	}
	return its, nil
}

type unavailable map[cloudprovider.OfferingKey]bool

func (u unavailable) IsUnavailable(k cloudprovider.OfferingKey) bool { return u[k] }

func instanceType(name string, cpu, mem string, offerings ...cloudprovider.Offering) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{Name: name, Offerings: offerings,
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
}

func nodePool(t *testing.T, name string) {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{}
	require.NoError(t, cp.Client.Create(context.Background(), np))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), np) })
}

func TestPublish(t *testing.T) {
	ctx := context.Background()
	nodePool(t, "a")
	nodePool(t, "b")
	nodePool(t, "broken")
	types := byPool{
		"a": {instanceType("m5.large", "2", "8Gi",
			cloudprovider.Offering{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true},
			cloudprovider.Offering{Zone: "us-east-1a", CapacityType: "spot", Price: 0.04, Available: true},
			cloudprovider.Offering{Zone: "us-east-1b", CapacityType: "spot", Price: 0.05, Available: false},
		)},
		// b sees m5.large spot in 1b available (a reservation, say) and
		// cheaper on-demand: any pool that can launch it makes it available.
		"b": {instanceType("m5.large", "2", "8Gi",
			cloudprovider.Offering{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.09, Available: true},
			cloudprovider.Offering{Zone: "us-east-1b", CapacityType: "spot", Price: 0.05, Available: true},
		), instanceType("c5.xlarge", "4", "8Gi",
			cloudprovider.Offering{Zone: "us-east-1a", CapacityType: "spot", Price: 0.07, Available: true},
		)},
	}
	ice := unavailable{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}: true}
	c := awsmetrics.NewController(cp.Client, types, ice, logr.Discard())

	// A stale series from an earlier pass must go.
	metrics.InstanceTypeOfferingAvailable.WithLabelValues("gone.large", "spot", "us-east-1a").Set(1)
	n, err := c.Publish(ctx)
	require.Equal(t, 4, n)
	require.ErrorContains(t, err, "nodepool broken", "a pool that cannot list is reported, the others still publish")

	tests := []struct {
		it, ct, zone     string
		available, price float64
	}{
		{"m5.large", "on-demand", "us-east-1a", 1, 0.09},
		{"m5.large", "spot", "us-east-1a", 0, 0.04}, // in the insufficient-capacity cache
		{"m5.large", "spot", "us-east-1b", 1, 0.05},
		{"c5.xlarge", "spot", "us-east-1a", 1, 0.07},
	}
	for _, tt := range tests {
		require.Equal(t, tt.available, testutil.ToFloat64(metrics.InstanceTypeOfferingAvailable.WithLabelValues(tt.it, tt.ct, tt.zone)), "%+v", tt)
		require.InDelta(t, tt.price, testutil.ToFloat64(metrics.InstanceTypeOfferingPriceEstimate.WithLabelValues(tt.it, tt.ct, tt.zone)), 1e-9, "%+v", tt)
	}
	require.Equal(t, len(tests), testutil.CollectAndCount(metrics.InstanceTypeOfferingAvailable), "only current offerings have series")
	require.Equal(t, 2.0, testutil.ToFloat64(metrics.InstanceTypeCPUCores.WithLabelValues("m5.large")))
	require.Equal(t, 4.0, testutil.ToFloat64(metrics.InstanceTypeCPUCores.WithLabelValues("c5.xlarge")))
	require.Equal(t, float64(8<<30), testutil.ToFloat64(metrics.InstanceTypeMemoryBytes.WithLabelValues("m5.large")))
}
