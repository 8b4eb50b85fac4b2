package snapshot

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// nodePools converts the Ready, non-deleting, dynamic NodePools for the
// solver, heaviest first, each with its instance types and limit headroom.
// A pool whose requirements do not parse or whose instance types cannot be
// resolved is logged and left out, so one bad pool does not stop the rest.
func nodePools(ctx context.Context, view View) ([]*scheduling.NodePool, map[string]*v1.NodePool, error) {
	list, err := view.NodePools(ctx)
	if err != nil {
		return nil, nil, err
	}
	list = append([]*v1.NodePool(nil), list...)
	sortPools(list)
	var out []*scheduling.NodePool
	byName := map[string]*v1.NodePool{}
	for _, np := range list {
		reqs, its, skip := resolve(ctx, view, np)
		if skip != nil {
			logger := log.FromContext(ctx).WithValues("NodePool", klog.KObj(np))
			switch {
			case skip.err != nil:
				logger.Error(skip.err, skip.log)
			case skip.log != "":
				logger.Info(skip.log)
			}
			continue
		}
		labels := np.Spec.Template.LabelMap()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1.NodePoolLabelKey] = np.Name
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			labels[v1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
		}
		var remaining corev1.ResourceList
		if np.Spec.Limits != nil {
			remaining = Remaining(np.Spec.Limits, view.NodePoolResources(np.Name))
		}
		out = append(out, &scheduling.NodePool{
			Name:          np.Name,
			Weight:        weight(np),
			Requirements:  reqs,
			Labels:        labels,
			Taints:        np.Spec.Template.Spec.Taints,
			StartupTaints: np.Spec.Template.Spec.StartupTaints,
			Remaining:     remaining,
			Limits:        corev1.ResourceList(np.Spec.Limits),
			InstanceTypes: its,
		})
		byName[np.Name] = np
	}
	return out, byName, nil
}

// skipped is why Build leaves a pool out: the reason a user reads, and the
// log line it is worth (none for a pool being deleted, static or not
// Ready, which is left out by design).
type skipped struct {
	reason string
	log    string
	err    error
}

// resolve parses a pool's requirements and resolves its instance types, or
// says why Build leaves it out of planning.
func resolve(ctx context.Context, view View, np *v1.NodePool) (scheduling.Requirements, []*scheduling.InstanceType, *skipped) {
	switch {
	case !np.DeletionTimestamp.IsZero():
		return nil, nil, &skipped{reason: "nodepool is being deleted"}
	case np.IsStatic():
		return nil, nil, &skipped{reason: "static nodepool (fixed replicas, does not provision for pending pods)"}
	case !np.IsReady():
		return nil, nil, &skipped{reason: "nodepool is not Ready"}
	}
	reqs, err := Requirements(np.Spec.Template.Spec.Requirements)
	if err != nil {
		return nil, nil, &skipped{reason: "invalid requirements: " + err.Error(), log: "skipping, invalid requirements", err: err}
	}
	its, err := view.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, nil, &skipped{reason: err.Error(), log: "skipping, unable to resolve instance types", err: err}
	}
	if len(its) == 0 {
		return nil, nil, &skipped{reason: "no resolved instance types", log: "skipping, no resolved instance types found"}
	}
	return reqs, its, nil
}

// SkipReason says why Build leaves np out of planning ("" when it does
// not), for an answer to "why is this pool not used".
func SkipReason(ctx context.Context, view View, np *v1.NodePool) string {
	if _, _, skip := resolve(ctx, view, np); skip != nil {
		return skip.reason
	}
	return ""
}

// Requirements parses a NodePool's requirements for the solver.
func Requirements(reqs []v1.NodeSelectorRequirementWithMinValues) (scheduling.Requirements, error) {
	in := make([]scheduling.RequirementWithMinValues, 0, len(reqs))
	for _, r := range reqs {
		in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
	}
	return scheduling.RequirementsFromMinValues(in)
}

// Remaining is the headroom under limits given usage; nil means unlimited.
// A resource the pool has used beyond its limit has zero headroom.
func Remaining(limits v1.Limits, usage corev1.ResourceList) corev1.ResourceList {
	if limits == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for name, limit := range limits {
		left := limit.DeepCopy()
		if used, ok := usage[name]; ok {
			left.Sub(used)
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, left.Format)
		}
		out[name] = left
	}
	return out
}

// RestrictPools copies the solver pools keeping only the named instance
// types of each (a pool types does not name is dropped, and so is one left
// without types), heaviest first.
func RestrictPools(pools []*scheduling.NodePool, types map[string]map[string]bool) []*scheduling.NodePool {
	var out []*scheduling.NodePool
	for _, sp := range pools {
		allowed := types[sp.Name]
		if len(allowed) == 0 {
			continue
		}
		cp := *sp
		cp.InstanceTypes = nil
		for _, it := range sp.InstanceTypes {
			if allowed[it.Name] {
				cp.InstanceTypes = append(cp.InstanceTypes, it)
			}
		}
		if len(cp.InstanceTypes) > 0 {
			out = append(out, &cp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}
