package nodepoolhealth_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

func TestTracker(t *testing.T) {
	type step struct {
		ok     bool
		reason string
	}
	fail := func(r string) step { return step{reason: r} }
	ok := step{ok: true}
	tests := []struct {
		name  string
		steps []step
		want  nodepoolhealth.Status
	}{
		{"nothing observed", nil, nodepoolhealth.Status{}},
		{"one success", []step{ok}, nodepoolhealth.Status{Known: true, Healthy: true, Observed: 1}},
		{"one failure of one", []step{fail("RegistrationFailed")},
			nodepoolhealth.Status{Known: true, Reason: "RegistrationFailed", Failures: 1, Observed: 1}},
		{"one failure in three is healthy", []step{ok, fail("X"), ok},
			nodepoolhealth.Status{Known: true, Healthy: true, Reason: "X", Failures: 1, Observed: 3}},
		{"half failed is unhealthy, newest failure's reason", []step{fail("A"), ok, fail("B"), ok},
			nodepoolhealth.Status{Known: true, Reason: "B", Failures: 2, Observed: 4}},
		{"old failures fall out of the buffer of 4", []step{fail("A"), fail("A"), fail("A"), ok, ok, ok, ok},
			nodepoolhealth.Status{Known: true, Healthy: true, Observed: 4}},
		{"ring keeps the newest", []step{ok, ok, ok, ok, fail("C"), fail("D")},
			nodepoolhealth.Status{Known: true, Reason: "D", Failures: 2, Observed: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := nodepoolhealth.NewTracker()
			for _, s := range tt.steps {
				tr.Observe("pool", s.ok, s.reason)
			}
			assert.Equal(t, tt.want, tr.Status("pool"))
			assert.Equal(t, nodepoolhealth.Status{}, tr.Status("other"))
		})
	}
}

func TestTrackerGeneration(t *testing.T) {
	tr := nodepoolhealth.NewTracker()
	tr.Observe("pool", false, "RegistrationFailed")
	assert.False(t, tr.SetGeneration("pool", nodepoolhealth.Generation{NodePool: 1, NodeClass: 1}), "first generation is adopted")
	assert.True(t, tr.Status("pool").Known, "outcomes before the first look are kept")
	assert.False(t, tr.SetGeneration("pool", nodepoolhealth.Generation{NodePool: 1, NodeClass: 1}))
	assert.True(t, tr.SetGeneration("pool", nodepoolhealth.Generation{NodePool: 1, NodeClass: 2}), "nodeclass changed")
	assert.False(t, tr.Status("pool").Known)
	tr.Observe("pool", true, "")
	assert.True(t, tr.SetGeneration("pool", nodepoolhealth.Generation{NodePool: 2, NodeClass: 2}), "nodepool changed")
	assert.False(t, tr.Status("pool").Known)

	var nilTracker *nodepoolhealth.Tracker
	nilTracker.Observe("pool", false, "x") // no-op, no panic
	assert.False(t, nilTracker.Status("pool").Known)

	tr.Observe("pool", true, "")
	select {
	case ev := <-tr.Events():
		assert.Equal(t, "pool", ev.Object.GetName())
	default:
		t.Fatal("no event for an observation")
	}
}
