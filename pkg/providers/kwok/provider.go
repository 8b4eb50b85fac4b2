package kwok

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

const (
	// ProviderName is what Name returns.
	ProviderName = "kwok"
	// ProviderIDPrefix starts every provider ID; the rest is the Node name.
	ProviderIDPrefix = "kwok://"
	// DefaultUnavailableTTL is how long an offering that ran out of capacity
	// stays unavailable (upstream's insufficient-capacity cache TTL).
	DefaultUnavailableTTL = 3 * time.Minute
	// partition is the kwok-partition label value; upstream spreads nodes
	// over pre-created partitions and currently has just this one.
	partition = "a"
)

// WellKnownLabels returns the provider's label keys whose values its
// instance types decide (the AWS-style and kwok instance labels, sorted).
// Pods may select on them without a NodePool mentioning them; the snapshot
// builder passes them to the solver in each Input. A fresh slice every call:
// no caller can change what another sees.
func WellKnownLabels() []string {
	return sets.List(ec2WellKnownLabels.Union(kwokv1alpha1.WellKnownLabels))
}

// Options configure the provider. The zero value uses the default catalog,
// registers Nodes immediately and injects no faults.
type Options struct {
	// Catalog names a built-in catalog (CatalogDefault when empty).
	Catalog string
	// InstanceTypesFile, when set, is loaded instead of a built-in catalog.
	InstanceTypesFile string
	// InstanceTypes, when set, is used as is (tests).
	InstanceTypes []*cloudprovider.InstanceType
	// RegistrationDelay is how long an instance takes to appear as a Node
	// when its KWOKNodeClass does not say.
	RegistrationDelay time.Duration
	// Faults to inject from the start; see also SetFaults and
	// FaultsAnnotationKey.
	Faults Faults
	// UnavailableTTL is how long an offering that returned insufficient
	// capacity stays unavailable (DefaultUnavailableTTL when zero).
	UnavailableTTL time.Duration
	// Unavailable, when set, is an external insufficient-capacity cache that
	// Create and GetInstanceTypes also respect.
	Unavailable func(cloudprovider.OfferingKey) bool
	// Clock drives registration delays and the unavailable-offerings TTL.
	Clock clock.WithDelayedExecution
	// Pick chooses one of n equally good offerings (random when nil, as
	// upstream does, which spreads unconstrained nodes over zones).
	Pick func(n int) int
	// RepairToleration is how long a node may stay NotReady before node
	// repair replaces it (DefaultRepairToleration when zero).
	RepairToleration time.Duration
}

// Provider is the kwok cloud provider. It is safe for concurrent use.
type Provider struct {
	kube          client.Client
	ctx           context.Context
	clock         clock.WithDelayedExecution
	instanceTypes []*cloudprovider.InstanceType
	byName        map[string]*cloudprovider.InstanceType
	opts          Options

	mu               sync.Mutex
	faults           Faults
	createErrorsLeft int
	annotationUses   map[string]int
	unavailable      map[cloudprovider.OfferingKey]time.Time // expiry
	pending          map[string]*pendingNode                 // by Node name
	reservedBy       map[string]string                       // Node name -> reservation ID
	reservationsUsed map[string]int
}

// pendingNode is an instance that has launched but whose Node does not
// exist yet.
type pendingNode struct {
	node     *corev1.Node
	created  time.Time
	timer    clock.Timer // nil when it will never register
	canceled bool
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New builds the provider. ctx bounds the background work of delayed
// registrations: when it ends, instances that have not registered never will.
func New(ctx context.Context, kube client.Client, opts Options) (*Provider, error) {
	its := opts.InstanceTypes
	if its == nil {
		var err error
		switch {
		case opts.InstanceTypesFile != "":
			its, err = LoadCatalogFile(opts.InstanceTypesFile)
		case opts.Catalog != "":
			its, err = LoadCatalog(opts.Catalog)
		default:
			its, err = LoadCatalog(CatalogDefault)
		}
		if err != nil {
			return nil, fmt.Errorf("loading kwok instance types: %w", err)
		}
	}
	p := &Provider{
		kube:             kube,
		ctx:              ctx,
		clock:            opts.Clock,
		instanceTypes:    its,
		byName:           make(map[string]*cloudprovider.InstanceType, len(its)),
		opts:             opts,
		annotationUses:   map[string]int{},
		unavailable:      map[cloudprovider.OfferingKey]time.Time{},
		pending:          map[string]*pendingNode{},
		reservedBy:       map[string]string{},
		reservationsUsed: map[string]int{},
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.opts.UnavailableTTL == 0 {
		p.opts.UnavailableTTL = DefaultUnavailableTTL
	}
	if p.opts.Pick == nil {
		p.opts.Pick = rand.IntN
	}
	for _, it := range its {
		p.byName[it.Name] = it
	}
	p.SetFaults(opts.Faults)
	return p, nil
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return ProviderName }

// GetSupportedNodeClasses implements cloudprovider.CloudProvider.
func (p *Provider) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&kwokv1alpha1.KWOKNodeClass{}}
}

// IsDrifted implements cloudprovider.CloudProvider: simulated instances
// never drift from their NodeClass.
func (p *Provider) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// RepairPolicies implements cloudprovider.CloudProvider with upstream kwok's
// policy: a node not Ready for the toleration (10 minutes) is replaced.
func (p *Provider) RepairPolicies() []cloudprovider.RepairPolicy {
	return repairPolicies(p.opts.RepairToleration)
}

// GetInstanceTypes implements cloudprovider.CloudProvider. KWOKNodeClass has
// nothing that narrows the catalog, so every NodePool sees all of it, with
// offerings that recently ran out of capacity marked unavailable.
func (p *Provider) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneUnavailableLocked()
	if len(p.unavailable) == 0 && len(p.reservationsUsed) == 0 && p.opts.Unavailable == nil {
		return p.instanceTypes, nil // nothing to mark: share the catalog
	}
	out := make([]*cloudprovider.InstanceType, len(p.instanceTypes))
	for i, it := range p.instanceTypes {
		out[i] = it
		var offerings []cloudprovider.Offering
		for j := range it.Offerings {
			o := &it.Offerings[j]
			if !o.Available || p.offeringUsableLocked(it, o) {
				continue
			}
			if offerings == nil {
				offerings = append([]cloudprovider.Offering(nil), it.Offerings...)
			}
			offerings[j].Available = false
		}
		if offerings != nil {
			cp := *it
			cp.Offerings = offerings
			out[i] = &cp
		}
	}
	return out, nil
}

// Create implements cloudprovider.CloudProvider: it picks the best compatible
// offering and creates the Node a kubelet would register, now or after the
// registration delay. The Node is named after the NodeClaim, which makes
// Create idempotent: a controller that crashed between Create and recording
// the result gets the same instance back instead of a second one.
func (p *Provider) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	nodeClass, err := p.nodeClass(ctx, nc)
	if err != nil {
		return nil, err
	}
	name := nc.Name

	// Already launched (a retry after a crash or a failed status update)?
	p.mu.Lock()
	pn := p.pending[name]
	p.mu.Unlock()
	if pn != nil {
		return claimFromNode(nc, pn.node), nil
	}
	existing := &corev1.Node{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: name}, existing); err == nil {
		if existing.Spec.ProviderID != ProviderIDPrefix+name {
			return nil, cloudprovider.NewCreateError(fmt.Errorf("a node named %s exists and is not a kwok instance", name), "NodeNameConflict", "A node with this NodeClaim's name already exists")
		}
		if existing.DeletionTimestamp != nil {
			return nil, cloudprovider.NewCreateError(fmt.Errorf("node %s is terminating", name), "InstanceTerminating", "The instance for this NodeClaim is terminating")
		}
		return claimFromNode(nc, existing), nil
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("checking for an existing node %s: %w", name, err)
	}

	annotationFaults, err := p.annotationFaults(nodeClass)
	if err != nil {
		return nil, cloudprovider.NewCreateError(err, "InvalidFaults", err.Error())
	}
	if p.consumeCreateError(nodeClass, annotationFaults) {
		return nil, cloudprovider.NewCreateError(errors.New("injected create error"), "InjectedCreateError", "kwok was told to fail this launch")
	}

	reqs, err := cloudprovider.NodeClaimRequirements(nc)
	if err != nil {
		return nil, err
	}
	it, offering, err := p.choose(ctx, nc, reqs)
	if err != nil {
		return nil, err
	}
	key := cloudprovider.Key(it, offering)
	if p.Faults().iced(key) || annotationFaults.iced(key) {
		p.markUnavailable(key)
		return nil, cloudprovider.NewInsufficientCapacityError(
			fmt.Errorf("offering %s/%s/%s has no capacity (injected)", key.InstanceType, key.Zone, key.CapacityType), key)
	}

	node := p.buildNode(nc, reqs, it, offering)
	delay, never := p.registrationDelay(nodeClass, annotationFaults)

	p.mu.Lock()
	if offering.ReservationID != "" {
		p.reservedBy[name] = offering.ReservationID
		p.reservationsUsed[offering.ReservationID]++
	}
	if never || delay > 0 {
		pn := &pendingNode{node: node, created: p.clock.Now()}
		if !never {
			// The callback runs with the fake clock's lock held in tests, so
			// it only hands off to a goroutine.
			pn.timer = p.clock.AfterFunc(delay, func() { go p.register(name, pn) })
		}
		p.pending[name] = pn
		p.mu.Unlock()
		log.FromContext(ctx).V(1).Info("launched kwok instance", "node", name, "instance-type", it.Name,
			"zone", offering.Zone, "capacity-type", offering.CapacityType, "registration-delay", delay, "never-registers", never)
		return claimFromNode(nc, node), nil
	}
	p.mu.Unlock()

	created, err := p.createNode(ctx, node)
	if err != nil {
		p.releaseReservation(name)
		return nil, cloudprovider.NewCreateError(err, "NodeCreationFailed", err.Error())
	}
	p.hangAfterCreate(ctx, name, annotationFaults)
	return claimFromNode(nc, created), nil
}

// Delete implements cloudprovider.CloudProvider. A simulated instance is gone
// as soon as its termination is requested (its Node's own finalizers are the
// controllers' business), so Delete always ends in NodeClaimNotFoundError
// unless the API server fails. A NodeClaim without a provider ID is looked up
// by name, so an instance launched just before a crash is not leaked.
func (p *Provider) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	name := nc.Name
	if nc.Status.ProviderID != "" {
		var ok bool
		if name, ok = nodeName(nc.Status.ProviderID); !ok {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("provider ID %q is not a kwok instance", nc.Status.ProviderID))
		}
	}
	p.mu.Lock()
	if pn := p.pending[name]; pn != nil {
		pn.canceled = true
		if pn.timer != nil {
			pn.timer.Stop()
		}
		delete(p.pending, name)
	}
	p.mu.Unlock()
	p.releaseReservation(name)

	node := &corev1.Node{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", name))
		}
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	if node.Spec.ProviderID != ProviderIDPrefix+name {
		// Same name, someone else's node: never ours to delete.
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", name))
	}
	if node.DeletionTimestamp == nil {
		if err := p.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting node %s: %w", name, err)
		}
	}
	return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated", name))
}

// Get implements cloudprovider.CloudProvider.
func (p *Provider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	name, ok := nodeName(providerID)
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("provider ID %q is not a kwok instance", providerID))
	}
	node := &corev1.Node{}
	err := p.kube.Get(ctx, client.ObjectKey{Name: name}, node)
	if err == nil && node.Spec.ProviderID != providerID {
		err = apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	switch {
	case err == nil && node.DeletionTimestamp == nil:
		return claimFromNode(nil, node), nil
	case err == nil:
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminating", name))
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("getting node %s: %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pn := p.pending[name]; pn != nil {
		return pn.claim(), nil
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", name))
}

// List implements cloudprovider.CloudProvider: every live Node this provider
// created (kwok label and provider ID), plus instances still registering.
func (p *Provider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	nodes := &corev1.NodeList{}
	// Any value of the kwok label: a node whose kubelet was stopped
	// (StopKubelet) carries another value but is still our instance.
	if err := p.kube.List(ctx, nodes, client.HasLabels{kwokv1alpha1.KWOKNodeLabelKey}); err != nil {
		return nil, fmt.Errorf("listing kwok nodes: %w", err)
	}
	var out []*v1.NodeClaim
	seen := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) || n.DeletionTimestamp != nil {
			continue
		}
		seen[n.Name] = true
		out = append(out, claimFromNode(nil, n))
	}
	p.mu.Lock()
	for name, pn := range p.pending {
		if !seen[name] {
			out = append(out, pn.claim())
		}
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// nodeClass resolves the NodeClaim's KWOKNodeClass: a missing class means
// nothing can launch (insufficient capacity, as upstream), a class whose
// Ready condition is False is not ready. A NodeClaim without a class
// reference launches with defaults.
func (p *Provider) nodeClass(ctx context.Context, nc *v1.NodeClaim) (*kwokv1alpha1.KWOKNodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil {
		return nil, nil
	}
	if (ref.Group != "" && ref.Group != kwokv1alpha1.Group) || (ref.Kind != "" && ref.Kind != "KWOKNodeClass") {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("node class %s/%s is not supported by the kwok provider", ref.Group, ref.Kind))
	}
	class := &kwokv1alpha1.KWOKNodeClass{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("resolving node class %s: %w", ref.Name, err))
		}
		return nil, fmt.Errorf("resolving node class %s: %w", ref.Name, err)
	}
	for _, c := range class.Status.Conditions {
		if c.Type == "Ready" && c.Status == metav1.ConditionFalse {
			return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("node class %s: %s", class.Name, c.Message))
		}
	}
	return class, nil
}
