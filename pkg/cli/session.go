package cli

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	disruptioncontroller "github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
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
	// ConsolidationAlgorithm is the controller's --consolidation-algorithm
	// ("upstream" when empty, or "planner"): which consolidation `why node`
	// runs.
	ConsolidationAlgorithm string
	// Planner is the controller's planner settings (payback horizon,
	// restart cost, cool-down; zero values are repack's defaults).
	Planner repack.Options
}

// Session holds one set of listed objects and the cluster state built from
// them; every answer is computed from it.
type Session struct {
	Objects *Objects
	opts    Options
	cluster *listedCluster
	types   *instanceTypes
	// view and request are what the solver's input is built from, as the
	// controller builds it (snapshot.Build).
	view    snapshot.View
	request snapshot.Request
}

// NewSession builds the cluster state from objects, as the controller's
// informers would have fed it, without a manager or an API server.
func NewSession(o *Objects, opts Options) (*Session, error) {
	its := opts.KwokInstanceTypes
	if its == nil {
		name := opts.KwokCatalog
		if name == "" {
			name = kwok.CatalogDefault
		}
		var err error
		if its, err = kwok.LoadCatalog(name); err != nil {
			return nil, err
		}
	}
	s := &Session{Objects: o, opts: opts, types: &instanceTypes{kwok: its}}
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
		Solver:          scheduling.Options{Robust: true},
		WellKnownLabels: kwok.WellKnownLabels(),
	}}
	return s, nil
}

// instanceTypes resolves instance types without cloud credentials: only
// KWOKNodeClass pools can be answered, from the kwok catalog.
type instanceTypes struct{ kwok []*scheduling.InstanceType }

func (t *instanceTypes) GetInstanceTypes(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil, fmt.Errorf("nodepool %s has no nodeClassRef", np.Name)
	}
	if ref.Group == kwokv1alpha1.Group && ref.Kind == "KWOKNodeClass" {
		return t.kwok, nil
	}
	return nil, fmt.Errorf("cannot resolve instance types of %s.%s %q without cloud credentials", ref.Kind, ref.Group, ref.Name)
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
	for _, sn := range s.cluster.Nodes() {
		snap.Nodes = append(snap.Nodes, disruptioncontroller.NodeOf(sn))
	}
	return snap
}

// pendingPods are the pods a disruption simulation must plan alongside the
// moved ones, as the controller's simulator does.
func (s *Session) pendingPods() []*corev1.Pod {
	all := make([]*corev1.Pod, len(s.Objects.Pods))
	for i := range s.Objects.Pods {
		all[i] = &s.Objects.Pods[i]
	}
	pods, _ := snapshot.PendingPods(all)
	return pods
}
