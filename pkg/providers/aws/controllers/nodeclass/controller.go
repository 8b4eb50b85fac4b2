package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/amifamily"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/securitygroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

// Requeue intervals, upstream's.
const (
	amiRequeue           = 5 * time.Minute
	amiNotFoundRequeue   = time.Minute
	subnetRequeue        = time.Minute
	reservationRequeue   = time.Minute
	securityGroupRequeue = 5 * time.Minute
	validationRequeue    = 10 * time.Minute
	waitingEventRequeue  = 10 * time.Minute
)

// Recorder publishes Kubernetes events (record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// LaunchTemplates deletes a class's launch templates; the launch-template
// provider implements it once it exists.
type LaunchTemplates interface {
	DeleteAll(ctx context.Context, nodeClass *awsv1.EC2NodeClass) error
}

// PlacementGroupAPI is the EC2 call the placement-group check makes.
type PlacementGroupAPI interface {
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// Options are the controller's dependencies. Subnets, SecurityGroups, AMIs
// and InstanceProfiles are required.
type Options struct {
	Subnets          *subnet.Provider
	SecurityGroups   *securitygroup.Provider
	AMIs             *amifamily.Provider
	InstanceProfiles *instanceprofile.Provider
	// PlacementGroups resolves placementGroupSelector; nil makes a class
	// with a selector PlacementGroupReady=False.
	PlacementGroups PlacementGroupAPI
	// LaunchTemplates is the finalizer's launch-template cleanup; nil
	// skips it.
	LaunchTemplates LaunchTemplates
	// Recorder receives the finalizer's waiting event; nil drops it.
	Recorder Recorder
	// ClusterName tags managed profiles and is checked against spec.tags.
	ClusterName string
	// DisableDryRun is DISABLE_DRY_RUN.
	DisableDryRun bool
	// CapacityReservations resolves capacityReservationSelectorTerms into
	// status.capacityReservations and CapacityReservationsReady, which
	// Ready then also requires. Set it only with the ReservedCapacity
	// gate on; nil leaves both out.
	CapacityReservations *capacityreservation.Provider
	// Clock judges capacity blocks' expiring state; the real clock when
	// nil.
	Clock clock.Clock
	// InstanceTypes lets validation check the kubelet reserves against
	// the types the class can launch (FieldsSupported); nil skips that.
	InstanceTypes InstanceTypes
}

// Controller reconciles EC2NodeClass status and finalization.
type Controller struct {
	kube       client.Client
	opts       Options
	dependents []string
	// resync carries the classes Resync asks to be reconciled now.
	resync chan event.TypedGenericEvent[*awsv1.EC2NodeClass]
}

// NewController returns the nodeclass controller.
func NewController(kube client.Client, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{
		kube: kube, opts: opts, dependents: dependents(opts.CapacityReservations != nil),
		resync: make(chan event.TypedGenericEvent[*awsv1.EC2NodeClass], 16),
	}
}

// Resync reconciles every EC2NodeClass now instead of at its next requeue:
// after a resolver forgot a cached answer (a deprecated AMI's "latest"
// parameter), status should not wait up to five minutes for the new one.
func (c *Controller) Resync(ctx context.Context) error {
	var list awsv1.EC2NodeClassList
	if err := c.kube.List(ctx, &list); err != nil {
		return fmt.Errorf("listing ec2nodeclasses: %w", err)
	}
	for i := range list.Items {
		select {
		case c.resync <- event.TypedGenericEvent[*awsv1.EC2NodeClass]{Object: &list.Items[i]}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "nodeclass" }

// Register adds the controller to mgr. NodeClaim deletions re-enqueue their
// class so a waiting finalizer proceeds at once.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	if c.opts.Recorder == nil {
		c.opts.Recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, like the rest of the project
	}
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&awsv1.EC2NodeClass{}).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			nc, ok := o.(*v1.NodeClaim)
			if !ok || nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Group != awsv1.Group {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nc.Spec.NodeClassRef.Name}}}
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WatchesRawSource(source.Channel(c.resync, &handler.TypedEnqueueRequestForObject[*awsv1.EC2NodeClass]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(c)
}

// Reconcile resolves one class's status, or finalizes it.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("EC2NodeClass", klog.KRef("", nc.Name)))
	if !nc.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer) {
		stored := nc.DeepCopy()
		controllerutil.AddFinalizer(nc, awsv1.TerminationFinalizer)
		// The optimistic lock keeps a merge patch of the list from
		// dropping a finalizer someone else added meanwhile.
		if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("adding termination finalizer: %w", err))
		}
	}
	stored := nc.DeepCopy()
	initConditions(nc, c.dependents)

	var results []reconcile.Result
	var errs []error
	steps := []func(context.Context, *awsv1.EC2NodeClass) (reconcile.Result, error){c.amis}
	if c.opts.CapacityReservations != nil {
		steps = append(steps, c.capacityReservations)
	}
	steps = append(steps, c.subnets, c.securityGroups, c.instanceProfile, c.placementGroup, c.validation)
	for _, step := range steps {
		res, err := step(ctx, nc)
		results = append(results, res)
		if err != nil {
			errs = append(errs, err)
		}
	}
	recomputeReady(nc, c.dependents)

	if !equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				// A profile created in this pass did not reach status; the
				// retry stores the same one (InstanceProfiles remembers it).
				return reconcile.Result{Requeue: true}, nil
			}
			errs = append(errs, client.IgnoreNotFound(fmt.Errorf("patching ec2nodeclass %s status: %w", nc.Name, err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return soonest(results), nil
}

func (c *Controller) amis(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	amis, err := c.opts.AMIs.List(ctx, nc)
	var unsupported *amifamily.UnsupportedAliasError
	var notFound *amifamily.NotFoundError
	switch {
	case errors.As(err, &unsupported):
		nc.Status.AMIs = nil
		setFalse(nc, awsv1.ConditionTypeAMIsReady, ReasonUnsupportedAlias, err.Error())
		return reconcile.Result{}, nil
	case errors.As(err, &notFound):
		nc.Status.AMIs = nil
		setFalse(nc, awsv1.ConditionTypeAMIsReady, ReasonAMINotFound, err.Error())
		return reconcile.Result{RequeueAfter: amiNotFoundRequeue}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("getting amis: %w", err)
	}
	if len(amis) == 0 {
		nc.Status.AMIs = nil
		setFalse(nc, awsv1.ConditionTypeAMIsReady, ReasonAMINotFound, "AMISelector did not match any AMIs")
		// Users may tag their images later; look again soon.
		return reconcile.Result{RequeueAfter: amiNotFoundRequeue}, nil
	}
	status := amifamily.Status(amis)
	if !equality.Semantic.DeepEqual(status, nc.Status.AMIs) {
		log.FromContext(ctx).V(1).Info("discovered amis", "ids", uniqueIDs(status))
	}
	nc.Status.AMIs = status
	setTrue(nc, awsv1.ConditionTypeAMIsReady)
	return reconcile.Result{RequeueAfter: amiRequeue}, nil
}

// capacityReservations resolves the selected reservations into status and
// looks again in a minute, or sooner when a capacity block turns expiring
// or a reservation ends before then. No terms (or no match) is ready with
// nothing reserved. A reservation the status cannot represent is logged
// and left out, as upstream.
func (c *Controller) capacityReservations(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	found, err := c.opts.CapacityReservations.List(ctx, nc.Spec.CapacityReservationSelectorTerms...)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("getting capacity reservations: %w", err)
	}
	now := c.opts.Clock.Now()
	status, err := capacityreservation.Status(now, found)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed to parse capacity reservations")
	}
	if !equality.Semantic.DeepEqual(status, nc.Status.CapacityReservations) && len(status) > 0 {
		ids := make([]string, 0, len(status))
		for _, r := range status {
			ids = append(ids, r.ID)
		}
		log.FromContext(ctx).V(1).Info("discovered capacity reservations", "ids", ids)
	}
	nc.Status.CapacityReservations = status
	setTrue(nc, awsv1.ConditionTypeCapacityReservationsReady)
	requeue := reservationRequeue
	if next := capacityreservation.NextChange(now, found); !next.IsZero() && next.Sub(now) < requeue {
		requeue = next.Sub(now)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

func (c *Controller) subnets(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	subnets, err := c.opts.Subnets.List(ctx, nc)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("getting subnets: %w", err)
	}
	if len(subnets) == 0 {
		nc.Status.Subnets = nil
		setFalse(nc, awsv1.ConditionTypeSubnetsReady, ReasonSubnetsNotFound, "SubnetSelector did not match any Subnets")
		return reconcile.Result{RequeueAfter: subnetRequeue}, nil
	}
	status := subnet.Status(subnets)
	if !equality.Semantic.DeepEqual(status, nc.Status.Subnets) {
		log.FromContext(ctx).V(1).Info("discovered subnets", "subnets", status)
	}
	nc.Status.Subnets = status
	setTrue(nc, awsv1.ConditionTypeSubnetsReady)
	return reconcile.Result{RequeueAfter: subnetRequeue}, nil
}

func (c *Controller) securityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	groups, err := c.opts.SecurityGroups.List(ctx, nc)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("getting security groups: %w", err)
	}
	if len(groups) == 0 {
		nc.Status.SecurityGroups = nil
		setFalse(nc, awsv1.ConditionTypeSecurityGroupsReady, ReasonSecurityGroupsNotFound, "SecurityGroupSelector did not match any SecurityGroups")
		return reconcile.Result{RequeueAfter: securityGroupRequeue}, nil
	}
	status := securitygroup.Status(groups)
	if !equality.Semantic.DeepEqual(status, nc.Status.SecurityGroups) {
		log.FromContext(ctx).V(1).Info("discovered security groups", "security-groups", status)
	}
	nc.Status.SecurityGroups = status
	setTrue(nc, awsv1.ConditionTypeSecurityGroupsReady)
	return reconcile.Result{RequeueAfter: securityGroupRequeue}, nil
}

// instanceProfile creates (or keeps) the managed profile for spec.role, or
// takes spec.instanceProfile as is.
func (c *Controller) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if nc.Spec.Role == "" {
		nc.Status.InstanceProfile = aws.ToString(nc.Spec.InstanceProfile)
		setTrue(nc, awsv1.ConditionTypeInstanceProfileReady)
		return reconcile.Result{}, nil
	}
	name, err := c.opts.InstanceProfiles.Ensure(ctx, nc)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("creating instance profile: %w", err)
	}
	nc.Status.InstanceProfile = name
	// A profile whose role was set moments ago is not yet known to EC2:
	// the class waits for it instead of sending launches to be refused.
	if wait := c.opts.InstanceProfiles.Propagating(name); wait > 0 {
		setFalse(nc, awsv1.ConditionTypeInstanceProfileReady, ReasonInstanceProfilePropagating,
			fmt.Sprintf("Instance profile %s was just given its role; waiting %s for IAM to propagate it", name, wait.Round(time.Second)))
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	setTrue(nc, awsv1.ConditionTypeInstanceProfileReady)
	return reconcile.Result{}, nil
}

// placementGroup checks the selected placement group exists; no selector is
// trivially ready.
func (c *Controller) placementGroup(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		setTrue(nc, awsv1.ConditionTypePlacementGroupReady)
		return reconcile.Result{}, nil
	}
	if c.opts.PlacementGroups == nil {
		setFalse(nc, awsv1.ConditionTypePlacementGroupReady, ReasonResolutionFailed, "placement group resolution is not configured")
		return reconcile.Result{}, nil
	}
	// As upstream, only an available group counts.
	in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
	if sel.ID != "" {
		in.GroupIds = []string{sel.ID}
	} else {
		in.GroupNames = []string{sel.Name}
	}
	out, err := c.opts.PlacementGroups.DescribePlacementGroups(ctx, in)
	if err != nil && !isPlacementGroupNotFound(err) {
		setFalse(nc, awsv1.ConditionTypePlacementGroupReady, ReasonResolutionFailed, err.Error())
		return reconcile.Result{}, fmt.Errorf("describing placement groups: %w", err)
	}
	if err != nil || len(out.PlacementGroups) == 0 {
		setFalse(nc, awsv1.ConditionTypePlacementGroupReady, ReasonPlacementGroupNotFound, "PlacementGroupSelector did not match any PlacementGroups")
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	setTrue(nc, awsv1.ConditionTypePlacementGroupReady)
	return reconcile.Result{}, nil
}

// validation waits for the resolved parts, then checks the tags Karpenter
// would put on instances. Upstream's dry-run authorization checks
// (CreateFleet, CreateLaunchTemplate, RunInstances) need launch templates
// and are not done yet; DISABLE_DRY_RUN reports that they were skipped.
func (c *Controller) validation(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	const waiting = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"
	required := []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeInstanceProfileReady,
		awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeSubnetsReady}
	unknown := false
	for _, cond := range required {
		switch conditionStatus(nc, cond) {
		case "False":
			setFalse(nc, awsv1.ConditionTypeValidationSucceeded, ReasonDependenciesNotReady, waiting)
			return reconcile.Result{}, nil
		case "Unknown":
			unknown = true
		}
	}
	if unknown {
		setUnknown(nc, awsv1.ConditionTypeValidationSucceeded, ReasonDependenciesNotReady, waiting)
		return reconcile.Result{}, nil
	}
	if key, ok := restrictedTag(nc.Spec.Tags); ok {
		setFalse(nc, awsv1.ConditionTypeValidationSucceeded, ReasonTagValidationFailed,
			fmt.Sprintf("%q tag does not pass tag validation requirements", key))
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("validating tags: restricted tag %q", key))
	}
	if reason, message := validateKubelet(nc); reason != "" {
		setFalse(nc, awsv1.ConditionTypeValidationSucceeded, reason, message)
		return reconcile.Result{}, nil
	}
	reason, message, err := c.fieldsSupported(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if reason != "" {
		setFalse(nc, awsv1.ConditionTypeValidationSucceeded, reason, message)
		return reconcile.Result{}, nil
	}
	if c.opts.DisableDryRun {
		setTrueWithReason(nc, awsv1.ConditionTypeValidationSucceeded, ReasonDryRunDisabled, "Dry run is disabled")
		return reconcile.Result{RequeueAfter: validationRequeue}, nil
	}
	setTrue(nc, awsv1.ConditionTypeValidationSucceeded)
	return reconcile.Result{RequeueAfter: validationRequeue}, nil
}

// restrictedTag finds a user tag that would spoof one Karpenter writes. The
// CRD refuses most of them already; kubernetes.io/cluster/* by prefix.
func restrictedTag(tags map[string]string) (string, bool) {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, pattern := range awsv1.RestrictedTagPatterns {
			if k == pattern || (strings.HasSuffix(pattern, "/") && strings.HasPrefix(k, pattern)) {
				return k, true
			}
		}
	}
	return "", false
}

// finalize waits for the class's NodeClaims to go, then cleans up what the
// class created and drops the finalizer.
func (c *Controller) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	claims, err := c.nodeClaimsFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(claims) > 0 {
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(nc, corev1.EventTypeNormal, "WaitingOnNodeClaimTermination",
				"Waiting on NodeClaim termination for %s", prettySlice(claims, 5))
		}
		// Fire the event again periodically while NodeClaims linger.
		return reconcile.Result{RequeueAfter: waitingEventRequeue}, nil
	}
	if nc.Spec.Role != "" {
		profiles, err := c.opts.InstanceProfiles.ListNodeClassProfiles(ctx, nc)
		if err != nil {
			return reconcile.Result{}, err
		}
		for _, p := range profiles {
			if err := c.opts.InstanceProfiles.Delete(ctx, aws.ToString(p.InstanceProfileName)); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if c.opts.LaunchTemplates != nil {
		if err := c.opts.LaunchTemplates.DeleteAll(ctx, nc); err != nil {
			return reconcile.Result{}, fmt.Errorf("deleting launch templates: %w", err)
		}
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, awsv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing termination finalizer: %w", err))
	}
	return reconcile.Result{}, nil
}

// nodeClaimsFor lists the names of NodeClaims referencing the class.
func (c *Controller) nodeClaimsFor(ctx context.Context, nc *awsv1.EC2NodeClass) ([]string, error) {
	list := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodeclaims that are using nodeclass: %w", err)
	}
	var names []string
	for _, claim := range list.Items {
		ref := claim.Spec.NodeClassRef
		if ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" && ref.Name == nc.Name {
			names = append(names, claim.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// soonest is the earliest non-zero requeue among results.
func soonest(results []reconcile.Result) reconcile.Result {
	var out reconcile.Result
	for _, r := range results {
		if r.RequeueAfter > 0 && (out.RequeueAfter == 0 || r.RequeueAfter < out.RequeueAfter) {
			out.RequeueAfter = r.RequeueAfter
		}
	}
	return out
}

func uniqueIDs(amis []awsv1.AMI) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range amis {
		if !seen[a.ID] {
			seen[a.ID] = true
			out = append(out, a.ID)
		}
	}
	return out
}

// prettySlice joins up to max names and says how many more there are, as
// upstream's pretty.Slice does.
func prettySlice(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(names[:max], ", "), len(names)-max)
}

func isPlacementGroupNotFound(err error) bool {
	var apiErr interface{ ErrorCode() string }
	return errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidPlacementGroup.Unknown" || apiErr.ErrorCode() == "InvalidPlacementGroupId.NotFound")
}
