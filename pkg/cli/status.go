package cli

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// StatusAnswer is `status`.
type StatusAnswer struct {
	NodePools []PoolStatus `json:"nodePools"`
	// NotReady are the NodeClaims that are not Ready, with why.
	NotReady []ClaimStatus `json:"notReadyNodeClaims,omitempty"`
}

// PoolStatus is one NodePool's line.
type PoolStatus struct {
	Name  string            `json:"name"`
	Nodes int               `json:"nodes"`
	Usage map[string]string `json:"usage,omitempty"`
	// Limits is spec.limits (absent: unlimited).
	Limits map[string]string `json:"limits,omitempty"`
	// AllowedDisruptions per reason: what the active budgets allow now
	// minus the nodes already disrupting (Unlimited is -1).
	AllowedDisruptions map[string]int `json:"allowedDisruptions"`
	// CostPerHour is the price of the pool's nodes ($/h), from the offering
	// each node's instance type, zone and capacity type labels name;
	// Unpriced counts the nodes whose offering is not known.
	CostPerHour float64 `json:"costPerHour"`
	Unpriced    int     `json:"unpricedNodes,omitempty"`
	// BudgetErrors are misconfigured budgets (they allow nothing).
	BudgetErrors []string `json:"budgetErrors,omitempty"`
	// NextBudgetChange is when a scheduled budget's window next opens or
	// closes, so what AllowedDisruptions says may change (absent: never).
	NextBudgetChange *time.Time `json:"nextBudgetChange,omitempty"`
}

// ClaimStatus is a NodeClaim that is not Ready.
type ClaimStatus struct {
	Name     string `json:"name"`
	NodePool string `json:"nodePool,omitempty"`
	// Condition is the first of Launched, Registered, Initialized that is
	// not True, with its reason and message.
	Condition string `json:"condition"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Status summarises the NodePools and the NodeClaims that are not Ready.
func (s *Session) Status(ctx context.Context) *StatusAnswer {
	snap := s.disruptionSnapshot(ctx)
	budgets := disruption.AllBudgets(snap)
	usage := s.cluster.NodePoolsUsage()
	ans := &StatusAnswer{}
	for i := range s.Objects.NodePools {
		np := &s.Objects.NodePools[i]
		ps := PoolStatus{Name: np.Name, Nodes: usage[np.Name].Nodes, Usage: quantities(usage[np.Name].Resources),
			Limits: quantities(corev1.ResourceList(np.Spec.Limits)), AllowedDisruptions: map[string]int{}}
		for _, reason := range disruption.Reasons {
			b := budgets[reason][np.Name]
			if b == nil {
				continue
			}
			allowed := b.Remaining
			if b.Allowed == disruption.Unlimited {
				allowed = -1
			}
			ps.AllowedDisruptions[string(reason)] = allowed
			if b.Err != nil {
				ps.BudgetErrors = append(ps.BudgetErrors, string(reason)+": "+b.Err.Error())
			}
		}
		if at, ok := disruption.NextBudgetChange(np, snap.Now); ok {
			ps.NextBudgetChange = &at
		}
		ans.NodePools = append(ans.NodePools, ps)
	}
	s.addCosts(snap, ans.NodePools)
	sort.Slice(ans.NodePools, func(i, j int) bool { return ans.NodePools[i].Name < ans.NodePools[j].Name })
	for i := range s.Objects.NodeClaims {
		nc := &s.Objects.NodeClaims[i]
		if claimCondition(nc, v1.ConditionTypeReady) == "True" {
			continue
		}
		cs := ClaimStatus{Name: nc.Name, NodePool: nc.Labels[v1.NodePoolLabelKey], Condition: v1.ConditionTypeReady}
		for _, t := range v1.NodeClaimReadyDependents {
			if claimCondition(nc, t) != "True" {
				cs.Condition = t
				for _, c := range nc.Status.Conditions {
					if c.Type == t {
						cs.Reason, cs.Message = c.Reason, c.Message
					}
				}
				break
			}
		}
		if !nc.DeletionTimestamp.IsZero() {
			cs.Reason = joinMsg(cs.Reason, "Deleting")
		}
		ans.NotReady = append(ans.NotReady, cs)
	}
	return ans
}

func claimCondition(nc *v1.NodeClaim, t string) string {
	for _, c := range nc.Status.Conditions {
		if c.Type == t {
			return string(c.Status)
		}
	}
	return "Unknown"
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, q := range l {
		out[string(k)] = q.String()
	}
	return out
}

// addCosts prices each pool's nodes from its instance types' offerings.
func (s *Session) addCosts(snap *disruption.Snapshot, pools []PoolStatus) {
	byName := map[string]*PoolStatus{}
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	prices := poolPrices(snap)
	for _, n := range snap.Nodes {
		ps := byName[n.NodePool]
		if ps == nil || n.Node == nil || n.Deleting {
			continue
		}
		price, ok := prices[n.NodePool][scheduling.OfferingKeyOf(n.Node.Labels)]
		if !ok {
			ps.Unpriced++
			continue
		}
		ps.CostPerHour += price
	}
}

// poolPrices indexes each pool's offering prices.
func poolPrices(snap *disruption.Snapshot) map[string]map[scheduling.OfferingKey]float64 {
	out := make(map[string]map[scheduling.OfferingKey]float64, len(snap.InstanceTypes))
	for pool, its := range snap.InstanceTypes {
		out[pool] = scheduling.OfferingPrices(its)
	}
	return out
}
