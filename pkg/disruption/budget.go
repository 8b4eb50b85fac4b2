package disruption

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Unlimited is what a pool with no active budget allows.
const Unlimited = math.MaxInt32

// Reasons are the disruption reasons budgets can name, in a fixed order.
var Reasons = []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted, v1.DisruptionReasonUnderutilized}

// BudgetStatus is one NodePool's budget for one reason in one pass.
type BudgetStatus struct {
	NodePool string
	Reason   v1.DisruptionReason
	// Nodes counts the pool's nodes that budgets are a share of: managed,
	// initialized, and whose instance is not already terminating.
	Nodes int
	// Allowed is the minimum over the active budgets that apply to the
	// reason (Unlimited when none does).
	Allowed int
	// Disrupting counts the pool's nodes that already use the budget:
	// NotReady, deleting or marked for deletion.
	Disrupting int
	// Remaining is Allowed minus Disrupting, never below 0.
	Remaining int
	// Limiting is the budget that set Allowed (nil when Unlimited).
	Limiting *BudgetRef
	// Err reports a misconfigured budget. It fails closed: the budget
	// counts as allowing nothing.
	Err error
}

// budgetSchedule parses the budget's schedule: nil without one (the budget
// is always active), an error when only one of schedule and duration is set
// or the schedule does not parse.
func budgetSchedule(b v1.Budget) (cron.Schedule, error) {
	if b.Schedule == nil && b.Duration == nil {
		return nil, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return nil, fmt.Errorf("budget schedule and duration must be set together")
	}
	sched, err := cron.ParseStandard(*b.Schedule)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q: %w", *b.Schedule, err)
	}
	return sched, nil
}

// BudgetActive reports whether the budget applies at now: always without a
// schedule, else when now lies in [a schedule hit, that hit + duration).
// Schedules are cron expressions (or @daily and friends) in UTC.
func BudgetActive(b v1.Budget, now time.Time) (bool, error) {
	sched, err := budgetSchedule(b)
	if sched == nil || err != nil {
		return sched == nil && err == nil, err
	}
	now = now.UTC()
	// The first hit after now-duration is the one whose window could still
	// be open.
	next := sched.Next(now.Add(-b.Duration.Duration))
	return !next.IsZero() && !next.After(now), nil
}

// maxWindowSteps bounds the schedule hits BudgetWindowChange walks through
// when windows overlap (a budget that fires every minute for an hour is
// always open: its window never closes).
const maxWindowSteps = 10000

// BudgetWindowChange is the next time after now at which the budget's
// schedule window opens or closes, so "status" can say when what a pool
// allows will change. A budget without a schedule never changes; nor does
// one whose overlapping windows keep it open. Schedules are in UTC.
func BudgetWindowChange(b v1.Budget, now time.Time) (time.Time, bool, error) {
	sched, err := budgetSchedule(b)
	if sched == nil || err != nil {
		return time.Time{}, false, err
	}
	now = now.UTC()
	d := b.Duration.Duration
	hit := sched.Next(now.Add(-d))
	if hit.IsZero() {
		return time.Time{}, false, nil
	}
	if hit.After(now) {
		// Closed now: it opens at the next hit.
		return hit, true, nil
	}
	// Open now: it closes at the end of the last window that overlaps the
	// one open now. A zero duration never opens a window.
	if d <= 0 {
		return time.Time{}, false, nil
	}
	end := hit.Add(d)
	for i := 0; i < maxWindowSteps; i++ {
		next := sched.Next(hit)
		if next.IsZero() || next.After(end) {
			return end, true, nil
		}
		hit, end = next, next.Add(d)
	}
	return time.Time{}, false, nil
}

// NextBudgetChange is the earliest BudgetWindowChange over the pool's
// budgets (misconfigured budgets are skipped: they allow nothing at any
// time).
func NextBudgetChange(np *v1.NodePool, now time.Time) (time.Time, bool) {
	var first time.Time
	found := false
	for _, b := range np.Spec.Disruption.Budgets {
		at, ok, err := BudgetWindowChange(b, now)
		if err != nil || !ok {
			continue
		}
		if !found || at.Before(first) {
			first, found = at, true
		}
	}
	return first, found
}

// BudgetAllowed is how many of numNodes the budget lets be disrupted at
// now: Unlimited while inactive, the count, or the percentage rounded up
// (10 nodes at 15% allow 2, as PDB maxUnavailable rounds).
func BudgetAllowed(b v1.Budget, numNodes int, now time.Time) (int, error) {
	on, err := BudgetActive(b, now)
	if err != nil {
		return 0, err
	}
	if !on {
		return Unlimited, nil
	}
	v := intstr.Parse(b.Nodes)
	if v.Type == intstr.String && !strings.HasSuffix(b.Nodes, "%") {
		return 0, fmt.Errorf("invalid budget nodes %q", b.Nodes)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, numNodes, true)
	if err != nil {
		return 0, fmt.Errorf("invalid budget nodes %q: %w", b.Nodes, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("invalid budget nodes %q", b.Nodes)
	}
	return n, nil
}

// AllowedDisruptions is the minimum of BudgetAllowed over the pool's
// budgets that apply to reason (those without reasons apply to all). It
// returns the index of the limiting budget (-1 when Unlimited) and the
// joined errors of misconfigured budgets, which count as 0.
func AllowedDisruptions(np *v1.NodePool, numNodes int, reason v1.DisruptionReason, now time.Time) (int, int, error) {
	allowed, limiting := Unlimited, -1
	var errs []string
	for i, b := range np.Spec.Disruption.Budgets {
		n, err := BudgetAllowed(b, numNodes, now)
		if err != nil {
			errs = append(errs, fmt.Sprintf("budget %d: %v", i, err))
		}
		if !appliesTo(b, reason) {
			continue
		}
		if n < allowed {
			allowed, limiting = n, i
		}
	}
	if len(errs) > 0 {
		return allowed, limiting, fmt.Errorf("nodepool %s: %s", np.Name, strings.Join(errs, "; "))
	}
	return allowed, limiting, nil
}

func appliesTo(b v1.Budget, reason v1.DisruptionReason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, r := range b.Reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// Budgets computes every NodePool's budget for reason.
func Budgets(snap *Snapshot, reason v1.DisruptionReason) map[string]*BudgetStatus {
	counts := countBudgetNodes(snap)
	out := make(map[string]*BudgetStatus, len(snap.NodePools))
	for _, name := range sortedPools(snap) {
		out[name] = budgetStatus(snap.NodePools[name], counts[name], reason, snap.Now)
	}
	return out
}

// AllBudgets computes Budgets for every reason, by reason then pool.
func AllBudgets(snap *Snapshot) map[v1.DisruptionReason]map[string]*BudgetStatus {
	counts := countBudgetNodes(snap)
	out := map[v1.DisruptionReason]map[string]*BudgetStatus{}
	for _, reason := range Reasons {
		m := make(map[string]*BudgetStatus, len(snap.NodePools))
		for _, name := range sortedPools(snap) {
			m[name] = budgetStatus(snap.NodePools[name], counts[name], reason, snap.Now)
		}
		out[reason] = m
	}
	return out
}

type budgetCount struct{ nodes, disrupting int }

func countBudgetNodes(snap *Snapshot) map[string]budgetCount {
	counts := map[string]budgetCount{}
	for _, n := range snap.Nodes {
		// Only nodes pods may be running on count towards the total, and an
		// instance already terminating is on its way out whatever we do.
		if n.NodeClaim == nil || n.NodePool == "" || !n.Initialized || conditionTrue(n.NodeClaim, v1.ConditionTypeInstanceTerminating) {
			continue
		}
		c := counts[n.NodePool]
		c.nodes++
		if !n.ready() || n.MarkedForDeletion || n.Deleting {
			c.disrupting++
		}
		counts[n.NodePool] = c
	}
	return counts
}

func budgetStatus(np *v1.NodePool, c budgetCount, reason v1.DisruptionReason, now time.Time) *BudgetStatus {
	allowed, idx, err := AllowedDisruptions(np, c.nodes, reason, now)
	st := &BudgetStatus{
		NodePool: np.Name, Reason: reason, Nodes: c.nodes, Allowed: allowed, Disrupting: c.disrupting,
		Remaining: max(allowed-c.disrupting, 0), Err: err,
	}
	if idx >= 0 {
		b := np.Spec.Disruption.Budgets[idx]
		st.Limiting = &BudgetRef{Index: idx, Nodes: b.Nodes, Allowed: allowed, Disrupting: c.disrupting}
		if b.Schedule != nil {
			st.Limiting.Schedule = *b.Schedule
		}
		if b.Duration != nil {
			st.Limiting.Duration = b.Duration.Duration.String()
		}
	}
	return st
}

func sortedPools(snap *Snapshot) []string {
	names := make([]string, 0, len(snap.NodePools))
	for name := range snap.NodePools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
