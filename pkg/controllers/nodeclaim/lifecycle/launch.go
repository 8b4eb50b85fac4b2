package lifecycle

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/events"
)

// launchFailedReason is the Launched reason for errors that do not say more.
const launchFailedReason = "LaunchFailed"

// invalidRequirementsReason is the Launched=False reason for a NodeClaim
// whose requirements do not parse: launching it would buy a machine with
// none of the constraints its pods need.
const invalidRequirementsReason = "InvalidRequirements"

// launch buys the instance. Create runs at most once per NodeClaim UID while
// this process lives: the result is cached until the status that records it
// is stored, so a failed or stale status write cannot buy a second instance.
func (c *Controller) launch(ctx context.Context, nc *v1.NodeClaim, p *pass) (reconcile.Result, bool, error) {
	if nc.IsTrue(v1.ConditionTypeLaunched) {
		return reconcile.Result{}, false, nil
	}
	created := c.cachedLaunch(nc.UID)
	if created == nil {
		if _, err := cloudprovider.NodeClaimRequirements(nc); err != nil {
			// The spec is immutable, so this never heals: say so once per
			// generation (the condition's transition also publishes an
			// event) and let liveness delete the NodeClaim after the
			// launch timeout.
			if nc.SetCondition(c.opts.Clock.Now(), v1.ConditionTypeLaunched, metav1.ConditionFalse,
				invalidRequirementsReason, events.Truncate(err.Error())) {
				p.afterCommit(func() { log.FromContext(ctx).Error(err, "failed launching nodeclaim") })
			}
			return reconcile.Result{}, false, nil
		}
		var err error
		created, err = c.cloud.Create(ctx, nc.DeepCopy())
		if err != nil {
			return c.launchFailed(ctx, nc, err)
		}
		c.rememberLaunch(nc.UID, created)
	}
	populate(nc, created)
	nc.SetCondition(c.opts.Clock.Now(), v1.ConditionTypeLaunched, metav1.ConditionTrue, v1.ConditionTypeLaunched, "")
	p.afterCommit(func() {
		log.FromContext(ctx).Info("launched nodeclaim",
			"provider-id", nc.Status.ProviderID,
			"instance-type", nc.Labels[corev1.LabelInstanceTypeStable],
			"zone", nc.Labels[corev1.LabelTopologyZone],
			"capacity-type", nc.Labels[v1.CapacityTypeLabelKey],
			"allocatable", nc.Status.Allocatable)
	})
	return reconcile.Result{}, false, nil
}

// launchFailed sorts a Create error: no capacity or an unready NodeClass
// make this NodeClaim pointless (the provisioner plans again without it);
// anything else is retried with the reason shown on Launched.
func (c *Controller) launchFailed(ctx context.Context, nc *v1.NodeClaim, err error) (reconcile.Result, bool, error) {
	var ice *cloudprovider.InsufficientCapacityError
	switch {
	case errors.As(err, &ice):
		for _, key := range ice.Offerings {
			c.opts.Unavailable.MarkUnavailable(key)
		}
		c.event(nc, corev1.EventTypeWarning, "InsufficientCapacityError", "NodeClaim %s event: %s", nc.Name, events.Truncate(err.Error()))
		log.FromContext(ctx).Error(err, "failed launching nodeclaim")
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, false, fmt.Errorf("deleting nodeclaim after insufficient capacity: %w", err)
		}
		return reconcile.Result{}, true, nil
	case cloudprovider.IsNodeClassNotReadyError(err):
		c.event(nc, corev1.EventTypeWarning, "NodeClassNotReady", "NodeClaim %s event: %s", nc.Name, events.Truncate(err.Error()))
		log.FromContext(ctx).Error(err, "failed launching nodeclaim")
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, false, fmt.Errorf("deleting nodeclaim after nodeclass not ready: %w", err)
		}
		return reconcile.Result{}, true, nil
	}
	reason, message := launchFailedReason, err.Error()
	if ce := cloudprovider.AsCreateError(err); ce != nil {
		if ce.ConditionReason != "" {
			reason = ce.ConditionReason
		}
		if ce.ConditionMessage != "" {
			message = ce.ConditionMessage
		}
	}
	nc.SetCondition(c.opts.Clock.Now(), v1.ConditionTypeLaunched, metav1.ConditionUnknown, reason, events.Truncate(message))
	return reconcile.Result{}, false, fmt.Errorf("launching nodeclaim: %w", err)
}

// populate copies what the launch resolved onto the NodeClaim. Labels are
// layered so that the user's own NodeClaim labels win over single-valued
// requirements, which win over what the provider reported.
func populate(nc, created *v1.NodeClaim) {
	labels := map[string]string{}
	for k, v := range created.Labels {
		labels[k] = v
	}
	if reqs, err := cloudprovider.NodeClaimRequirements(nc); err == nil {
		for k, v := range reqs.Labels() {
			labels[k] = v
		}
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	nc.Labels = labels
	if len(created.Annotations) > 0 {
		annotations := map[string]string{}
		for k, v := range nc.Annotations {
			annotations[k] = v
		}
		for k, v := range created.Annotations {
			annotations[k] = v
		}
		nc.Annotations = annotations
	}
	nc.Status.ProviderID = created.Status.ProviderID
	nc.Status.ImageID = created.Status.ImageID
	nc.Status.Capacity = created.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = created.Status.Allocatable.DeepCopy()
}

func (c *Controller) event(obj *v1.NodeClaim, eventType, reason, format string, args ...interface{}) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(obj, eventType, reason, format, args...)
	}
}
