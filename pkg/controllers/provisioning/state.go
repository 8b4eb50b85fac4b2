package provisioning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Cluster is what the provisioner needs of the cluster state.
type Cluster interface {
	// Synced reports whether the state holds every Node and NodeClaim the
	// API server has; provisioning from a partial picture would launch
	// capacity that already exists.
	Synced(ctx context.Context) bool
	// SchedulingNodes snapshots the nodes and in-flight NodeClaims pods can
	// still go to (not being deleted), with their bound pods.
	SchedulingNodes() []*scheduling.ExistingNode
	// NodePoolResources is what the pool has provisioned: the capacity of
	// its nodes and in-flight NodeClaims plus the "nodes" pseudo-resource.
	NodePoolResources(nodePool string) corev1.ResourceList
}

// NodeClaimTracker is optionally implemented by the Cluster: the provisioner
// reports each NodeClaim it creates so that the next round counts it even if
// the informer has not delivered it yet.
type NodeClaimTracker interface {
	UpdateNodeClaim(nc *v1.NodeClaim)
}

// PodNominator is optionally implemented by the Cluster: nodes that pending
// pods were nominated to are protected from disruption for a while.
type PodNominator interface {
	NominateNodeForPod(ctx context.Context, nodeName string)
}

// UnavailableOfferings is the insufficient-capacity cache: offerings that
// recently failed to launch are left out of planning.
type UnavailableOfferings interface {
	Keys() []scheduling.OfferingKey
}

// Recorder publishes Kubernetes events (client-go's record.EventRecorder
// satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// PodScheduling is optionally implemented by the Cluster: it keeps when
// each pod was first seen provisionable and when a round first decided on
// it, which the pod startup and scheduling metrics measure from.
type PodScheduling interface {
	AckPods(pods ...*corev1.Pod)
	MarkPodSchedulingDecisions(placed map[types.NamespacedName]bool)
}
