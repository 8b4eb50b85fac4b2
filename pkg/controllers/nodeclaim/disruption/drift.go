package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Drift reasons found by the core, as upstream names them. Provider drift
// carries the provider's own reason.
const (
	NodePoolDrifted                                = cloudprovider.DriftReason(disruption.NodePoolDrifted)
	RequirementsDrifted                            = cloudprovider.DriftReason(disruption.RequirementsDrifted)
	InstanceTypeNotFound cloudprovider.DriftReason = "InstanceTypeNotFound"
)

const (
	// driftRequeue re-evaluates drift periodically: provider drift (a new
	// image, say) produces no event on the NodeClaim.
	driftRequeue = 5 * time.Minute
	// instanceTypeCheckMinAge keeps young NodeClaims out of the
	// instance-type check: a provider's instance type list can lag behind
	// what it just launched.
	instanceTypeCheckMinAge = time.Hour
	// instanceTypeCheckTTL is how long an instance-type verdict is reused;
	// GetInstanceTypes is the expensive call of this controller.
	instanceTypeCheckTTL = 30 * time.Minute
)

type drift struct {
	cloud cloudprovider.CloudProvider
	clock clock.Clock

	mu    sync.Mutex
	cache map[types.UID]instanceTypeVerdict
}

type instanceTypeVerdict struct {
	reason  cloudprovider.DriftReason
	expires time.Time
}

func newDrift(cloud cloudprovider.CloudProvider, clk clock.Clock) *drift {
	return &drift{cloud: cloud, clock: clk, cache: map[types.UID]instanceTypeVerdict{}}
}

func (d *drift) reconcile(ctx context.Context, np *v1.NodePool, nc *v1.NodeClaim) (reconcile.Result, error) {
	had := nc.Condition(v1.ConditionTypeDrifted) != nil
	// Before launch the NodeClaim has no instance type, zone or image to
	// compare, and a drifted unlaunched NodeClaim would only be replaced by
	// another unlaunched one.
	if !nc.IsTrue(v1.ConditionTypeLaunched) {
		if nc.RemoveCondition(v1.ConditionTypeDrifted) {
			log.FromContext(ctx).V(1).Info("removing drift status condition, isn't launched")
		}
		return reconcile.Result{}, nil
	}
	reason, err := d.isDrifted(ctx, np, nc)
	if err != nil {
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting drift of nodeclaim %s: %w", nc.Name, err)
	}
	if reason == "" {
		if nc.RemoveCondition(v1.ConditionTypeDrifted) {
			log.FromContext(ctx).V(1).Info("removing drifted status condition, not drifted")
		}
		return reconcile.Result{RequeueAfter: driftRequeue}, nil
	}
	setTrue(nc, d.clock.Now(), v1.ConditionTypeDrifted, string(reason), string(reason))
	if !had {
		log.FromContext(ctx).V(1).WithValues("reason", string(reason)).Info("marking drifted")
	}
	return reconcile.Result{RequeueAfter: driftRequeue}, nil
}

// isDrifted checks, in upstream's order, the cheap local causes first and
// the provider last, returning the first reason found.
func (d *drift) isDrifted(ctx context.Context, np *v1.NodePool, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	if reason := disruption.TemplateDrift(np, nc); reason != "" {
		return cloudprovider.DriftReason(reason), nil
	}
	reason, err := d.instanceTypeNotFound(ctx, np, nc)
	if err != nil || reason != "" {
		return reason, err
	}
	reason, err = d.cloud.IsDrifted(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("asking the cloud provider: %w", err)
	}
	return reason, nil
}

// instanceTypeNotFound reports NodeClaims whose instance type the provider
// no longer offers for the pool, or offers with no offering that matches the
// NodeClaim's zone and capacity type.
func (d *drift) instanceTypeNotFound(ctx context.Context, np *v1.NodePool, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	now := d.clock.Now()
	if now.Sub(nc.CreationTimestamp.Time) < instanceTypeCheckMinAge {
		return "", nil
	}
	d.mu.Lock()
	cached, ok := d.cache[nc.UID]
	d.mu.Unlock()
	if ok && now.Before(cached.expires) {
		return cached.reason, nil
	}
	its, err := d.cloud.GetInstanceTypes(ctx, np)
	if err != nil {
		return "", fmt.Errorf("getting instance types of nodepool %s: %w", np.Name, err)
	}
	var reason cloudprovider.DriftReason
	if !hasCompatibleOffering(its, nc.Labels) {
		reason = InstanceTypeNotFound
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for uid, v := range d.cache {
		if !now.Before(v.expires) {
			delete(d.cache, uid)
		}
	}
	d.cache[nc.UID] = instanceTypeVerdict{reason: reason, expires: now.Add(instanceTypeCheckTTL)}
	return reason, nil
}

// hasCompatibleOffering looks for the NodeClaim's instance type among its
// offerings, available or not (availability changes by the minute and is
// not drift). A reserved NodeClaim also matches an on-demand offering:
// when its reservation ends it keeps running as on-demand capacity.
func hasCompatibleOffering(its []*cloudprovider.InstanceType, labels map[string]string) bool {
	name, ok := labels[corev1.LabelInstanceTypeStable]
	if !ok {
		return false
	}
	reqs := scheduling.RequirementsFromLabels(labels)
	var onDemand scheduling.Requirements
	if labels[v1.CapacityTypeLabelKey] == v1.CapacityTypeReserved {
		onDemand = reqs.Copy()
		delete(onDemand, scheduling.LabelReservationID)
		onDemand[scheduling.LabelCapacityType] = scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, v1.CapacityTypeOnDemand)
	}
	for _, it := range its {
		if it.Name != name {
			continue
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if scheduling.OfferingCompatible(o, reqs) || (onDemand != nil && scheduling.OfferingCompatible(o, onDemand)) {
				return true
			}
		}
	}
	return false
}
