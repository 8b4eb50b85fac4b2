// Package instanceprofilegc owns the periodic removal of the managed
// instance profiles nothing uses any more, as upstream's EC2NodeClass
// garbage collection: a profile under the cluster's IAM path that no
// EC2NodeClass status names, no NodeClaim records as its launch profile,
// that a role change did not just replace and that is older than MinAge is
// deleted. Profiles are left behind by role changes and by classes deleted
// while the controller was down; the class finalizer only removes the
// profiles of a class it sees go.
package instanceprofilegc

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// DefaultInterval is upstream's period.
const DefaultInterval = 30 * time.Minute

// DefaultMinAge spares a profile created so recently that the class status
// naming it may not be written yet (a pass whose status patch is still in
// flight, or a controller that died between CreateInstanceProfile and the
// patch).
const DefaultMinAge = time.Hour

// Profiles lists and deletes the cluster's managed profiles
// (instanceprofile.Provider).
type Profiles interface {
	ListClusterProfiles(ctx context.Context) ([]iamtypes.InstanceProfile, error)
	Delete(ctx context.Context, name string) error
	IsProtected(name string) bool
}

// Options tune the controller; zero values take the defaults.
type Options struct {
	Interval time.Duration
	MinAge   time.Duration
	Clock    func() time.Time
	Log      logr.Logger
}

// Controller deletes unused managed profiles every Interval.
type Controller struct {
	kube     client.Client
	profiles Profiles
	opts     Options
}

// NewController returns the controller.
func NewController(kube client.Client, profiles Profiles, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MinAge <= 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Controller{kube: kube, profiles: profiles, opts: opts}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "instanceprofile.garbagecollection" }

// Register adds the loop to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return periodic.Loop{Interval: c.opts.Interval, Immediately: true, Pass: func(ctx context.Context) error {
			_, err := c.Collect(ctx)
			return err
		}, Log: c.opts.Log, Failure: "garbage collecting instance profiles"}.Run(ctx)
	}))
}

// Collect runs one pass and returns the names it deleted. The profiles are
// listed before the objects that name them, so that a profile created and
// named during the pass is either not listed or seen as used.
func (c *Controller) Collect(ctx context.Context) ([]string, error) {
	profiles, err := c.profiles.ListClusterProfiles(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	var classes awsv1.EC2NodeClassList
	if err := c.kube.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing ec2nodeclasses: %w", err)
	}
	for _, nc := range classes.Items {
		used[nc.Status.InstanceProfile] = true
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	for _, nc := range claims.Items {
		used[nc.Annotations[awsv1.AnnotationInstanceProfile]] = true
	}
	now := c.opts.Clock()
	var deleted []string
	for _, p := range profiles {
		name := aws.ToString(p.InstanceProfileName)
		if used[name] || c.profiles.IsProtected(name) || (p.CreateDate != nil && now.Sub(*p.CreateDate) < c.opts.MinAge) {
			continue
		}
		if err := c.profiles.Delete(ctx, name); err != nil {
			return deleted, fmt.Errorf("deleting unused instance profile %s: %w", name, err)
		}
		c.opts.Log.Info("deleted unused instance profile", "instanceProfile", name)
		deleted = append(deleted, name)
	}
	return deleted, nil
}
