package v1

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// This file is the one place that names every label, annotation and
// finalizer Karpenter reads or writes. Providers add their own well-known
// labels and restricted domains to the sets below from their init functions.

// Values of well-known labels.
const (
	ArchitectureAmd64    = "amd64"
	ArchitectureArm64    = "arm64"
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// Labels in Karpenter's own domain.
const (
	// NodePoolLabelKey names the owning NodePool on NodeClaims and Nodes. It
	// also marks a node as managed by Karpenter.
	NodePoolLabelKey = Group + "/nodepool"
	// CapacityTypeLabelKey is spot, on-demand or reserved.
	CapacityTypeLabelKey = Group + "/capacity-type"
	// NodeRegisteredLabelKey is set to "true" on a Node once registration
	// has synced the NodeClaim onto it.
	NodeRegisteredLabelKey = Group + "/registered"
	// NodeInitializedLabelKey is set to "true" on a Node once it is ready,
	// its startup taints are gone and its resources are registered.
	NodeInitializedLabelKey = Group + "/initialized"
	// NodeDoNotSyncTaintsLabelKey, set to "true" on a Node (usually by its
	// bootstrap), stops Karpenter from merging NodeClaim taints into it.
	NodeDoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"
)

// Labels outside Karpenter's domain that Karpenter writes.
const (
	// NodeExcludeFromExternalLoadBalancersLabelKey is added to a Node when
	// termination taints it, so that load balancers stop sending traffic to
	// it; the value is NodeExcludeFromExternalLoadBalancersLabelValue.
	NodeExcludeFromExternalLoadBalancersLabelKey   = corev1.LabelNodeExcludeBalancers
	NodeExcludeFromExternalLoadBalancersLabelValue = "karpenter"
)

// Annotations.
const (
	// DoNotDisruptAnnotationKey on a Pod is "true" (blocks voluntary
	// disruption of its node and eviction by Karpenter) or a duration (the
	// same, while the pod is younger than it). On a Node, "true" removes the
	// node from disruption candidates.
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// NodePoolHashAnnotationKey carries the hash of the NodePool template on
	// the NodePool and on each NodeClaim; a mismatch (at equal hash versions)
	// means the NodeClaim drifted.
	NodePoolHashAnnotationKey = Group + "/nodepool-hash"
	// NodePoolHashVersionAnnotationKey carries NodePoolHashVersion.
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	// NodeClaimTerminationTimestampAnnotationKey is the RFC 3339 deadline by
	// which a deleting node must be drained (deletion time plus
	// terminationGracePeriod).
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
	// NodeClaimMinValuesRelaxedAnnotationKey records ("true"/"false") whether
	// minValues was relaxed to launch the NodeClaim (BestEffort policy).
	NodeClaimMinValuesRelaxedAnnotationKey = Group + "/nodeclaim-min-values-relaxed"
	// DRADriversAnnotationKey lists, comma-separated, the DRA drivers whose
	// ResourceSlices must appear before the node counts as initialized.
	DRADriversAnnotationKey = Group + "/requested-dra-drivers"
	// PriceOverlayAppliedAnnotationKey and CapacityOverlayAppliedAnnotationKey
	// record that a NodeOverlay changed the price or capacity of the chosen
	// instance type.
	PriceOverlayAppliedAnnotationKey    = Group + "/price-overlay-applied"
	CapacityOverlayAppliedAnnotationKey = Group + "/capacity-overlay-applied"
	// CapacityBufferFakePodAnnotationKey, CapacityBufferNameAnnotationKey and
	// CapacityBufferNamespaceAnnotationKey mark the virtual pods a
	// CapacityBuffer injects into scheduling simulations.
	CapacityBufferFakePodAnnotationKey   = Group + "/capacity-buffer-fake-pod"
	CapacityBufferNameAnnotationKey      = Group + "/capacity-buffer-name"
	CapacityBufferNamespaceAnnotationKey = Group + "/capacity-buffer-namespace"
	// ProviderCompatibilityAnnotationKey is the compatibility marker.
	ProviderCompatibilityAnnotationKey = "compatibility." + Group + "/provider"
	// PodDeletionCostAnnotationKey is read as part of a pod's eviction cost.
	PodDeletionCostAnnotationKey = "controller.kubernetes.io/pod-deletion-cost"
)

// Finalizers.
const (
	// TerminationFinalizer is put on NodeClaims (before launch) and Nodes (at
	// registration) so that Karpenter drains the node and terminates the
	// instance before the objects go away.
	TerminationFinalizer = Group + "/termination"
)

// Label key aliases that Kubernetes deprecated but users still write.
const (
	LabelBetaArch         = "beta.kubernetes.io/arch"
	LabelBetaOS           = "beta.kubernetes.io/os"
	LabelBetaInstanceType = corev1.LabelInstanceType
	LabelBetaZone         = corev1.LabelFailureDomainBetaZone
	LabelBetaRegion       = corev1.LabelFailureDomainBetaRegion
)

var (
	// RestrictedLabelDomains are label domains (and their subdomains) that
	// only Karpenter and its provider may write, except for WellKnownLabels.
	RestrictedLabelDomains = sets.New(Group)

	// RestrictedLabels may never be set or required by users because
	// Karpenter or the kubelet owns them.
	RestrictedLabels = sets.New(corev1.LabelHostname)

	// WellKnownLabels are the labels whose values Karpenter knows from
	// instance types and offerings, so NodePools and pods may constrain them.
	WellKnownLabels = sets.New(
		NodePoolLabelKey,
		corev1.LabelTopologyZone,
		corev1.LabelTopologyRegion,
		corev1.LabelInstanceTypeStable,
		corev1.LabelArchStable,
		corev1.LabelOSStable,
		CapacityTypeLabelKey,
		corev1.LabelWindowsBuild,
	)

	// WellKnownValuesForRequirements lists, for labels with a closed set of
	// values, the values that mean something. A requirement on such a label
	// must allow at least one of them.
	WellKnownValuesForRequirements = map[string]sets.Set[string]{
		CapacityTypeLabelKey: sets.New(CapacityTypeOnDemand, CapacityTypeSpot, CapacityTypeReserved),
	}

	// WellKnownLabelsForOfferings are the labels that distinguish offerings
	// of one instance type (where and how it is bought).
	WellKnownLabelsForOfferings = sets.New(corev1.LabelTopologyZone, CapacityTypeLabelKey)

	// NormalizedLabels maps deprecated aliases to the well-known label they
	// stand for; pod and NodePool requirements are rewritten through it.
	NormalizedLabels = map[string]string{
		LabelBetaZone:         corev1.LabelTopologyZone,
		LabelBetaRegion:       corev1.LabelTopologyRegion,
		LabelBetaArch:         corev1.LabelArchStable,
		LabelBetaOS:           corev1.LabelOSStable,
		LabelBetaInstanceType: corev1.LabelInstanceTypeStable,
	}

	// WellKnownResources are the resources every instance type reports.
	WellKnownResources = sets.New(
		corev1.ResourceCPU,
		corev1.ResourceMemory,
		corev1.ResourceEphemeralStorage,
		corev1.ResourcePods,
	)
)

// ResourceNodes is the pseudo-resource that counts nodes in NodePool limits
// and status.
const ResourceNodes corev1.ResourceName = "nodes"

// GetLabelDomain returns the prefix of a label key before the slash, or ""
// when the key has none.
func GetLabelDomain(key string) string {
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return ""
	}
	return domain
}

// IsRestrictedLabel returns an error when users may not set or require key:
// it is a restricted label, or it lies in a restricted domain without being
// well known.
func IsRestrictedLabel(key string) error {
	if WellKnownLabels.Has(key) {
		return nil
	}
	if RestrictedLabels.Has(key) || inRestrictedDomain(key) {
		return fmt.Errorf("label %q is restricted: use a well-known label (%s) or a label outside the domains %s",
			key, strings.Join(sets.List(WellKnownLabels), ", "), strings.Join(sets.List(RestrictedLabelDomains), ", "))
	}
	return nil
}

func inRestrictedDomain(key string) bool {
	domain := GetLabelDomain(key)
	for restricted := range RestrictedLabelDomains {
		if domain == restricted || strings.HasSuffix(domain, "."+restricted) {
			return true
		}
	}
	return false
}

// HasKnownValues returns an error when the requirement is on a label with a
// closed value set but allows none of those values.
func HasKnownValues(requirement NodeSelectorRequirementWithMinValues) error {
	known, ok := WellKnownValuesForRequirements[requirement.Key]
	if !ok || known.HasAny(requirement.Values...) {
		return nil
	}
	return fmt.Errorf("invalid values %v for key %q, expected one of %v", requirement.Values, requirement.Key, sets.List(known))
}

// NodeClassLabelKey is the label that names a node's NodeClass, e.g.
// karpenter.k8s.aws/ec2nodeclass for the EC2NodeClass kind.
func NodeClassLabelKey(gk schema.GroupKind) string {
	return gk.Group + "/" + strings.ToLower(gk.Kind)
}
