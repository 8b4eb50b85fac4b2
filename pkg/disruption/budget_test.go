package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func TestBudgetAllowed(t *testing.T) {
	tests := []struct {
		name    string
		budget  v1.Budget
		nodes   int
		want    int
		wantErr bool
	}{
		{"percent rounds up: 10 nodes at 15% allow 2", budget("15%"), 10, 2, false},
		{"percent rounds up: 10 nodes at 5% allow 1", budget("5%"), 10, 1, false},
		{"percent of no nodes is 0", budget("10%"), 0, 0, false},
		{"100%", budget("100%"), 7, 7, false},
		{"count", budget("3"), 10, 3, false},
		{"count above node count", budget("30"), 10, 30, false},
		{"zero blocks", budget("0"), 10, 0, false},
		{"0% blocks", budget("0%"), 10, 0, false},
		{"schedule open now (daily at 11:00 for 2h)", scheduled("0", "0 11 * * *", 2*time.Hour), 10, 0, false},
		{"schedule window starts exactly now", scheduled("1", "0 12 * * *", time.Hour), 10, 1, false},
		{"schedule window just closed", scheduled("0", "0 10 * * *", 2*time.Hour), 10, Unlimited, false},
		{"schedule closed (daily at 13:00)", scheduled("0", "0 13 * * *", time.Hour), 10, Unlimited, false},
		{"macro @daily open (midnight + 13h)", scheduled("0", "@daily", 13*time.Hour), 10, 0, false},
		{"macro @daily closed (midnight + 1h)", scheduled("0", "@daily", time.Hour), 10, Unlimited, false},
		{"weekday business hours (Wednesday)", scheduled("0", "0 9 * * mon-fri", 8*time.Hour), 10, 0, false},
		{"weekend window closed on Wednesday", scheduled("0", "0 0 * * sat", 48*time.Hour), 10, Unlimited, false},
		{"invalid schedule fails closed", scheduled("5", "not a cron", time.Hour), 10, 0, true},
		{"invalid nodes fails closed", budget("lots"), 10, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BudgetAllowed(tt.budget, tt.nodes, now)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAllowedDisruptionsReasons(t *testing.T) {
	np := pool("p", budgets(
		forReasons(budget("0"), v1.DisruptionReasonDrifted),
		forReasons(budget("2"), v1.DisruptionReasonEmpty, v1.DisruptionReasonUnderutilized),
		budget("50%"),
	))
	tests := []struct {
		reason v1.DisruptionReason
		want   int
		index  int
	}{
		{v1.DisruptionReasonDrifted, 0, 0},
		{v1.DisruptionReasonEmpty, 2, 1},
		{v1.DisruptionReasonUnderutilized, 2, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			got, idx, err := AllowedDisruptions(np, 10, tt.reason, now)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.index, idx)
		})
	}
	// No budgets at all: unlimited.
	got, idx, err := AllowedDisruptions(pool("q", budgets()), 10, v1.DisruptionReasonEmpty, now)
	require.NoError(t, err)
	assert.Equal(t, Unlimited, got)
	assert.Equal(t, -1, idx)
	// A misconfigured budget for another reason is reported but does not
	// limit this one.
	bad := pool("r", budgets(forReasons(scheduled("1", "bogus", time.Hour), v1.DisruptionReasonDrifted), budget("3")))
	got, _, err = AllowedDisruptions(bad, 10, v1.DisruptionReasonEmpty, now)
	require.Error(t, err)
	assert.Equal(t, 3, got)
	got, _, _ = AllowedDisruptions(bad, 10, v1.DisruptionReasonDrifted, now)
	assert.Equal(t, 0, got)
}

func TestBudgetsCountDisruptingNodes(t *testing.T) {
	nodes := nodesOf("p", 10)
	notReady(nodes[0])
	nodes[1].MarkedForDeletion = true
	nodes[2].Deleting = true
	// Not counted at all: uninitialized, instance terminating, unmanaged.
	nodes = append(nodes, node("starting", "p", func(n *Node) { n.Initialized = false }))
	nodes = append(nodes, node("gone", "p", cond(v1.ConditionTypeInstanceTerminating, now)))
	nodes = append(nodes, &Node{Node: nodes[3].Node.DeepCopy()})
	nodes[len(nodes)-1].Node.Name = "unmanaged"

	tests := []struct {
		name      string
		budget    string
		allowed   int
		remaining int
	}{
		{"30% of 10 is 3, 3 disrupting", "30%", 3, 0},
		{"5 allowed, 3 disrupting", "5", 5, 2},
		{"1 allowed, never below 0", "1", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := testSnapshot([]*v1.NodePool{pool("p", budgets(budget(tt.budget)))}, nodes)
			st := Budgets(snap, v1.DisruptionReasonEmpty)["p"]
			require.NotNil(t, st)
			assert.Equal(t, 10, st.Nodes)
			assert.Equal(t, 3, st.Disrupting)
			assert.Equal(t, tt.allowed, st.Allowed)
			assert.Equal(t, tt.remaining, st.Remaining)
			require.NotNil(t, st.Limiting)
			assert.Equal(t, tt.budget, st.Limiting.Nodes)
		})
	}
}

func TestBudgetWindowChange(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 4, h, m, 0, 0, time.UTC) }
	tests := []struct {
		name    string
		budget  v1.Budget
		want    time.Time
		ok      bool
		wantErr bool
	}{
		{"no schedule never changes", budget("0"), time.Time{}, false, false},
		{"open now (daily at 11:00 for 2h) closes at 13:00", scheduled("0", "0 11 * * *", 2*time.Hour), at(13, 0), true, false},
		{"closed now (daily at 13:00) opens at 13:00", scheduled("0", "0 13 * * *", time.Hour), at(13, 0), true, false},
		{"just closed (daily at 10:00 for 2h) opens tomorrow", scheduled("0", "0 10 * * *", 2*time.Hour), at(10, 0).AddDate(0, 0, 1), true, false},
		{"window starting now closes after its duration", scheduled("1", "0 12 * * *", time.Hour), at(13, 0), true, false},
		{"overlapping windows close after the last one", scheduled("0", "*/30 * * * *", 45*time.Minute), time.Time{}, false, false},
		{"hourly for 30m, open now, closes at 12:30", scheduled("0", "0 * * * *", 30*time.Minute), at(12, 30), true, false},
		{"weekend window opens on Saturday", scheduled("0", "0 0 * * sat", 48*time.Hour), time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), true, false},
		{"invalid schedule", scheduled("0", "not a cron", time.Hour), time.Time{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := BudgetWindowChange(tt.budget, now)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.ok, ok)
			assert.True(t, tt.want.Equal(got), "got %s, want %s", got, tt.want)
			if ok {
				// The answer is a real change: the budget's state differs
				// just before and at it.
				before, err := BudgetActive(tt.budget, got.Add(-time.Second))
				require.NoError(t, err)
				after, err := BudgetActive(tt.budget, got)
				require.NoError(t, err)
				assert.NotEqual(t, before, after, "active state should flip at %s", got)
			}
		})
	}
}

func TestNextBudgetChange(t *testing.T) {
	np := &v1.NodePool{}
	np.Spec.Disruption.Budgets = []v1.Budget{
		budget("10%"),
		scheduled("0", "0 18 * * *", time.Hour),
		scheduled("0", "0 11 * * *", 2*time.Hour), // open now, closes at 13:00
		scheduled("0", "bad", time.Hour),
	}
	got, ok := NextBudgetChange(np, now)
	require.True(t, ok)
	assert.Equal(t, time.Date(2026, 3, 4, 13, 0, 0, 0, time.UTC), got)
	np.Spec.Disruption.Budgets = []v1.Budget{budget("10%")}
	_, ok = NextBudgetChange(np, now)
	assert.False(t, ok)
}
