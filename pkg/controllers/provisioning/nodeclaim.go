package provisioning

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// buildNodeClaim turns a planned NodeClaim into the API object: the pool's
// template with the solver's narrowed requirements and the pods' requests.
// The reservation a reserved NodeClaim was planned on is written under
// reservationKey (see Options.ReservationIDLabel), or left out when empty.
func buildNodeClaim(np *v1.NodePool, planned *scheduling.NewNodeClaim, reservationKey string) *v1.NodeClaim {
	nc := np.NodeClaimFromTemplate(planned.Labels)
	requirements := toAPIRequirements(rekeyReservation(planned.Requirements, reservationKey))
	if hasMinValues(requirements) {
		nc.Annotations[v1.NodeClaimMinValuesRelaxedAnnotationKey] = strconv.FormatBool(planned.MinValuesRelaxed)
	}
	nc.Spec.Requirements = requirements
	nc.Spec.Resources = v1.ResourceRequirements{Requests: planned.Requests}
	// The solver copies the pool's taints into the plan; a caller may add
	// its own (the disruption queue's disruption.LaunchTaint on a command's
	// replacements).
	for i := range planned.Taints {
		if !hasTaintLike(nc.Spec.Taints, &planned.Taints[i]) {
			nc.Spec.Taints = append(append([]corev1.Taint(nil), nc.Spec.Taints...), planned.Taints[i])
		}
	}
	return nc
}

func hasTaintLike(taints []corev1.Taint, t *corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(t) {
			return true
		}
	}
	return false
}

// toAPIRequirements renders solver requirements in the NodeClaim's shape,
// sorted by key; minValues rides on the first entry of its key.
// rekeyReservation moves the solver's karpenter.sh/reservation-id
// requirement to key (dropping it when key is empty): the NodeClaim CRD,
// as upstream's, admits no other karpenter.sh key than capacity-type and
// nodepool in spec.requirements. The capacity type stays reserved.
func rekeyReservation(reqs scheduling.Requirements, key string) scheduling.Requirements {
	r, ok := reqs[scheduling.LabelReservationID]
	if !ok || key == scheduling.LabelReservationID {
		return reqs
	}
	out := reqs.Copy()
	delete(out, scheduling.LabelReservationID)
	if key != "" {
		out.Add(scheduling.NewRequirement(key, r.Operator(), r.Values()...))
	}
	return out
}

func toAPIRequirements(reqs scheduling.Requirements) []v1.NodeSelectorRequirementWithMinValues {
	var out []v1.NodeSelectorRequirementWithMinValues
	for _, k := range reqs.Keys() {
		r := reqs[k]
		for i, nsr := range r.NodeSelectorRequirements() {
			api := v1.NodeSelectorRequirementWithMinValues{Key: nsr.Key, Operator: nsr.Operator, Values: nsr.Values}
			if i == 0 && r.MinValues > 0 {
				api.MinValues = ptr(r.MinValues)
			}
			out = append(out, api)
		}
	}
	return out
}

func hasMinValues(reqs []v1.NodeSelectorRequirementWithMinValues) bool {
	for _, r := range reqs {
		if r.MinValues != nil {
			return true
		}
	}
	return false
}

// exceededBy reports the first limit that creating one more node would
// break: usage already above a resource limit, or the node count at its
// limit (adding a node would pass it).
func exceededBy(limits v1.Limits, usage corev1.ResourceList) error {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		limit := limits[name]
		used := usage[name]
		if name == v1.ResourceNodes {
			used.Add(resource.MustParse("1"))
		}
		if used.Cmp(limit) > 0 {
			return fmt.Errorf("%s resource usage of %s exceeds limit of %s", name, used.String(), limit.String())
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
