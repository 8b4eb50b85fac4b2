package awslocal

import (
	"encoding/json"
	"net/http"
)

// policyBody is a policy on the control API: its name and document.
type policyBody struct {
	Name     string          `json:"name"`
	Document json.RawMessage `json:"document"`
}

type principalBody struct {
	Name      string                  `json:"name"`
	Policies  []policyBody            `json:"policies"`
	Shadow    map[string][]policyBody `json:"shadow,omitempty"`
	AuditOnly bool                    `json:"auditOnly,omitempty"`
}

func parsePolicies(in []policyBody) ([]Policy, error) {
	out := make([]Policy, 0, len(in))
	for _, p := range in {
		pol, err := ParsePolicy(p.Name, p.Document)
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

// controlIAM serves the IAM and throttling controls (docs/awslocal.md):
//
//	POST /_awslocal/iam/principals           add a principal (its credentials)
//	GET  /_awslocal/iam/denials?principal=&set=  its denials and the total count
//	GET  /_awslocal/iam/log?principal=       the authorizations its calls needed
//	GET  /_awslocal/throttled                throttled calls per EC2 action
func (f *front) controlIAM(w http.ResponseWriter, r *http.Request, route string) bool {
	l := &Local{front: f}
	q := r.URL.Query()
	switch route {
	case "POST iam/principals":
		var in principalBody
		if !decode(w, r, &in) {
			return true
		}
		p := Principal{Name: in.Name, AuditOnly: in.AuditOnly}
		var err error
		if p.Policies, err = parsePolicies(in.Policies); err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return true
		}
		if len(in.Shadow) > 0 {
			p.Shadow = map[string][]Policy{}
			for set, pols := range in.Shadow {
				if p.Shadow[set], err = parsePolicies(pols); err != nil {
					reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
					return true
				}
			}
		}
		creds, err := l.AddPrincipal(p)
		if err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return true
		}
		reply(w, http.StatusCreated, creds)
	case "GET iam/denials":
		list := l.ShadowDenials(q.Get("principal"), q.Get("set"))
		reply(w, http.StatusOK, map[string]any{"count": l.DenialCount(), "denials": list})
	case "GET iam/log":
		reply(w, http.StatusOK, l.AuthorizationLog(q.Get("principal")))
	case "GET throttled":
		reply(w, http.StatusOK, l.Throttled())
	default:
		return false
	}
	return true
}
