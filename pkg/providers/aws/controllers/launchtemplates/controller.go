// Package launchtemplates makes a NodePool's launch templates before its
// first NodeClaim needs them. EC2 refuses a launch template in CreateFleet
// for a moment after creating it, so a launch that creates its templates
// waits that moment out (launchtemplate.PropagationDelay); made when the
// NodePool's EC2NodeClass is ready, or only waits for IAM to propagate its
// new instance profile (several seconds, in which the templates propagate
// too), or when either changes in a way that changes the templates, they
// have propagated by the time pods arrive. Which templates are made is the cloud provider's business
// (WarmLaunchTemplates); this controller decides when, once per content of
// the NodePool's template and of its class, so a status update that
// changes nothing a template holds makes no call. It runs on the leader
// only, as every launch does, and a controller taking over (a restart, a
// switch from upstream) makes none for what it finds already Ready: its
// predecessor launched from those.
package launchtemplates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Warmer makes a NodePool's launch templates (the AWS cloud provider).
type Warmer interface {
	WarmLaunchTemplates(ctx context.Context, np *v1.NodePool) (int, error)
}

// Controller makes NodePools' launch templates ahead of their NodeClaims.
type Controller struct {
	kube   client.Client
	warmer Warmer

	// started is when this controller was built: a NodePool older than
	// that, on a class Ready since before, was launching under another
	// controller.
	started time.Time

	mu sync.Mutex
	// warmed is, per NodePool, the content its templates were last made
	// for (or found on taking over).
	warmed map[string]string
}

// NewController returns the controller.
func NewController(kube client.Client, warmer Warmer) *Controller {
	return &Controller{kube: kube, warmer: warmer, started: time.Now(), warmed: map[string]string{}}
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "nodepool.launchtemplates" }

// Register adds the controller to mgr: NodePools, and the NodePools of an
// EC2NodeClass when it changes.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&v1.NodePool{}).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.nodePoolsOf)).
		Complete(c)
}

// nodePoolsOf are the NodePools launching from the class o.
func (c *Controller) nodePoolsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var pools v1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		log.FromContext(ctx).Error(err, "listing nodepools of an EC2NodeClass", "EC2NodeClass", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range pools.Items {
		if ref := pools.Items[i].Spec.Template.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.Group && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: pools.Items[i].Name}})
		}
	}
	return out
}

// Reconcile makes one NodePool's templates if their content changed since
// they were last made.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	if !np.DeletionTimestamp.IsZero() || ref == nil || ref.Group != awsv1.Group {
		return reconcile.Result{}, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	propagating := class.ResolvedButProfilePropagating()
	if !ready(class) && !propagating {
		// Its status change brings the NodePool back.
		return reconcile.Result{}, nil
	}
	key, err := contentKey(np, class)
	if err != nil {
		return reconcile.Result{}, err
	}
	if c.done(np.Name, key) {
		return reconcile.Result{}, nil
	}
	// A profile propagates only after this controller's process gave it
	// its role: no predecessor launched from these templates.
	if !c.seen(np.Name) && !propagating && !c.newSinceStart(np, class) {
		// What a controller finds on taking over is what its predecessor
		// (ours, or upstream's) launched from: those templates exist, or
		// the first launch that needs one makes it. Making them all again
		// on every leader change would only churn them.
		c.record(np.Name, key)
		return reconcile.Result{}, nil
	}
	n, err := c.warmer.WarmLaunchTemplates(ctx, np)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("making the launch templates of nodepool %s: %w", np.Name, err)
	}
	c.record(np.Name, key)
	log.FromContext(ctx).V(1).Info("made launch templates ahead of launches", "NodePool", np.Name, "EC2NodeClass", class.Name, "count", n)
	return reconcile.Result{}, nil
}

// newSinceStart: the NodePool was created, or its class became Ready,
// after this controller started (condition times have whole seconds).
func (c *Controller) newSinceStart(np *v1.NodePool, class *awsv1.EC2NodeClass) bool {
	since := c.started.Truncate(time.Second)
	if !np.CreationTimestamp.Time.Before(since) {
		return true
	}
	r := meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeReady)
	return r != nil && !r.LastTransitionTime.Time.Before(since)
}

func ready(class *awsv1.EC2NodeClass) bool {
	return class.DeletionTimestamp.IsZero() && meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady)
}

// contentKey covers what a NodePool's templates are made of: its NodeClaim
// template, and its class's spec and the resolved status templates hold
// (images, security groups, instance profile).
func contentKey(np *v1.NodePool, class *awsv1.EC2NodeClass) (string, error) {
	raw, err := json.Marshal(struct {
		Template        v1.NodeClaimTemplate
		Spec            awsv1.EC2NodeClassSpec
		AMIs            []awsv1.AMI
		SecurityGroups  []awsv1.SecurityGroup
		InstanceProfile string
	}{np.Spec.Template, class.Spec, class.Status.AMIs, class.Status.SecurityGroups, class.Status.InstanceProfile})
	if err != nil {
		return "", fmt.Errorf("encoding nodepool %s and its class: %w", np.Name, err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

func (c *Controller) done(pool, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warmed[pool] == key
}

func (c *Controller) seen(pool string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.warmed[pool]
	return ok
}

func (c *Controller) record(pool, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warmed[pool] = key
}

func (c *Controller) forget(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.warmed, pool)
}
