package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NodeClaimSpec is the request for one node. It is immutable: a NodeClaim
// stands for an instance that has been (or is being) launched with exactly
// these constraints, so changing them afterwards would be a lie.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type NodeClaimSpec struct {
	// Taints are put on the node at registration.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are put on the node at registration and are expected to
	// be removed by someone else.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// Requirements are the resolved label constraints the instance was
	// chosen under.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`

	// Resources are the summed requests of the pods the NodeClaim was sized
	// for; the cloud provider filters instance types by them.
	// +optional
	Resources ResourceRequirements `json:"resources,omitzero"`

	// NodeClassRef names the provider-specific NodeClass.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`

	// TerminationGracePeriod bounds how long draining the node may take; see
	// NodeClaimTemplateSpec.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`

	// ExpireAfter is the maximum age of the node; "Never" disables expiry.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:XValidation:message="must be at most 2562047h",rule="self == 'Never' || duration(self) <= duration('2562047h')"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeSelectorOpGte and NodeSelectorOpLte extend corev1's operators with
// inclusive integer comparisons, which Karpenter understands but the
// Kubernetes scheduler does not.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement that
// may also demand flexibility: with minValues, at least that many distinct
// values of the key must remain possible when an instance is chosen.
//
// The key rules here are shared by NodePool templates and NodeClaims;
// NodePool adds that karpenter.sh/nodepool may not be required, since
// Karpenter sets it itself.
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule=`self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")`
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule=`self != "kubernetes.io/hostname"`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule=`self in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition", "karpenter.k8s.aws/nitro-sandbox"] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")`
	// +required
	Key string `json:"key"`

	// Operator relates the key to the values: In, NotIn, Exists,
	// DoesNotExist, Gt, Lt, Gte or Lte.
	// +kubebuilder:validation:Enum:=Gte;Lte;In;NotIn;Exists;DoesNotExist;Gt;Lt
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values must be non-empty for In, empty for Exists and DoesNotExist, and
	// a single non-negative integer for Gt, Lt, Gte and Lte.
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`

	// MinValues is the minimum number of distinct values of the key that must
	// stay available. Alpha.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeSelectorRequirement returns the requirement without minValues.
func (r NodeSelectorRequirementWithMinValues) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
}

// NodeClassReference points at a cluster-scoped NodeClass object.
type NodeClassReference struct {
	// Kind of the NodeClass, e.g. EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the NodeClass, without a version (e.g. karpenter.k8s.aws).
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// GroupKind returns the referenced kind.
func (r *NodeClassReference) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// ResourceRequirements holds the requests a NodeClaim was sized for.
type ResourceRequirements struct {
	// Requests are the summed pod requests the node must fit.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaim is one node Karpenter has decided to launch, from the request
// through the running instance to its termination.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type",description=""
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type",description=""
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone",description=""
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1,description=""
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1,description=""
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1,description=""
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1,description=""
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1,description=""
// +kubebuilder:subresource:status
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}
