package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// A replacement must never relaunch a candidate as it is (same instance
// type, and no other capacity type to launch with).
func TestWithoutCandidateOfferings(t *testing.T) {
	candidate := func(it, ct string) *Candidate {
		return &Candidate{Node: &Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			corev1.LabelInstanceTypeStable: it, v1.CapacityTypeLabelKey: ct}}}}}
	}
	types := []*scheduling.InstanceType{{Name: "c7a.xlarge"}, {Name: "c7a.2xlarge"}}
	ct := func(values ...string) scheduling.Requirements {
		return scheduling.NewRequirements(scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, values...))
	}
	for _, tc := range []struct {
		name string
		reqs scheduling.Requirements
		cs   []*Candidate
		want []string
	}{
		{"same type and capacity type dropped", ct("on-demand"), []*Candidate{candidate("c7a.2xlarge", "on-demand")}, []string{"c7a.xlarge"}},
		{"any candidate's type counts", ct("on-demand"), []*Candidate{candidate("c7a.xlarge", "on-demand"), candidate("c7a.2xlarge", "on-demand")}, nil},
		{"another capacity type keeps it", ct("spot"), []*Candidate{candidate("c7a.2xlarge", "on-demand")}, []string{"c7a.xlarge", "c7a.2xlarge"}},
		{"both capacity types keep it", ct("spot", "on-demand"), []*Candidate{candidate("c7a.2xlarge", "on-demand")}, []string{"c7a.xlarge", "c7a.2xlarge"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, it := range withoutCandidateOfferings(types, tc.reqs, tc.cs) {
				got = append(got, it.Name)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
