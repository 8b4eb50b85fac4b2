package v1alpha1

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSelectorRequirement selects the instance-type offerings an overlay
// applies to. It accepts Karpenter's Gte and Lte on top of corev1's
// operators, but no minValues: an overlay filters, it does not ask for
// flexibility.
type NodeSelectorRequirement struct {
	// Key is the label key: a well-known label or a NodePool template label.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule=`self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")`
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule=`self != "kubernetes.io/hostname"`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule=`self in ["karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex"] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")`
	// +required
	Key string `json:"key"`

	// Operator relates the key to the values: In, NotIn, Exists,
	// DoesNotExist, Gt, Lt, Gte or Lte.
	// +kubebuilder:validation:Enum:=Gte;Lte;In;NotIn;Exists;DoesNotExist;Gt;Lt
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values must be non-empty for In and NotIn, empty for Exists and
	// DoesNotExist, and a single non-negative integer for Gt, Lt, Gte and
	// Lte.
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// AsNodeSelectorRequirement converts to the corev1 shape.
func (r NodeSelectorRequirement) AsNodeSelectorRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
}

// NodeOverlaySpec says which offerings to adjust and how.
type NodeOverlaySpec struct {
	// Requirements select the offerings the overlay applies to.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'NotIn' must have a value defined",rule="self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirement `json:"requirements,omitempty"`

	// PriceAdjustment changes the price of matching offerings by a signed
	// amount ("+0.5", "-1.2") or percentage ("+10%", "-15%", at most
	// "-100%"). The result never drops below zero.
	// +kubebuilder:validation:Pattern=`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`
	// +optional
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`

	// Price replaces the price of matching offerings.
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +optional
	Price *string `json:"price,omitempty"`

	// Capacity adds extended resources to matching instance types. The
	// standard resources cannot be overridden.
	// +kubebuilder:validation:XValidation:message="invalid resource restricted",rule="self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// Weight orders overlapping overlays: higher wins, unset counts as 0, and
	// ties go to the name later in the alphabet.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// NodeOverlay adjusts what Karpenter believes about instance types (price,
// extended resources) before it simulates scheduling.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodeoverlays,scope=Cluster,categories=karpenter,shortName=overlays
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:subresource:status
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:message="cannot set both 'price' and 'priceAdjustment'",rule="!has(self.price) || !has(self.priceAdjustment)"
	// +required
	Spec   NodeOverlaySpec   `json:"spec"`
	Status NodeOverlayStatus `json:"status,omitempty"`
}

// NodeOverlayList is a list of NodeOverlays.
// +kubebuilder:object:root=true
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOverlay `json:"items"`
}

// OrderByWeight sorts the overlays in place into the order they are applied:
// higher weight first, and among equal weights the name later in the
// alphabet first, so that the order never depends on list order.
func (l *NodeOverlayList) OrderByWeight() {
	sort.SliceStable(l.Items, func(a, b int) bool {
		wa, wb := weight(l.Items[a]), weight(l.Items[b])
		if wa != wb {
			return wa > wb
		}
		return l.Items[a].Name > l.Items[b].Name
	})
}

func weight(o NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}
