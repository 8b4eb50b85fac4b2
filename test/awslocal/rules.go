package awslocal

// Unneeded is a statement of a policy set, or one action of a statement,
// whose removal refuses nothing a call log needed: permission the calls
// never used.
type Unneeded struct {
	Policy    string `json:"policy"`
	Statement string `json:"statement"`
	// Action is the one action removed; empty when the whole statement was.
	Action string `json:"action,omitempty"`
}

func (u Unneeded) String() string {
	if u.Action != "" {
		return u.Policy + " " + u.Statement + " action " + u.Action
	}
	return u.Policy + " " + u.Statement
}

// UnneededRules takes each Allow statement of the policy set away in turn,
// and each action of a statement with several, and evaluates the reduced
// set against the authorizations the log recorded (those the full set
// allows). A removal that refuses none of them is returned: the rule-removal
// proof that every rule is needed is an empty answer.
func UnneededRules(policies []Policy, log []LoggedRequest) []Unneeded {
	var allowed []AuthRequest
	for _, e := range log {
		if Evaluate(policies, e.Request).Allowed {
			allowed = append(allowed, e.Request)
		}
	}
	refusesSome := func(reduced []Policy) bool {
		for _, r := range allowed {
			if !Evaluate(reduced, r).Allowed {
				return true
			}
		}
		return false
	}
	// with replaces statement j of policy i (nil: removes it).
	with := func(i, j int, s *Statement) []Policy {
		out := make([]Policy, len(policies))
		copy(out, policies)
		stmts := make([]Statement, 0, len(policies[i].Statement))
		for k, st := range policies[i].Statement {
			switch {
			case k != j:
				stmts = append(stmts, st)
			case s != nil:
				stmts = append(stmts, *s)
			}
		}
		out[i].Statement = stmts
		return out
	}
	var out []Unneeded
	for i, p := range policies {
		for j, s := range p.Statement {
			if s.Effect != "Allow" {
				continue
			}
			label := s.Label(j)
			if !refusesSome(with(i, j, nil)) {
				out = append(out, Unneeded{Policy: p.Name, Statement: label})
				continue
			}
			if len(s.Action) < 2 {
				continue
			}
			for a := range s.Action {
				reduced := s
				reduced.Action = append(append(Values{}, s.Action[:a]...), s.Action[a+1:]...)
				if !refusesSome(with(i, j, &reduced)) {
					out = append(out, Unneeded{Policy: p.Name, Statement: label, Action: s.Action[a]})
				}
			}
		}
	}
	return out
}
