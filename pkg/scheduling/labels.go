package scheduling

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Label keys the solver needs to know by name. They are repeated here rather
// than imported so that the solver stays a leaf package that any caller
// (controller, CLI, test) can use without pulling in the API packages.
const (
	LabelHostname     = corev1.LabelHostname
	LabelZone         = corev1.LabelTopologyZone
	LabelRegion       = corev1.LabelTopologyRegion
	LabelInstanceType = corev1.LabelInstanceTypeStable
	LabelArch         = corev1.LabelArchStable
	LabelOS           = corev1.LabelOSStable
	LabelWindowsBuild = corev1.LabelWindowsBuild

	LabelNodePool      = "karpenter.sh/nodepool"
	LabelCapacityType  = "karpenter.sh/capacity-type"
	LabelReservationID = "karpenter.sh/reservation-id"

	CapacityTypeReserved = "reserved"
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"

	// ResourceNodes is the pseudo-resource a NodePool limit uses to cap the
	// number of nodes.
	ResourceNodes corev1.ResourceName = "nodes"
)

// betaAliases maps deprecated label keys to the stable key they stand for, so
// that a pod selecting on the old name still matches nodes labelled with the
// new one.
var betaAliases = map[string]string{
	corev1.LabelFailureDomainBetaZone:   LabelZone,
	corev1.LabelFailureDomainBetaRegion: LabelRegion,
	"beta.kubernetes.io/arch":           LabelArch,
	"beta.kubernetes.io/os":             LabelOS,
	corev1.LabelInstanceType:            LabelInstanceType,
	// The EBS CSI driver labels PV node affinity with its own zone key.
	"topology.ebs.csi.aws.com/zone": LabelZone,
}

// NormalizeKey returns the stable label key for a beta or driver alias, and the
// key unchanged otherwise.
func NormalizeKey(key string) string {
	if k, ok := betaAliases[key]; ok {
		return k
	}
	return key
}

// defaultWellKnownLabels are the generic Kubernetes and karpenter.sh keys
// whose values come from the cloud provider (instance type, offering,
// NodePool). A pod may require one of them even when no NodePool mentions
// it: the instance types decide. They are also never copied into NodeClaim
// labels, because the provider sets them on the node itself. Providers add
// their own keys per solve through Input.WellKnownLabels; this map is never
// written, so the solver's answers do not depend on what is linked in.
var defaultWellKnownLabels = map[string]bool{
	LabelZone:          true,
	LabelRegion:        true,
	LabelInstanceType:  true,
	LabelArch:          true,
	LabelOS:            true,
	LabelWindowsBuild:  true,
	LabelNodePool:      true,
	LabelCapacityType:  true,
	LabelReservationID: true,
	LabelHostname:      true,
}

// DefaultWellKnownLabels returns the generic well-known keys (a copy).
func DefaultWellKnownLabels() []string { return sortedKeys(defaultWellKnownLabels) }

// wellKnownSet is the default set plus extra; without extra it is the
// default map itself (read only).
func wellKnownSet(extra []string) map[string]bool {
	if len(extra) == 0 {
		return defaultWellKnownLabels
	}
	out := make(map[string]bool, len(defaultWellKnownLabels)+len(extra))
	for k := range defaultWellKnownLabels {
		out[k] = true
	}
	for _, k := range extra {
		out[k] = true
	}
	return out
}

// restrictedDomains are label domains owned by Karpenter or its providers; a
// requirement in them produces no NodeClaim label unless well known.
var restrictedDomains = []string{"karpenter.sh", "karpenter.k8s.aws", "karpenter.kwok.sh", "kubernetes.io", "k8s.io"}

// labelDomainExceptions are sub-domains of restricted ones that users may set.
var labelDomainExceptions = []string{"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}

// isRestrictedNodeLabel reports whether a requirement key must not be turned
// into a NodeClaim label by the solver; wellKnown is the solve's set.
func isRestrictedNodeLabel(key string, wellKnown map[string]bool) bool {
	if wellKnown[key] {
		return true
	}
	domain := ""
	if i := strings.IndexByte(key, '/'); i >= 0 {
		domain = key[:i]
	}
	for _, d := range labelDomainExceptions {
		if strings.HasSuffix(domain, d) {
			return false
		}
	}
	for _, d := range restrictedDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
