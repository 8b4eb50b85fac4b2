package disruption

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// pdbIndex finds the PodDisruptionBudgets that match a pod.
type pdbIndex struct {
	byNamespace map[string][]pdbEntry
}

type pdbEntry struct {
	key      string
	selector labels.Selector
	allowed  int32
	// alwaysAllowUnhealthy: unhealthyPodEvictionPolicy AlwaysAllow lets a
	// pod that is not Ready be evicted whatever the budget says.
	alwaysAllowUnhealthy bool
}

func newPDBIndex(pdbs []*policyv1.PodDisruptionBudget) *pdbIndex {
	idx := &pdbIndex{byNamespace: map[string][]pdbEntry{}}
	for _, pdb := range pdbs {
		// A nil selector matches no pod (policy/v1); an empty one matches
		// every pod of the namespace.
		if pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		idx.byNamespace[pdb.Namespace] = append(idx.byNamespace[pdb.Namespace], pdbEntry{
			key:      pdb.Namespace + "/" + pdb.Name,
			selector: sel,
			allowed:  pdb.Status.DisruptionsAllowed,
			alwaysAllowUnhealthy: pdb.Spec.UnhealthyPodEvictionPolicy != nil &&
				*pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		})
	}
	for ns := range idx.byNamespace {
		entries := idx.byNamespace[ns]
		sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	}
	return idx
}

// blocking returns the PDBs that stop the pod's eviction: the one PDB
// that allows no disruption, or every matching PDB when there are several
// (the eviction API refuses pods with more than one).
func (idx *pdbIndex) blocking(p *corev1.Pod) (keys []string, multiple bool) {
	entries := idx.byNamespace[p.Namespace]
	if len(entries) == 0 {
		return nil, false
	}
	set := labels.Set(p.Labels)
	var matched []pdbEntry
	for _, e := range entries {
		if e.selector.Matches(set) {
			matched = append(matched, e)
		}
	}
	if len(matched) > 1 {
		for _, e := range matched {
			keys = append(keys, e.key)
		}
		return keys, true
	}
	if len(matched) == 1 && matched[0].allowed <= 0 && !(matched[0].alwaysAllowUnhealthy && !podReady(p)) {
		return []string{matched[0].key}, false
	}
	return nil, false
}
