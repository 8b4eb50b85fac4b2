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
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/nodeclaimutil"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Drift reasons found by the core, as upstream names them. Provider drift
// carries the provider's own reason.
const (
	NodePoolDrifted      cloudprovider.DriftReason = "NodePoolDrifted"
	RequirementsDrifted  cloudprovider.DriftReason = "RequirementsDrifted"
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
	had := nodeclaimutil.Condition(nc, v1.ConditionTypeDrifted) != nil
	// Before launch the NodeClaim has no instance type, zone or image to
	// compare, and a drifted unlaunched NodeClaim would only be replaced by
	// another unlaunched one.
	if !nodeclaimutil.IsTrue(nc, v1.ConditionTypeLaunched) {
		if removeCondition(nc, v1.ConditionTypeDrifted) {
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
		if removeCondition(nc, v1.ConditionTypeDrifted) {
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
	if reason := staticFieldsDrifted(np, nc); reason != "" {
		return reason, nil
	}
	if reason := requirementsDrifted(np, nc); reason != "" {
		return reason, nil
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

// staticFieldsDrifted compares the template hash the NodeClaim was created
// with against the NodePool's current one. Hashes of different versions
// were computed differently, so they are not compared at all (the hash
// controller re-stamps NodeClaims on a version change).
func staticFieldsDrifted(np *v1.NodePool, nc *v1.NodeClaim) cloudprovider.DriftReason {
	poolHash, ok1 := np.Annotations[v1.NodePoolHashAnnotationKey]
	poolVersion, ok2 := np.Annotations[v1.NodePoolHashVersionAnnotationKey]
	claimHash, ok3 := nc.Annotations[v1.NodePoolHashAnnotationKey]
	claimVersion, ok4 := nc.Annotations[v1.NodePoolHashVersionAnnotationKey]
	if !ok1 || !ok2 || !ok3 || !ok4 || poolVersion != claimVersion {
		return ""
	}
	if poolHash != claimHash {
		return NodePoolDrifted
	}
	return ""
}

// requirementsDrifted reports whether the NodeClaim's labels no longer
// satisfy every requirement of the NodePool. Requirements are not hashed
// because widening them (adding a zone) must not replace nodes that still
// fit; only a node outside the new bounds has drifted. A label the NodeClaim
// lacks fails every requirement except NotIn and DoesNotExist.
func requirementsDrifted(np *v1.NodePool, nc *v1.NodeClaim) cloudprovider.DriftReason {
	in := make([]scheduling.RequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
	}
	poolReqs, err := scheduling.RequirementsFromMinValues(in)
	if err != nil {
		// The NodePool's validation controller reports malformed
		// requirements; they say nothing about this node.
		return ""
	}
	if scheduling.RequirementsFromLabels(nc.Labels).Compatible(poolReqs, "NodeClaim", false) != nil {
		return RequirementsDrifted
	}
	return ""
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
			if cloudprovider.OfferingCompatible(o, reqs) || (onDemand != nil && cloudprovider.OfferingCompatible(o, onDemand)) {
				return true
			}
		}
	}
	return false
}
