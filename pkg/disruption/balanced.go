package disruption

import (
	"fmt"
	"math"
	"sort"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// BalancedScore is the Balanced policy's judgement of one consolidation
// move: the share of the pools' cost it saves over the share of the
// pools' disruption it causes. The move is approved when the score is at
// least 1/K.
type BalancedScore struct {
	// NodePools whose totals the score is relative to (the candidates'
	// pools, sorted).
	NodePools []string
	Score     float64
	Threshold float64
	K         float64
	// Savings is what the move saves ($/h); PoolCost what the pools cost.
	Savings, PoolCost float64
	// Disruption is the move's disruption, PoolDisruption the pools' total.
	Disruption, PoolDisruption float64
	Approved                   bool
}

// SavingsPercent and DisruptionPercent are the two shares, in percent.
func (s *BalancedScore) SavingsPercent() float64    { return percent(s.Savings, s.PoolCost) }
func (s *BalancedScore) DisruptionPercent() float64 { return percent(s.Disruption, s.PoolDisruption) }

func percent(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part / whole
}

// Message is upstream's event text for the move.
func (s *BalancedScore) Message() string {
	op := "<"
	if s.Approved {
		op = ">="
	}
	return fmt.Sprintf("score %.2f %s threshold %.2f (consolidationThreshold: %.1f, savings %.1f%%, disruption %.1f%%)",
		s.Score, op, s.Threshold, s.K, s.SavingsPercent(), s.DisruptionPercent())
}

// NodeDisruption is a node's disruption under Balanced: 1 for the node
// itself plus the non-negative eviction costs of its reschedulable pods.
func NodeDisruption(n *Node) float64 {
	total := 1.0
	for _, p := range n.Pods {
		if Reschedulable(p) {
			total += math.Max(0, EvictionCost(p))
		}
	}
	return total
}

// balancedTotals are each pool's cost and disruption, over all its nodes
// (candidates or not), computed once per pass.
type balancedTotals struct {
	snap       *Snapshot
	cost       map[string]float64
	disruption map[string]float64
}

func newBalancedTotals(snap *Snapshot) *balancedTotals {
	t := &balancedTotals{snap: snap, cost: map[string]float64{}, disruption: map[string]float64{}}
	for _, n := range snap.Nodes {
		if n.NodeClaim == nil || n.Node == nil || n.NodePool == "" || n.Deleting {
			continue
		}
		if p, err := nodePrice(snap, n); err == nil {
			t.cost[n.NodePool] += p
		}
		t.disruption[n.NodePool] += NodeDisruption(n)
	}
	return t
}

func anyBalanced(cs []*Candidate) bool {
	for _, c := range cs {
		if c.NodePool.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyBalanced {
			return true
		}
	}
	return false
}

// score judges a move that removes cs and saves savings ($/h), relative to
// the totals of the candidates' pools.
func (t *balancedTotals) score(cs []*Candidate, savings float64) *BalancedScore {
	k := float64(v1.BalancedK)
	s := &BalancedScore{K: k, Threshold: 1 / k, Savings: savings}
	pools := map[string]bool{}
	for _, c := range cs {
		pools[c.NodePool.Name] = true
		s.Disruption += NodeDisruption(c.Node)
	}
	for name := range pools {
		s.NodePools = append(s.NodePools, name)
		s.PoolCost += t.cost[name]
		s.PoolDisruption += t.disruption[name]
	}
	sort.Strings(s.NodePools)
	// No saving is no move, whatever the disruption.
	if savings <= 0 || s.PoolCost <= 0 || s.PoolDisruption <= 0 {
		return s
	}
	s.Score = (savings / s.PoolCost) / (s.Disruption / s.PoolDisruption)
	// Compare with a little slack so that a move scoring exactly 1/k (a
	// uniform pool's half-price replace) is not lost to rounding.
	s.Approved = s.Score >= s.Threshold-1e-9
	return s
}

// deleteScore is the best a single candidate can score: deleting it
// outright. Below the threshold, no move of it alone passes.
func (t *balancedTotals) deleteScore(c *Candidate) (*BalancedScore, error) {
	price, err := nodePrice(t.snap, c.Node)
	if err != nil {
		return nil, err
	}
	return t.score([]*Candidate{c}, price), nil
}
