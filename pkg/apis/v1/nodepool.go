package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolSpec says which nodes a NodePool may launch and how Karpenter may
// take them away again.
//
// A NodePool is dynamic (nodes follow pending pods) unless replicas is set,
// which makes it static (a fixed node count). The two modes interpret limits,
// weight and disruption differently, so switching between them is refused
// and the fields that only make sense for dynamic pools are rejected on
// static ones.
//
// +kubebuilder:validation:XValidation:rule="has(self.replicas) == has(oldSelf.replicas)",message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",message="only 'limits.nodes' is supported on static NodePools"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.weight)",message="'weight' is not supported on static NodePools"
type NodePoolSpec struct {
	// Template is stamped onto every NodeClaim the pool creates; scheduling
	// then narrows it to what the pending pods need.
	// +required
	Template NodeClaimTemplate `json:"template"`

	// Disruption controls consolidation and caps concurrent voluntary
	// disruption. Omitting it means consolidateAfter 0s and the defaults
	// below.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitzero"`

	// Limits caps the summed capacity of the pool's NodeClaims, per resource
	// name (including the pseudo-resource "nodes"). Static pools accept only
	// "nodes".
	// +optional
	Limits Limits `json:"limits,omitempty"`

	// Weight orders NodePools: higher weights are tried first, unset counts
	// as 0. Not allowed on static pools.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// Replicas makes the pool static: Karpenter keeps exactly this many nodes
	// regardless of pods, ignores consolidationPolicy and consolidateAfter,
	// and serves it through the scale subresource (kubectl scale). Alpha.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Disruption groups the knobs of voluntary disruption.
type Disruption struct {
	// ConsolidateAfter is how long a node must go without pod churn before
	// consolidation may act on it; "Never" turns consolidation (including
	// removal of empty nodes) off. Ignored on static pools.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="self == 'Never' || duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`

	// ConsolidationPolicy picks which nodes consolidation considers: only
	// empty ones, empty or underutilized ones, or underutilized ones whose
	// move scores well enough against its disruption cost (Balanced).
	// Ignored on static pools.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +kubebuilder:validation:Enum:=WhenEmpty;WhenEmptyOrUnderutilized;Balanced
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// Budgets cap how many of the pool's nodes may be voluntarily disrupted
	// at once. The most restrictive active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty" hash:"ignore"`
}

// Budget limits concurrent disruption, optionally only during a recurring
// window and only for some disruption reasons.
type Budget struct {
	// Reasons restricts the budget to these disruption reasons; unset means
	// every reason.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`

	// Nodes is the number ("5") or percentage ("10%", rounded up) of the
	// pool's nodes that may be disrupting at once. A string rather than an
	// IntOrString so that both forms can carry one pattern.
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes" hash:"ignore"`

	// Schedule is a cron expression (UTC, no time zones) at which the budget
	// becomes active; it stays active for Duration. Unset means always
	// active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty" hash:"ignore"`

	// Duration is how long the budget stays active after each schedule hit.
	// Hours and minutes only, since cron has minute resolution; the optional
	// trailing "0s" admits what metav1.Duration prints.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *Duration `json:"duration,omitempty" hash:"ignore"`
}

// ConsolidationPolicy selects which nodes consolidation may remove or
// replace.
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// BalancedK is the Balanced policy's scoring constant: a consolidation move
// is taken when its score is at least 1/BalancedK.
const BalancedK int32 = 2

// DisruptionReason names a voluntary disruption method a budget can target.
// +kubebuilder:validation:Enum={Underutilized,Empty,Drifted}
type DisruptionReason string

// Disruption reasons that budgets can name.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Limits is a ceiling on the summed capacity of a pool's NodeClaims.
type Limits corev1.ResourceList

// NodeClaimTemplate is the NodeClaim a NodePool stamps out, minus the
// resource requests that scheduling fills in.
type NodeClaimTemplate struct {
	ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the part of metadata a template may carry. Labels are
// validated here (unlike on NodeClaim) because users write them.
type ObjectMeta struct {
	// Labels are copied onto every NodeClaim and Node of the pool. Keys in
	// Karpenter's own domains are reserved.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule=`self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))`
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule=`self.all(x, x != "karpenter.sh/nodepool")`
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule=`self.all(x, x != "kubernetes.io/hostname")`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule=`self.all(x, x in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition", "karpenter.k8s.aws/nitro-sandbox"] || !x.find("^([^/]+)").endsWith("karpenter.k8s.aws"))`
	// +mapType=atomic
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// Annotations are copied onto every NodeClaim and Node of the pool.
	// +mapType=granular
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LabelValue is a Kubernetes label value. It is a named type only so that
// the CRD can validate the values of the template's label map.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelMap returns the template labels as a plain map, the shape every other
// API expects. It returns nil for no labels.
func (m ObjectMeta) LabelMap() map[string]string {
	if m.Labels == nil {
		return nil
	}
	out := make(map[string]string, len(m.Labels))
	for k, v := range m.Labels {
		out[k] = string(v)
	}
	return out
}

// SetLabelMap replaces the template labels with a plain map.
func (m *ObjectMeta) SetLabelMap(labels map[string]string) {
	if labels == nil {
		m.Labels = nil
		return
	}
	m.Labels = make(map[string]LabelValue, len(labels))
	for k, v := range labels {
		m.Labels[k] = LabelValue(v)
	}
}

// NodeClaimTemplateSpec is NodeClaimSpec without resource requests, which
// users cannot set on a pool.
type NodeClaimTemplateSpec struct {
	// Taints are put on each node at registration; pods must tolerate them to
	// be provisioned for by this pool.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are put on each node at registration and are expected to
	// be removed by someone else (typically a DaemonSet). Pods need not
	// tolerate them, and a node is not initialized until they are gone.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// Requirements bound the instance types, zones, capacity types and other
	// labels of the pool's nodes. Drift compares them directly, so they are
	// left out of the template hash.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:items:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule=`self.key != "karpenter.sh/nodepool"`,fieldPath=".key"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements" hash:"ignore"`

	// NodeClassRef names the provider-specific NodeClass. Its group and kind
	// are fixed once set: nodes already launched from one kind of NodeClass
	// cannot be reinterpreted as another.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`

	// TerminationGracePeriod bounds how long draining a node may take. When
	// it runs out, remaining pods are deleted regardless of PDBs and
	// karpenter.sh/do-not-disrupt; pods are deleted early enough to get their
	// own terminationGracePeriodSeconds before the deadline. Unset means
	// wait for the drain indefinitely.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`

	// ExpireAfter is the maximum age of a node, measured from creation; an
	// expired NodeClaim is deleted without waiting for budgets. "Never"
	// disables expiry.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="self == 'Never' || duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeClaimFromTemplate is the NodeClaim a pool's template stamps, before
// any pod sizes it: the template's labels, then extraLabels, then the
// nodepool and nodeclass labels; the template's annotations with the hash
// annotations drift detection compares against; an owner reference so
// that deleting the NodePool cascades to its NodeClaims; and the
// template's taints, requirements, class and timings; and the termination
// finalizer, which the lifecycle would otherwise add with a patch of its
// own before launching (a request per NodeClaim). It shares the template's
// slices; the dynamic and static provisioners both start here.
func (np *NodePool) NodeClaimFromTemplate(extraLabels map[string]string) *NodeClaim {
	t := np.Spec.Template
	labels := map[string]string{}
	for k, v := range t.LabelMap() {
		labels[k] = v
	}
	for k, v := range extraLabels {
		labels[k] = v
	}
	labels[NodePoolLabelKey] = np.Name
	if ref := t.Spec.NodeClassRef; ref != nil {
		labels[NodeClassLabelKey(ref.GroupKind())] = ref.Name
	}

	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	annotations[NodePoolHashAnnotationKey] = np.Hash()
	annotations[NodePoolHashVersionAnnotationKey] = NodePoolHashVersion
	blockOwnerDeletion := true

	return &NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			Finalizers:   []string{TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         GroupVersion.String(),
				Kind:               "NodePool",
				Name:               np.Name,
				UID:                np.UID,
				BlockOwnerDeletion: &blockOwnerDeletion,
			}},
		},
		Spec: NodeClaimSpec{
			Taints:                 t.Spec.Taints,
			StartupTaints:          t.Spec.StartupTaints,
			Requirements:           t.Spec.Requirements,
			NodeClassRef:           t.Spec.NodeClassRef,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			ExpireAfter:            t.Spec.ExpireAfter,
		},
	}
}

// NodePool is a set of nodes that Karpenter launches and removes under one
// set of constraints.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description=""
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolHashVersion is stamped next to the template hash. Bump it whenever
// the hash of an unchanged NodePool would change (a default changes, a field
// joins or leaves the hash), so that existing NodeClaims are re-stamped
// instead of being reported as drifted.
const NodePoolHashVersion = "v3"

// IsStatic reports whether the pool keeps a fixed node count.
func (in *NodePool) IsStatic() bool {
	return in.Spec.Replicas != nil
}

// NodePoolList is a list of NodePools.
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}
