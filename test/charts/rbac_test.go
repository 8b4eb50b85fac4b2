package charts_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// The rule-removal proof. The cycle tests run the controller as the chart's
// ServiceAccount with the API server auditing that user's requests; at their
// end, proveEveryRuleNeeded takes each rule of every Role and ClusterRole the
// release binds to the ServiceAccount away in turn, and asks the API
// server's own authorizer (SubjectAccessReviews) whether a request the
// controller made during the cycle would then be refused. A rule whose
// removal refuses nothing the controller did is not needed by the cycle, and
// fails the test; so does each verb on each resource inside a rule (a
// grant), since the bar is "only the verbs the controllers use".

// serviceAccountName is the chart's default ServiceAccount name.
const serviceAccountName = "karpenter"

// chartServiceAccount is the chart's ServiceAccount in ns as the API server
// sees a pod's token: its user name and groups.
func chartServiceAccount(ns string) controlplane.User {
	return controlplane.User{
		Name:   "system:serviceaccount:" + ns + ":" + serviceAccountName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
}

// cycleControlPlane is the control plane the cycle tests run the controller
// on: with kube-controller-manager, the scheduler and kwok, the chart's
// ServiceAccount sa as a token user, and its requests audited.
//
// The API server has the WatchList feature off, as API servers before it
// was on by default do: client-go's informers then list and watch. On a
// server with it on they open a watch that streams the initial list
// instead, so no list request is made and the chart's list verbs, which
// the older servers need, would go unproven.
func cycleControlPlane(sa controlplane.User) controlplane.Options {
	return controlplane.Options{SkipCRDs: true, ControllerManager: true, Scheduler: true, Kwok: true,
		Users: []controlplane.User{sa}, AuditPolicy: serviceAccountAudit(sa),
		APIServerArgs: []string{"--feature-gates=WatchList=false"}}
}

// serviceAccountAudit is an audit policy that records, without bodies, every
// request of user and nothing else (the control plane's own components make
// far more requests than the controller, and none matter here).
func serviceAccountAudit(user controlplane.User) string {
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["` + user.Name + `"]
  - level: None
`
}

// request is what the RBAC authorizer decides on: the attributes of one
// resource request, as the audit log records them.
type request struct {
	Verb, APIGroup, Resource, Subresource, Namespace, Name string
}

func (r request) String() string {
	s := r.Verb + " " + r.Resource
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.APIGroup != "" {
		s += "." + r.APIGroup
	}
	switch {
	case r.Namespace != "" && r.Name != "":
		s += " " + r.Namespace + "/" + r.Name
	case r.Namespace != "":
		s += " in " + r.Namespace
	case r.Name != "":
		s += " " + r.Name
	}
	return s
}

// recordedRequests reads the audit log: every distinct resource request
// user made, in a stable order. Requests for non-resource URLs (discovery,
// health) are left out: every authenticated user may make them, whatever the
// chart grants.
func recordedRequests(t *testing.T, path, user string) []request {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("opening the audit log: %v", err)
	}
	defer f.Close()
	seen := map[request]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup, Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		if ev.User.Username != user || ev.ObjectRef == nil {
			continue
		}
		o := ev.ObjectRef
		r := request{Verb: ev.Verb, APIGroup: o.APIGroup, Resource: o.Resource, Subresource: o.Subresource, Namespace: o.Namespace, Name: o.Name}
		// The log fills a create's name in from the object; the authorizer
		// decided before the object was read, without it (a subresource's
		// create names its parent in the path, and keeps it).
		if r.Verb == "create" && r.Subresource == "" {
			r.Name = ""
		}
		seen[r] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	out := make([]request, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b request) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// grant is the smallest piece of a rule: one verb on one resource of one
// API group, limited to the rule's resourceNames when it has any.
type grant struct {
	Group, Resource, Verb string
	Names                 []string
}

func (g grant) String() string {
	s := g.Verb + " " + g.Resource
	if g.Group != "" {
		s += "." + g.Group
	}
	if len(g.Names) > 0 {
		s += " " + strings.Join(g.Names, ",")
	}
	return s
}

// grantsOf splits a rule into its grants.
func grantsOf(t *testing.T, rule rbacv1.PolicyRule) []grant {
	t.Helper()
	if len(rule.NonResourceURLs) > 0 {
		t.Fatalf("rule %v: non-resource URLs are not handled by the rule-removal proof", rule)
	}
	var out []grant
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			for _, v := range rule.Verbs {
				out = append(out, grant{Group: g, Resource: r, Verb: v, Names: rule.ResourceNames})
			}
		}
	}
	return out
}

// covers mirrors RBAC's matching. It only chooses which recorded requests
// are worth asking the authorizer about after g is removed: a request g
// does not cover cannot become refused by g's removal. The authorizer, not
// this function, decides that a request is refused.
func (g grant) covers(r request) bool {
	resource := r.Resource
	if r.Subresource != "" {
		resource += "/" + r.Subresource
	}
	match := func(want, got string) bool { return want == rbacv1.ResourceAll || want == got }
	return match(g.Group, r.APIGroup) && match(g.Resource, resource) && match(g.Verb, r.Verb) &&
		(len(g.Names) == 0 || slices.Contains(g.Names, r.Name))
}

// probe is a request g allows in a role of namespace ns ("" for a
// ClusterRole): the flag that shows when a change to g reaches the
// authorizer.
func (g grant) probe(ns string) request {
	resource, sub, _ := strings.Cut(g.Resource, "/")
	r := request{Verb: g.Verb, APIGroup: g.Group, Resource: resource, Subresource: sub, Namespace: ns}
	if len(g.Names) > 0 {
		r.Name = g.Names[0]
	}
	return r
}

// boundRole is a Role or ClusterRole of the release that a binding of the
// release grants to the ServiceAccount.
type boundRole struct {
	Kind, Namespace, Name string
}

func (b boundRole) String() string {
	if b.Namespace != "" {
		return b.Kind + " " + b.Namespace + "/" + b.Name
	}
	return b.Kind + " " + b.Name
}

func (b boundRole) object() (client.Object, *[]rbacv1.PolicyRule) {
	if b.Kind == "ClusterRole" {
		o := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}
		return o, &o.Rules
	}
	o := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}
	return o, &o.Rules
}

func (b boundRole) rules(ctx context.Context, cp *controlplane.ControlPlane) ([]rbacv1.PolicyRule, error) {
	o, rules := b.object()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return nil, fmt.Errorf("reading %s: %w", b, err)
	}
	return *rules, nil
}

func (b boundRole) setRules(ctx context.Context, cp *controlplane.ControlPlane, to []rbacv1.PolicyRule) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, rules := b.object()
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		*rules = to
		return cp.Client.Update(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("updating %s: %w", b, err)
	}
	return nil
}

// releaseRoles returns the roles the installed release binds to the
// chart's ServiceAccount: what the chart renders for the mode it was
// installed in.
func releaseRoles(t *testing.T, kube []string, ns string) []boundRole {
	t.Helper()
	var out []boundRole
	for _, o := range documents(t, helm(t, kube, "get", "manifest", "karpenter", "--namespace", ns)) {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		bindingNS := ""
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			typed(t, o, b)
			subjects, ref = b.Subjects, b.RoleRef
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			typed(t, o, b)
			subjects, ref, bindingNS = b.Subjects, b.RoleRef, b.Namespace
			if ref.Kind == "ClusterRole" {
				t.Fatalf("RoleBinding %s/%s grants a ClusterRole in a namespace: not handled by the rule-removal proof", b.Namespace, b.Name)
			}
		default:
			continue
		}
		if slices.Contains(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: serviceAccountName, Namespace: ns}) {
			out = append(out, boundRole{Kind: ref.Kind, Namespace: bindingNS, Name: ref.Name})
		}
	}
	if len(out) == 0 {
		t.Fatal("the release binds no role to its ServiceAccount")
	}
	return out
}

// allowed asks the API server's authorizer whether user may make r.
func allowed(ctx context.Context, cp *controlplane.ControlPlane, user controlplane.User, r request) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user.Name,
		Groups: user.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: r.Namespace, Verb: r.Verb, Group: r.APIGroup, Resource: r.Resource, Subresource: r.Subresource, Name: r.Name,
		},
	}}
	got, err := cp.Kubernetes.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("reviewing %s: %w", r, err)
	}
	return got.Status.Allowed, nil
}

// removal takes part of a role away: rule Rule of it, or only one grant of
// that rule when Grant is set.
type removal struct {
	Role  boundRole
	Rules []rbacv1.PolicyRule // the role's rules, as installed
	Rule  int
	Grant *grant
}

func (rm removal) String() string {
	r := rm.Rules[rm.Rule]
	s := fmt.Sprintf("%s rule %d {apiGroups %q resources %q verbs %q", rm.Role, rm.Rule, r.APIGroups, r.Resources, r.Verbs)
	if len(r.ResourceNames) > 0 {
		s += fmt.Sprintf(" resourceNames %q", r.ResourceNames)
	}
	s += "}"
	if rm.Grant != nil {
		s += ": " + rm.Grant.String()
	}
	return s
}

// reduced is the role's rules without what rm removes; the rest of a rule
// losing one grant stays, one rule per remaining grant.
func (rm removal) reduced(t *testing.T) (rules []rbacv1.PolicyRule, gone []grant) {
	t.Helper()
	for i, r := range rm.Rules {
		if i != rm.Rule {
			rules = append(rules, r)
			continue
		}
		for _, g := range grantsOf(t, r) {
			if rm.Grant != nil && !slices.Equal([]string{g.Group, g.Resource, g.Verb}, []string{rm.Grant.Group, rm.Grant.Resource, rm.Grant.Verb}) {
				rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g.Group}, Resources: []string{g.Resource}, Verbs: []string{g.Verb}, ResourceNames: g.Names})
				continue
			}
			gone = append(gone, g)
		}
	}
	return rules, gone
}

// denied applies rm, waits until the authorizer refuses what it took away,
// and returns the recorded requests the authorizer then refuses. The role
// is restored, and the authorizer seen to allow again, before it returns,
// so one removal's effect never leaks into the next one's answer.
func denied(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, user controlplane.User, rm removal, reqs []request) []request {
	t.Helper()
	rules, gone := rm.reduced(t)
	if err := rm.Role.setRules(ctx, cp, rules); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		if err := rm.Role.setRules(ctx, cp, rm.Rules); err != nil {
			t.Fatal(err)
		}
		if err := waitAuthorized(ctx, cp, user, rm.Role.Namespace, gone, true); err != nil {
			t.Fatalf("after restoring %s: %v", rm.Role, err)
		}
	}
	defer restore()
	// The authorizer reads roles from an informer: a request only the
	// removed grants allow flips once the change reached it. One still
	// allowed after a while is granted again by another rule, so what was
	// removed is redundant.
	if err := waitAuthorized(ctx, cp, user, rm.Role.Namespace, gone, false); err != nil {
		t.Errorf("%s: redundant, another rule grants it too: %v", rm, err)
		return nil
	}
	var out []request
	for _, r := range reqs {
		if !slices.ContainsFunc(gone, func(g grant) bool { return g.covers(r) }) {
			continue
		}
		ok, err := allowed(ctx, cp, user, r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			out = append(out, r)
		}
	}
	restore()
	return out
}

// waitAuthorized waits until every grant's probe is allowed (want true) or
// refused (want false).
func waitAuthorized(ctx context.Context, cp *controlplane.ControlPlane, user controlplane.User, ns string, gs []grant, want bool) error {
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, g := range gs {
			ok, err := allowed(ctx, cp, user, g.probe(ns))
			if err != nil {
				return false, err
			}
			if ok != want {
				pending = append(pending, g.probe(ns).String())
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("allowed=%v not reached for %q: %w", want, pending, err)
	}
	return nil
}

// proveEveryRuleNeeded is the rule-removal proof for the release installed
// in ns, over the requests the ServiceAccount made so far. Each rule, and
// each grant of a rule with more than one, must refuse at least one of them
// when removed. Nothing is exempt: a verb only some path the cycles miss
// needs calls for a cycle that reaches it (as the guarded pod reaches
// drain's deadline).
func proveEveryRuleNeeded(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, kube []string, ns string) {
	t.Helper()
	start := time.Now()
	user := chartServiceAccount(ns)
	reqs := recordedRequests(t, cp.AuditLogPath, user.Name)
	if len(reqs) == 0 {
		t.Fatalf("the audit log %s holds no request of %s", cp.AuditLogPath, user.Name)
	}
	// Nothing removed yet, the authorizer must allow every recorded
	// request: the cycle saw no forbidden, and the attributes read back
	// from the log are the ones it decided on.
	for _, r := range reqs {
		ok, err := allowed(ctx, cp, user, r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("recorded request %s is refused with the chart's roles intact", r)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d distinct requests recorded as %s", len(reqs), user.Name)

	var rules, rulesNeeded, grants, grantsNeeded int
	used := func(rm removal) bool {
		refused := denied(ctx, t, cp, user, rm, reqs)
		if len(refused) == 0 {
			return false
		}
		examples := refused[:min(len(refused), 3)]
		t.Logf("needed: %s (removed, %d recorded requests refused, e.g. %v)", rm, len(refused), examples)
		return true
	}
	unused := func(rm removal) {
		t.Errorf("unused: %s: removing it refuses none of the %d requests the controller made", rm, len(reqs))
	}
	for _, role := range releaseRoles(t, kube, ns) {
		installed, err := role.rules(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		for i, rule := range installed {
			rules++
			rm := removal{Role: role, Rules: installed, Rule: i}
			ruleUsed := used(rm)
			if ruleUsed {
				rulesNeeded++
			} else {
				unused(rm)
			}
			gs := grantsOf(t, rule)
			grants += len(gs)
			if len(gs) == 1 {
				// The rule is its only grant: the removal above was the
				// grant's.
				if ruleUsed {
					grantsNeeded++
				}
				continue
			}
			for _, g := range gs {
				rm := removal{Role: role, Rules: installed, Rule: i, Grant: &g}
				if used(rm) {
					grantsNeeded++
				} else {
					unused(rm)
				}
			}
		}
	}
	t.Logf("%d of %d rules and %d of %d grants (verb, resource) proven needed in %s",
		rulesNeeded, rules, grantsNeeded, grants, time.Since(start).Round(time.Second))
}
