package snapshot

import (
	"context"
	"fmt"
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
func (b *Builder) nodePools(ctx context.Context) ([]*scheduling.NodePool, map[string]*v1.NodePool, error) {
	list := &v1.NodePoolList{}
	if err := b.kube.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing nodepools: %w", err)
	}
	sortPools(list.Items)
	var out []*scheduling.NodePool
	byName := map[string]*v1.NodePool{}
	for i := range list.Items {
		np := &list.Items[i]
		if !np.DeletionTimestamp.IsZero() || np.IsStatic() || !np.IsReady() {
			continue
		}
		logger := log.FromContext(ctx).WithValues("NodePool", klog.KObj(np))
		reqs, err := Requirements(np.Spec.Template.Spec.Requirements)
		if err != nil {
			logger.Error(err, "skipping, invalid requirements")
			continue
		}
		its, err := b.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			logger.Error(err, "skipping, unable to resolve instance types")
			continue
		}
		if len(its) == 0 {
			logger.Info("skipping, no resolved instance types found")
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
		out = append(out, &scheduling.NodePool{
			Name:          np.Name,
			Weight:        weight(np),
			Requirements:  reqs,
			Labels:        labels,
			Taints:        np.Spec.Template.Spec.Taints,
			StartupTaints: np.Spec.Template.Spec.StartupTaints,
			Remaining:     Remaining(np.Spec.Limits, b.cluster.NodePoolResources(np.Name)),
			Limits:        corev1.ResourceList(np.Spec.Limits),
			InstanceTypes: its,
		})
		byName[np.Name] = np
	}
	return out, byName, nil
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
