// Package controllers wires every controller onto the operator's manager.
// It is the one place that decides which controllers run and what they
// share (the cluster-state cache, the cloud provider, the
// insufficient-capacity cache).
package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/overlay"
	"github.com/karpenter-go/karpenter/pkg/controllers/capacitybuffer"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	nodemetrics "github.com/karpenter-go/karpenter/pkg/controllers/metrics/node"
	podmetrics "github.com/karpenter-go/karpenter/pkg/controllers/metrics/pod"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/health"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/termination"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/consistency"
	nodeclaimdisruption "github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/disruption"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/expiration"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/podevents"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeoverlay"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/counter"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/hash"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/readiness"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/registrationhealth"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/validation"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	staticdeprovisioning "github.com/karpenter-go/karpenter/pkg/controllers/static/deprovisioning"
	staticprovisioning "github.com/karpenter-go/karpenter/pkg/controllers/static/provisioning"
	"github.com/karpenter-go/karpenter/pkg/controllers/status"
	disruptionpkg "github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/strategies"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

// Shared is what the controllers have in common. Unavailable is made before
// the cloud provider so the provider can consult it too.
type Shared struct {
	CloudProvider cloudprovider.CloudProvider
	// Unavailable is the insufficient-capacity cache: the lifecycle writes
	// it on ICE, the provisioner and the provider read it. Nil makes one.
	Unavailable *cloudprovider.UnavailableOfferings
	// WellKnownLabels are the provider's own well-known label keys (for
	// kwok, kwok.WellKnownLabels()); every solver Input carries them.
	WellKnownLabels []string
	// ReservationIDLabel is the provider's key for the reservation a
	// reserved NodeClaim targets (see provisioning.Options).
	ReservationIDLabel string
}

// Runtime is what the controllers run on: the operator's manager, its cached
// client, clock, event recorder and options.
type Runtime struct {
	Manager       manager.Manager
	Client        client.Client
	Clock         clock.Clock
	EventRecorder record.EventRecorder
	Options       *options.Options
}

// statusControllers publish the operator_* status series of NodeClaims,
// NodePools, Nodes, the provider's NodeClasses and (gate CapacityBuffer)
// CapacityBuffers as upstream labels them: NodeClaims and Nodes by their
// NodeClass and NodePool labels (Nodes also by initialized), with the
// kind-less series for every kind but Node. NodeClaim transition
// events come from the NodeClaim controllers themselves.
func statusControllers(op Runtime, cloud cloudprovider.CloudProvider) ([]interface {
	Register(context.Context, manager.Manager) error
}, error) {
	scheme := op.Manager.GetScheme()
	var classLabels []string
	var classKinds []status.Options
	for kind, newClass := range cloudprovider.SupportedKinds(scheme, cloud.GetSupportedNodeClasses()) {
		classLabels = append(classLabels, v1.NodeClassLabelKey(kind))
		// The provider's NodeClass, as upstream's AWS provider registers
		// it: default buckets, the kind-less series too.
		classKinds = append(classKinds, status.Options{Object: func() client.Object { return newClass() },
			Metrics: metrics.NodeClassStatusMetrics(strings.ToLower(kind.Kind)), Generic: true, Events: true})
	}
	sort.Strings(classLabels)
	kinds := []status.Options{
		{Object: func() client.Object { return &v1.NodeClaim{} }, Metrics: metrics.NodeClaimStatusMetrics(classLabels),
			LabelKeys: append(append([]string{}, classLabels...), v1.NodePoolLabelKey), Generic: true},
		{Object: func() client.Object { return &v1.NodePool{} }, Metrics: metrics.NodePoolStatusMetrics(), Generic: true, Events: true},
		{Object: func() client.Object { return &corev1.Node{} }, Metrics: metrics.NodeStatusMetrics(classLabels),
			LabelKeys: append(append([]string{}, classLabels...), v1.NodePoolLabelKey, v1.NodeInitializedLabelKey), Events: true},
	}
	kinds = append(kinds, classKinds...)
	if op.Options.FeatureGates.CapacityBuffer {
		// Only with the gate: without it nothing writes a buffer's
		// conditions, and the chart grants no read of CapacityBuffers.
		kinds = append(kinds, status.Options{Object: func() client.Object { return &v1beta1.CapacityBuffer{} },
			Metrics: metrics.CapacityBufferStatusMetrics(), Generic: true, Events: true})
	}
	var out []interface {
		Register(context.Context, manager.Manager) error
	}
	for _, k := range kinds {
		k.Recorder, k.Clock = op.EventRecorder, op.Clock
		c, err := status.New(op.Client, scheme, k)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Register builds the cluster-state cache and registers every controller on
// the runtime's manager. The cloud provider should already carry the metrics
// decorator. It returns the cluster state for callers that observe it.
func Register(ctx context.Context, op Runtime, shared Shared) (*state.Cluster, error) {
	if shared.CloudProvider == nil {
		return nil, fmt.Errorf("registering controllers: no cloud provider")
	}
	if shared.Unavailable == nil {
		shared.Unavailable = cloudprovider.NewUnavailableOfferings(op.Clock, 0)
	}
	kube, cloud := op.Client, shared.CloudProvider
	// NodeOverlays (gate NodeOverlay): every controller below reads instance
	// types through the overlay decorator, so provisioning, consolidation,
	// limits and the cost metrics all see overlaid prices and capacity. The
	// NodeOverlay controller itself reads the provider underneath.
	var overlays *nodeoverlay.Controller
	if op.Options.FeatureGates.NodeOverlay {
		holder := overlay.NewHolder()
		overlays = nodeoverlay.NewController(kube, cloud, holder)
		cloud = overlay.Decorate(cloud, holder)
	}
	cluster := state.NewCluster(op.Clock, kube, state.Options{
		BatchMaxDuration: op.Options.BatchMaxDuration,
		PodMetrics:       !op.Options.DisableClusterStateObservability,
		// Unlaunched NodeClaims count against limits as the solver charged them.
		InstanceTypes: state.CloudInstanceTypes(kube, cloud),
		// Synced reads the NodeClaims and Nodes from the informers' stores.
		Informers: op.Manager.GetCache(),
	})
	// CapacityBuffers (gate CapacityBuffer): their virtual pods, planned
	// for by provisioning, and the nodes holding them, left by disruption.
	var buffers *state.Buffers
	if op.Options.FeatureGates.CapacityBuffer {
		buffers = state.NewBuffers()
	}
	// Launch and registration outcomes, per NodePool, for NodeRegistrationHealthy.
	registrationHealth := nodepoolhealth.NewTracker()
	if err := state.Register(ctx, op.Manager, cluster); err != nil {
		return nil, fmt.Errorf("registering cluster state: %w", err)
	}
	provisioner := provisioning.NewProvisioner(kube, cloud, cluster, op.EventRecorder, provisioning.Options{
		Informers:             op.Manager.GetCache(),
		BatchIdleDuration:     op.Options.BatchIdleDuration,
		BatchMaxDuration:      op.Options.BatchMaxDuration,
		PreferencePolicy:      op.Options.PreferencePolicy,
		MinValuesPolicy:       op.Options.MinValuesPolicy,
		AnticipateReplicaSets: op.Options.FeatureGates.AnticipateReplicaSets,
		Unavailable:           shared.Unavailable,
		WellKnownLabels:       shared.WellKnownLabels,
		ReservationIDLabel:    shared.ReservationIDLabel,
		IgnoreTaints:          []corev1.Taint{disruptionpkg.LaunchTaint},
		IgnoreDRARequests:     op.Options.IgnoreDRARequests,
		Clock:                 op.Clock,
		Buffers:               buffers,
	})
	// Disruption simulates with a builder of its own, configured as
	// provisioning's, so its plans match what a provisioning round would do,
	// and reads the pods from the informer's store as provisioning does.
	// Passes keep what unchanged nodes derive for the solver.
	simulators := disruption.SimulateOver(snapshot.Live{Reader: kube, Cloud: cloud, Cluster: cluster, Informers: op.Manager.GetCache(),
		Prepared: &scheduling.NodeCache{}}, snapshot.Request{Options: snapshot.Options{
		Solver: scheduling.Options{
			PreferencePolicy: scheduling.PreferencePolicy(op.Options.PreferencePolicy),
			MinValuesPolicy:  scheduling.MinValuesPolicy(op.Options.MinValuesPolicy),
			Robust:           true,
			CapGrowth:        true,
		},
		Unavailable:       shared.Unavailable,
		WellKnownLabels:   shared.WellKnownLabels,
		IgnoreTaints:      []corev1.Taint{disruptionpkg.LaunchTaint},
		IgnoreDRARequests: op.Options.IgnoreDRARequests,
	}})
	// The consolidation strategy --consolidation-algorithm names, with
	// upstream's timeouts on the operator's clock.
	strategy, err := strategies.New(strategies.Options{
		Algorithm: op.Options.ConsolidationAlgorithm, SpotToSpot: op.Options.FeatureGates.SpotToSpotConsolidation,
		Now: op.Clock.Now, OnTimeout: disruption.CountTimeout, WellKnownLabels: shared.WellKnownLabels,
		Horizon: op.Options.ConsolidationPaybackHorizon, RestartCost: op.Options.ConsolidationRestartCost, CoolDown: op.Options.ConsolidationCoolDown,
	})
	if err != nil {
		return nil, err
	}
	for _, c := range []interface {
		Register(context.Context, manager.Manager) error
	}{
		provisioner,
		provisioning.NewPodController(kube, provisioner),
		provisioning.NewNodeController(kube, provisioner),
		lifecycle.NewController(kube, cloud, lifecycle.Options{
			Clock:           op.Clock,
			Recorder:        op.EventRecorder,
			Unavailable:     shared.Unavailable,
			RegistrationTTL: op.Options.RegistrationTTL,
			Health:          registrationHealth,
		}),
		termination.NewController(kube, cloud, termination.Options{Clock: op.Clock, Recorder: op.EventRecorder}),
		garbagecollection.NewController(kube, cloud, garbagecollection.Options{Clock: op.Clock}),
		podevents.NewController(kube, op.Clock),
		consistency.NewController(kube, op.Clock, op.EventRecorder),
		nodeclaimdisruption.NewController(kube, cloud, nodeclaimdisruption.Options{Clock: op.Clock}),
		expiration.NewController(kube, cloud, expiration.Options{Clock: op.Clock}),
		hash.NewController(kube),
		validation.NewController(kube),
		readiness.NewController(kube, cloud),
		registrationhealth.NewController(kube, cloud, registrationHealth),
		counter.NewController(kube, cluster, cloud),
		disruption.NewController(kube, cluster, provisioner, simulators, disruption.Options{
			Clock: op.Clock, Recorder: op.EventRecorder, InstanceTypes: cloud,
			Strategy:          strategy,
			DrainDeletionCost: op.Options.ConsolidationDrainDeletionCost,
			Informers:         op.Manager.GetCache(),
			Buffers:           buffers,
			IgnoreDRARequests: op.Options.IgnoreDRARequests,
		}),
	} {
		if err := c.Register(ctx, op.Manager); err != nil {
			return nil, fmt.Errorf("registering %T: %w", c, err)
		}
	}
	// Observability: upstream's node gauges and pod startup series, off
	// with --disable-cluster-state-observability as upstream's.
	if !op.Options.DisableClusterStateObservability {
		nodeMetrics, err := nodemetrics.NewController(cluster, op.Clock, append(sets.List(v1.WellKnownLabels), shared.WellKnownLabels...))
		if err != nil {
			return nil, fmt.Errorf("registering node metrics: %w", err)
		}
		statuses, err := statusControllers(op, cloud)
		if err != nil {
			return nil, err
		}
		for _, c := range append([]interface {
			Register(context.Context, manager.Manager) error
		}{nodeMetrics, podmetrics.NewController(kube, cluster, op.Clock)}, statuses...) {
			if err := c.Register(ctx, op.Manager); err != nil {
				return nil, fmt.Errorf("registering %T: %w", c, err)
			}
		}
	}
	// Gated controllers; the gates default to off, as upstream's.
	var gated []interface {
		Register(context.Context, manager.Manager) error
	}
	if overlays != nil {
		gated = append(gated, overlays)
	}
	if buffers != nil {
		gated = append(gated, capacitybuffer.NewController(kube, buffers, provisioner))
	}
	if op.Options.FeatureGates.StaticCapacity {
		gated = append(gated, staticprovisioning.NewController(kube, cluster), staticdeprovisioning.NewController(kube, cluster, op.Clock))
	}
	if op.Options.FeatureGates.NodeRepair && len(cloud.RepairPolicies()) > 0 {
		gated = append(gated, health.NewController(kube, cloud, op.Clock, op.EventRecorder))
	}
	for _, c := range gated {
		if err := c.Register(ctx, op.Manager); err != nil {
			return nil, fmt.Errorf("registering %T: %w", c, err)
		}
	}
	return cluster, nil
}
