// Package tagging owns the instance tags that can only be written once a
// NodeClaim's Node has registered: Name (the node's name, which EC2 shows in
// its console), karpenter.sh/nodeclaim and eks:eks-cluster-name, as upstream.
// A tagged NodeClaim carries the karpenter.k8s.aws/tagged annotation so each
// instance is tagged once; an existing Name tag is never overwritten. It
// reads the instance's tags from the instance provider's cache (no
// DescribeInstances per node), keeps the instance within EC2's 50 tags
// (Name, being cosmetic, is what gives way), and gives up on an instance
// whose tagging IAM denies instead of retrying it.
package tagging

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
)

// NameTagKey is EC2's display-name tag.
const NameTagKey = "Name"

// EC2API is the part of *ec2.Client the controller uses.
type EC2API interface {
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

// Instances is what the controller reads instances through
// (instance.Provider).
type Instances interface {
	Cached(ctx context.Context, id string, maxAge time.Duration) (*instance.Instance, error)
	Tagged(id string, tags map[string]string)
}

// unseenRetry is how long an instance EC2 does not know yet is looked for
// after its NodeClaim launched: EC2 is eventually consistent, so an
// instance can be missing from DescribeInstances, and unknown to
// CreateTags, for seconds (rarely minutes) after CreateFleet returned it,
// while the booted node may already have registered. Past it, a missing
// instance is gone, which the lifecycle and garbage collection handle.
const unseenRetry = 5 * time.Minute

// unseenRequeue is how soon such an instance is looked for again.
const unseenRequeue = 5 * time.Second

// instanceMaxAge: the provider records an instance's tags at launch and
// refreshes them every two minutes; a node registers within minutes.
const instanceMaxAge = 10 * time.Minute

// Controller tags registered NodeClaims' instances.
type Controller struct {
	kube        client.Client
	ec2         EC2API
	instances   Instances
	clusterName string
	// limiter keeps to upstream's one CreateTags call per second, so a
	// scale-up of hundreds of nodes does not eat the account's EC2
	// mutating-call budget that launches need.
	limiter *rate.Limiter
	now     func() time.Time
}

// NewController returns the tagging controller for clusterName's instances.
func NewController(kube client.Client, api EC2API, instances Instances, clusterName string) *Controller {
	return &Controller{kube: kube, ec2: api, instances: instances, clusterName: clusterName, limiter: rate.NewLimiter(rate.Every(time.Second), 1), now: time.Now}
}

// WithClock makes the controller read time from now; it returns c.
func (c *Controller) WithClock(now func() time.Time) *Controller {
	c.now = now
	return c
}

// launchedRecently reports whether the NodeClaim's instance may still be
// unknown to EC2 for want of consistency (see unseenRetry).
func (c *Controller) launchedRecently(nc *v1.NodeClaim) bool {
	since := nc.CreationTimestamp.Time
	if l := meta.FindStatusCondition(nc.GetConditions(), v1.ConditionTypeLaunched); l != nil && l.Status == metav1.ConditionTrue {
		since = l.LastTransitionTime.Time
	}
	return c.now().Sub(since) < unseenRetry
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "nodeclaim.tagging" }

// Register adds the controller to mgr; it sees only registered, untagged
// NodeClaims of EC2NodeClasses.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && needsTags(nc)
		}), predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(c)
}

func needsTags(nc *v1.NodeClaim) bool {
	if nc.Annotations[awsv1.AnnotationInstanceTagged] == "true" || !nc.DeletionTimestamp.IsZero() {
		return false
	}
	if nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Group != awsv1.Group {
		return false
	}
	reg := meta.FindStatusCondition(nc.GetConditions(), v1.ConditionTypeRegistered)
	return reg != nil && reg.Status == metav1.ConditionTrue && nc.Status.NodeName != "" && nc.Status.ProviderID != ""
}

// Reconcile tags one NodeClaim's instance and marks the NodeClaim tagged.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsTags(nc) {
		return reconcile.Result{}, nil
	}
	id, err := instance.ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		// Not an AWS instance: nothing this controller can tag, ever.
		return reconcile.Result{}, nil
	}
	tags, unseen, err := c.tagsToAdd(ctx, id, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if unseen && c.launchedRecently(nc) {
		return reconcile.Result{RequeueAfter: unseenRequeue}, nil
	}
	if len(tags) > 0 {
		if err := c.limiter.Wait(ctx); err != nil {
			return reconcile.Result{}, err
		}
		_, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: tags})
		switch {
		case err == nil:
			written := map[string]string{}
			for _, t := range tags {
				written[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
			c.instances.Tagged(id, written)
		case notFound(err) && c.launchedRecently(nc):
			// Not yet known to CreateTags (EC2's consistency).
			return reconcile.Result{RequeueAfter: unseenRequeue}, nil
		case notFound(err):
			// The instance is gone; the lifecycle and GC handle that.
		case sdk.IsDenied(err):
			// Retrying cannot help until the policy changes; the NodeClaim
			// stays marked so it is not asked again on every update.
			log.FromContext(ctx).Error(err, "IAM denied tagging the instance; leaving it untagged", "instance", id)
		default:
			return reconcile.Result{}, fmt.Errorf("tagging instance %s of nodeclaim %s: %w", id, nc.Name, err)
		}
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[awsv1.AnnotationInstanceTagged] = "true"
	nc.Annotations[awsv1.AnnotationClusterNameTaggedCompatibility] = "true"
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("marking nodeclaim %s tagged: %w", nc.Name, err))
	}
	return reconcile.Result{}, nil
}

// tagsToAdd are the post-registration tags the instance lacks, in order
// of importance, as many as EC2's 50 tags leave room for; an existing Name
// (the user's, or an earlier pass's) is kept. unseen is true when EC2 does
// not report the instance.
func (c *Controller) tagsToAdd(ctx context.Context, id string, nc *v1.NodeClaim) (_ []ec2types.Tag, unseen bool, _ error) {
	inst, err := c.instances.Cached(ctx, id, instanceMaxAge)
	if err != nil {
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading instance %s of nodeclaim %s: %w", id, nc.Name, err)
	}
	count := 0
	for k := range inst.Tags {
		// EC2's own tags do not count against the limit.
		if !strings.HasPrefix(k, "aws:") {
			count++
		}
	}
	if inst.Unclaimed {
		// karpenter.sh/nodeclaim holds the batch's placeholder.
		count++
	}
	want := []struct{ key, value string }{
		{awsv1.NodeClaimTagKey, nc.Name},
		{awsv1.EKSClusterNameTagKey, c.clusterName},
		{NameTagKey, nc.Status.NodeName},
	}
	var tags []ec2types.Tag
	for _, w := range want {
		if _, ok := inst.Tags[w.key]; ok || w.value == "" {
			continue
		}
		overwrite := w.key == awsv1.NodeClaimTagKey && inst.Unclaimed
		if !overwrite {
			if count >= instance.MaxTagsPerResource {
				continue
			}
			count++
		}
		tags = append(tags, ec2types.Tag{Key: aws.String(w.key), Value: aws.String(w.value)})
	}
	return tags, false, nil
}

// notFound reports EC2's answers for an instance that no longer exists.
func notFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "InvalidInstanceID.NotFound")
}
