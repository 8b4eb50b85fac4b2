package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/karpenter-go/karpenter/pkg/apis"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/overlay"
	disruptioncontroller "github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	awsoperator "github.com/karpenter-go/karpenter/pkg/providers/aws/operator"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// Options configure a Session.
type Options struct {
	// KwokCatalog names the kwok catalog KWOKNodeClass pools launch from
	// (kwok.CatalogDefault when empty); it must match the controller's.
	KwokCatalog string
	// KwokInstanceTypes, when set, is used instead of a catalog (tests).
	KwokInstanceTypes []*scheduling.InstanceType
	// AWS is the configuration EC2NodeClass pools' instance types and
	// prices are resolved with (the SDK's default chain: the user's
	// credentials and region). Nil leaves such pools unresolved; static
	// drift of EC2NodeClass edits needs no AWS and works either way.
	AWS *aws.Config
	// ConsolidationAlgorithm is the controller's --consolidation-algorithm
	// ("upstream" when empty, or "planner"): which consolidation `why node`
	// runs.
	ConsolidationAlgorithm string
	// Planner is the controller's planner settings (payback horizon,
	// restart cost, cool-down; zero values are the planner's defaults).
	Planner repack.Options
}

// Session holds one set of listed objects and the cluster state built from
// them; every answer is computed from it.
type Session struct {
	Objects *Objects
	opts    Options
	cluster *listedCluster
	types   *providers
	// view and request are what the solver's input is built from, as the
	// controller builds it (snapshot.Build): request as disruption
	// simulates, provision as a provisioning round plans (request plus the
	// CapacityBuffers' virtual pods).
	view      snapshot.View
	request   snapshot.Request
	provision snapshot.Request
}

// NewSession builds the cluster state from objects, as the controller's
// informers would have fed it, without a manager or an API server.
func NewSession(o *Objects, opts Options) (*Session, error) {
	types, err := newProviders(o, opts)
	if err != nil {
		return nil, err
	}
	s := &Session{Objects: o, opts: opts, types: types}
	s.cluster = newListedCluster(o, func(pool string) []*scheduling.InstanceType {
		for i := range o.NodePools {
			if o.NodePools[i].Name == pool {
				its, _ := s.types.GetInstanceTypes(context.Background(), &o.NodePools[i])
				return its
			}
		}
		return nil
	})
	s.view = snapshot.Live{Reader: reader{o}, Cloud: s.types, Cluster: s.cluster}
	s.request = snapshot.Request{Options: snapshot.Options{
		// As the provisioner plans, so that `why pod` and `simulate` name
		// the NodeClaims it would create.
		Solver:          scheduling.Options{Robust: true, CapGrowth: true},
		WellKnownLabels: kwok.WellKnownLabels(),
		// IGNORE_DRA_REQUESTS's default: pods with ResourceClaims are
		// neither provisioned for nor counted as pending by disruption.
		IgnoreDRARequests: true,
	}}
	s.provision = s.request
	virtual := o.virtualPods()
	s.provision.Options.VirtualPods = func() []*corev1.Pod { return virtual }
	return s, nil
}

// providers resolve a NodePool's instance types through the cloud
// provider contract: the provider that supports its NodeClass kind
// (GetSupportedNodeClasses) answers, the kwok provider from its catalog
// and the AWS provider from EC2 with the user's credentials. Answers are
// remembered per NodePool for the session.
type providers struct {
	byKind map[schema.GroupKind]cloudprovider.CloudProvider
	// awsConfigured is false without an AWS configuration: EC2NodeClass
	// pools are then refused with a plain reason instead of an SDK error.
	awsConfigured bool
	// overlays are the NodeOverlays the controller has in effect (Ready).
	overlays []v1alpha1.NodeOverlay
	mu       sync.Mutex
	cache    map[string]resolved
}

type resolved struct {
	its []*scheduling.InstanceType
	err error
}

func newProviders(o *Objects, opts Options) (*providers, error) {
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		return nil, err
	}
	kwokOpts := kwok.Options{InstanceTypes: opts.KwokInstanceTypes, Catalog: opts.KwokCatalog}
	if kwokOpts.Catalog == "" {
		kwokOpts.Catalog = kwok.CatalogDefault
	}
	kwokProvider, err := kwok.New(context.Background(), nil, kwokOpts)
	if err != nil {
		return nil, err
	}
	awsCfg := aws.Config{}
	if opts.AWS != nil {
		awsCfg = *opts.AWS
	}
	p := &providers{byKind: map[schema.GroupKind]cloudprovider.CloudProvider{}, awsConfigured: opts.AWS != nil, cache: map[string]resolved{}}
	for i := range o.NodeOverlays {
		if o.NodeOverlays[i].IsReady() {
			p.overlays = append(p.overlays, o.NodeOverlays[i])
		}
	}
	for _, cp := range []cloudprovider.CloudProvider{kwokProvider, awsoperator.NewReadOnly(awsCfg, reader{o}, nil)} {
		for gk := range cloudprovider.SupportedKinds(scheme, cp.GetSupportedNodeClasses()) {
			p.byKind[gk] = cp
		}
	}
	return p, nil
}

// GetInstanceTypes implements snapshot.InstanceTypes.
func (p *providers) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.cache[np.Name]; ok {
		return r.its, r.err
	}
	its, err := p.resolve(ctx, np)
	p.cache[np.Name] = resolved{its: its, err: err}
	return its, err
}

func (p *providers) resolve(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil, fmt.Errorf("nodepool %s has no nodeClassRef", np.Name)
	}
	provider := p.byKind[ref.GroupKind()]
	switch {
	case provider == nil:
		return nil, fmt.Errorf("no cloud provider serves %s.%s %q", ref.Kind, ref.Group, ref.Name)
	case ref.Group == awsv1.Group && !p.awsConfigured:
		return nil, fmt.Errorf("cannot resolve instance types of %s.%s %q without AWS credentials and a region (the SDK's default chain found none)", ref.Kind, ref.Group, ref.Name)
	}
	its, err := provider.GetInstanceTypes(ctx, np)
	if err != nil || len(p.overlays) == 0 {
		return its, err
	}
	// The Ready overlays passed the controller's conflict checks, so
	// evaluating them over this pool alone applies them as it does.
	store, _ := overlay.Evaluate(p.overlays, []overlay.Pool{overlay.PoolOf(np, its)})
	return store.Apply(np.Name, its)
}

// classDrifter is the provider that judges edits of NodeClasses of the
// kind, nil when none can.
func (p *providers) classDrifter(gk schema.GroupKind) cloudprovider.ClassDrifter {
	d, _ := p.byKind[gk].(cloudprovider.ClassDrifter)
	return d
}

// Now is the reference time of the answers.
func (s *Session) Now() time.Time {
	if s.Objects.Time.IsZero() {
		return time.Now()
	}
	return s.Objects.Time.Time
}

// poolSkipReason says why snapshot.Build leaves a NodePool out of
// planning ("" when it does not).
func (s *Session) poolSkipReason(ctx context.Context, np *v1.NodePool) string {
	return snapshot.SkipReason(ctx, s.view, np)
}

// disruptionSnapshot builds the disruption package's input the way the
// disruption controller does, from the listed cluster state.
func (s *Session) disruptionSnapshot(ctx context.Context) *disruption.Snapshot {
	snap := &disruption.Snapshot{Now: s.Now(), NodePools: map[string]*v1.NodePool{}, InstanceTypes: map[string][]*scheduling.InstanceType{}}
	for i := range s.Objects.NodePools {
		np := &s.Objects.NodePools[i]
		snap.NodePools[np.Name] = np
		if its, err := s.types.GetInstanceTypes(ctx, np); err == nil {
			snap.InstanceTypes[np.Name] = its
		}
	}
	for i := range s.Objects.PodDisruptionBudgets {
		snap.PDBs = append(snap.PDBs, &s.Objects.PodDisruptionBudgets[i])
	}
	held := s.bufferHolders(ctx)
	for _, sn := range s.cluster.Nodes() {
		n := disruptioncontroller.NodeOf(sn)
		// As the disruption controller holds the nodes the last
		// provisioning round placed virtual pods on.
		n.Nominated = held[n.Name()] || held[n.NodeClaimName()]
		snap.Nodes = append(snap.Nodes, n)
	}
	return snap
}

// bufferHolders are the nodes and NodeClaims in flight (by name) a
// provisioning round places the CapacityBuffers' virtual pods on.
func (s *Session) bufferHolders(ctx context.Context) map[string]bool {
	held := map[string]bool{}
	if len(s.provision.Options.VirtualPods()) == 0 {
		return held
	}
	snap, err := snapshot.Build(ctx, s.view, s.provision)
	if err != nil || snap.Input == nil {
		return held
	}
	for _, pl := range scheduling.Solve(snap.Input).Placements {
		if pl.Node != "" && snapshot.IsVirtual(pl.Pod) {
			held[pl.Node] = true
		}
	}
	return held
}

// pendingPods are the pods a disruption simulation must plan alongside the
// moved ones, as the controller's simulator does.
func (s *Session) pendingPods() []*corev1.Pod {
	all := make([]*corev1.Pod, len(s.Objects.Pods))
	for i := range s.Objects.Pods {
		all[i] = &s.Objects.Pods[i]
	}
	pods, _ := s.request.PendingPods(all)
	return pods
}
