package overlay

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// Holder publishes the current Store to the Decorator. The NodeOverlay
// controller replaces it after each evaluation; readers never block.
type Holder struct {
	store atomic.Pointer[Store]
}

// NewHolder holds an empty Store: no pool is evaluated yet, so the
// Decorator refuses every pool until the first evaluation.
func NewHolder() *Holder {
	h := &Holder{}
	h.store.Store(&Store{})
	return h
}

// Load returns the current Store.
func (h *Holder) Load() *Store { return h.store.Load() }

// Publish replaces the current Store.
func (h *Holder) Publish(s *Store) { h.store.Store(s) }

// Decorator serves a provider's instance types with the overlays of the
// held Store applied. Create hands the provider the NodeClaim's pool's
// overlaid instance types through the context (cloudprovider.WithInstanceTypes),
// so that a launch fits requests against overlaid capacity and ranks by
// overlaid price. Every other call passes through.
type Decorator struct {
	cloudprovider.CloudProvider
	holder *Holder
}

var _ cloudprovider.CloudProvider = (*Decorator)(nil)

// Decorate wraps cp; cp should be the provider as it reports instance types
// (the metrics decorator may sit between).
func Decorate(cp cloudprovider.CloudProvider, holder *Holder) *Decorator {
	return &Decorator{CloudProvider: cp, holder: holder}
}

// Unwrap returns the decorated provider.
func (d *Decorator) Unwrap() cloudprovider.CloudProvider { return d.CloudProvider }

// GetInstanceTypes implements cloudprovider.CloudProvider. Until the
// NodeOverlay controller has evaluated the pool it returns an
// UnevaluatedError, and callers skip the pool, as upstream's do: planning
// with prices the overlays are about to change would buy the wrong thing.
func (d *Decorator) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	out, err := d.holder.Load().Apply(np.Name, its)
	if err != nil {
		return nil, fmt.Errorf("applying nodeoverlays: %w", err)
	}
	return out, nil
}

// Create implements cloudprovider.CloudProvider. A NodeClaim of a NodePool
// is launched from that pool's overlaid instance types; a standalone
// NodeClaim (no NodePool label), as upstream, from the provider's own.
func (d *Decorator) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	pool := nc.Labels[v1.NodePoolLabelKey]
	if pool == "" {
		return d.CloudProvider.Create(ctx, nc)
	}
	np := &v1.NodePool{}
	np.Name = pool
	np.Spec.Template.Spec.NodeClassRef = nc.Spec.NodeClassRef
	its, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	if err != nil {
		return d.CloudProvider.Create(ctx, nc)
	}
	s := d.holder.Load()
	overlaid, err := s.Apply(pool, its)
	if err != nil {
		return nil, fmt.Errorf("creating instance: applying nodeoverlays: %w", err)
	}
	out, err := d.CloudProvider.Create(cloudprovider.WithInstanceTypes(ctx, overlaid), nc)
	if err != nil || out == nil {
		return out, err
	}
	// Mark what the overlays changed of the launched type, as upstream does.
	if price, capacity := s.Changed(pool, out.Labels[corev1.LabelInstanceTypeStable]); price || capacity {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		if price {
			out.Annotations[v1.PriceOverlayAppliedAnnotationKey] = "true"
		}
		if capacity {
			out.Annotations[v1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}
	return out, nil
}
