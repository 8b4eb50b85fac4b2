package disruption

import "testing"

// A kind the renderer does not know must still say something useful: the
// planner's verdicts travel in the Unconsolidatable event through Message.
func TestMessageOfUnknownKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    Verdict
		want string
	}{
		{"detail wins", Verdict{Kind: "SavingBelowPayback", Detail: "saving $0.01 over 1h is below the cost $0.02"}, "saving $0.01 over 1h is below the cost $0.02"},
		{"kind without detail", Verdict{Kind: "SomethingNew"}, "SomethingNew"},
		{"known kind ignores detail", Verdict{Kind: KindNotEmpty, Detail: "ignored"}, "Node is not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.Message(); got != tc.want {
				t.Fatalf("Message() = %q, want %q", got, tc.want)
			}
		})
	}
}
