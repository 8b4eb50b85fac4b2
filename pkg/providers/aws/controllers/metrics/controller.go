// Package metrics publishes, every minute, the instance-type and offering
// gauges of the AWS provider (upstream's metrics controller): for every
// offering a NodePool can launch, whether it is available now and its price
// estimate, and each instance type's vCPUs and memory. Dashboards read them
// to show what capacity and prices the controller sees.
package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Period is how often the gauges are recomputed, as upstream. Until a pass
// finds any offering (at start the EC2NodeClasses are not resolved yet) it
// is EmptyPeriod, so dashboards fill within seconds of a start.
const (
	Period      = time.Minute
	EmptyPeriod = 10 * time.Second
)

// InstanceTypes is the part of the cloud provider the controller reads.
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*cloudprovider.InstanceType, error)
}

// Unavailable reports offerings the insufficient-capacity cache holds.
type Unavailable interface {
	IsUnavailable(cloudprovider.OfferingKey) bool
}

// Controller recomputes the gauges every Period.
type Controller struct {
	kube        client.Client
	types       InstanceTypes
	unavailable Unavailable
	log         logr.Logger
}

// NewController returns the metrics controller; unavailable may be nil.
func NewController(kube client.Client, types InstanceTypes, unavailable Unavailable, log logr.Logger) *Controller {
	return &Controller{kube: kube, types: types, unavailable: unavailable, log: log}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "cloudprovider.metrics" }

// Register adds the periodic publisher to mgr (leader only, like every
// runnable that does not say otherwise).
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			n, err := c.Publish(ctx)
			if err != nil && ctx.Err() == nil {
				c.log.Error(err, "publishing instance type metrics")
			}
			wait := Period
			if n == 0 {
				wait = EmptyPeriod
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}))
}

type offeringKey struct{ instanceType, capacityType, zone string }

type offeringValue struct {
	available bool
	price     float64
}

// Publish recomputes every gauge from the NodePools' instance types and
// returns how many offerings it published. Series of offerings no NodePool
// can launch any more are dropped. A NodePool whose instance types cannot
// be listed keeps no series of its own this pass.
func (c *Controller) Publish(ctx context.Context) (int, error) {
	var pools v1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return 0, fmt.Errorf("listing nodepools: %w", err)
	}
	offerings := map[offeringKey]offeringValue{}
	cpu := map[string]float64{}
	memory := map[string]float64{}
	var firstErr error
	for i := range pools.Items {
		its, err := c.types.GetInstanceTypes(ctx, &pools.Items[i])
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("instance types of nodepool %s: %w", pools.Items[i].Name, err)
			}
			continue
		}
		for _, it := range its {
			if q, ok := it.Capacity[corev1.ResourceCPU]; ok {
				cpu[it.Name] = float64(q.MilliValue()) / 1000
			}
			if q, ok := it.Capacity[corev1.ResourceMemory]; ok {
				memory[it.Name] = float64(q.Value())
			}
			for _, o := range it.Offerings {
				k := offeringKey{it.Name, o.CapacityType, o.Zone}
				available := o.Available && (c.unavailable == nil || !c.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}))
				v, seen := offerings[k]
				switch {
				case !seen:
					v = offeringValue{available: available, price: o.Price}
				default:
					// Pools may see one offering differently (a reservation,
					// an overlay): available if any can launch it, at the
					// lowest price any would pay.
					v.available = v.available || available
					v.price = min(v.price, o.Price)
				}
				offerings[k] = v
			}
		}
	}
	metrics.InstanceTypeOfferingAvailable.Reset()
	metrics.InstanceTypeOfferingPriceEstimate.Reset()
	metrics.InstanceTypeCPUCores.Reset()
	metrics.InstanceTypeMemoryBytes.Reset()
	for k, v := range offerings {
		avail := 0.0
		if v.available {
			avail = 1
		}
		metrics.InstanceTypeOfferingAvailable.WithLabelValues(k.instanceType, k.capacityType, k.zone).Set(avail)
		metrics.InstanceTypeOfferingPriceEstimate.WithLabelValues(k.instanceType, k.capacityType, k.zone).Set(v.price)
	}
	for name, v := range cpu {
		metrics.InstanceTypeCPUCores.WithLabelValues(name).Set(v)
	}
	for name, v := range memory {
		metrics.InstanceTypeMemoryBytes.WithLabelValues(name).Set(v)
	}
	return len(offerings), firstErr
}
