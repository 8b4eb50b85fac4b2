package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KWOKNodeClass is the NodeClass of the simulated provider. It has almost
// nothing to configure; it exists so NodePools reference a NodeClass the same
// way they would with a real provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=kwoknodeclasses,scope=Cluster,categories=karpenter,shortName={kwoknc,kwokncs}
type KWOKNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec KWOKNodeClassSpec `json:"spec,omitempty"`
	// Status defaults to Ready: there is nothing to resolve, and a freshly
	// applied class should be usable without a controller touching it.
	// +kubebuilder:default={conditions: {{type: "Ready", status: "True", reason: "Ready", lastTransitionTime: "2024-01-01T01:01:01Z", message: ""}}}
	Status KWOKNodeClassStatus `json:"status,omitempty"`
}

// KWOKNodeClassSpec configures the simulated instances.
type KWOKNodeClassSpec struct {
	// NodeRegistrationDelay is how long a simulated instance takes before
	// its Node appears, standing in for real boot time.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	NodeRegistrationDelay metav1.Duration `json:"nodeRegistrationDelay,omitempty"`
}

// KWOKNodeClassStatus carries readiness conditions.
type KWOKNodeClassStatus struct {
	// Conditions report readiness.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KWOKNodeClassList is a list of KWOKNodeClass.
//
// +kubebuilder:object:root=true
type KWOKNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KWOKNodeClass `json:"items"`
}

// GetConditions returns the status conditions. A KWOKNodeClass resolves
// nothing, so nothing computes its readiness: without conditions it reads
// as Ready, rather than blocking every NodePool that references it.
func (in *KWOKNodeClass) GetConditions() []metav1.Condition {
	if len(in.Status.Conditions) == 0 {
		return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}}
	}
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *KWOKNodeClass) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}
