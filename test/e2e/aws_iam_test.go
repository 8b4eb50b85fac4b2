package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// The controller's AWS identity in the AWS e2e tests. It runs as an IAM
// principal of the local AWS, not with the account's root key, so its calls
// are authorized against an IAM policy, throttled at EC2's figures and see
// EC2's and IAM's eventual consistency. Every call is evaluated under two
// policy sets: upstream Karpenter's controller policy (awslocal's test data)
// and the policy this project ships (docs/iam/cloudformation.yaml). One set
// decides, the other is evaluated in its shadow: with the deciding set
// refusing nothing the controller's path is the one it would take under the
// shadow set too, so a shadow set that also refuses nothing would have
// allowed the same run. The suite's tests alternate which set decides
// (suitePolicies), so each set is enforced for real on every call path
// somewhere in the suite, and shadow-evaluated on all of them.

// controllerPolicy is the policy set that decides a test's calls.
type controllerPolicy int

const (
	underUpstream controllerPolicy = iota
	underShipped
)

func (p controllerPolicy) String() string {
	if p == underShipped {
		return "shipped"
	}
	return "upstream"
}

// suitePolicies is the AWS e2e suite: its tests and the set each enforces.
var suitePolicies = map[string]controllerPolicy{
	"TestAWSExperiments":          underUpstream,
	"TestAWSFaults":               underShipped,
	"TestAWSInterruption":         underUpstream,
	"TestAWSDrift":                underShipped,
	"TestAWSInterruptionKinds":    underUpstream,
	"TestAWSCapacityReservations": underShipped,
	"TestAWSZonalShift":           underShipped,
	"TestAWSPlacementGroups":      underShipped,
	"TestAWSNodeOverlay":          underShipped,
}

// suiteTests are the suite's tests, whose logs the rule-removal proof
// needs. TestAWSBatchedScaleUp runs under upstream's policy (the zero
// controllerPolicy) outside the suite: make test runs it alone, after the
// other streams, since on two cores it cannot share the local AWS's CPU
// (hack/test.sh); it holds itself to zero denials under both policies.
func suiteTests() []string {
	var out []string
	for name := range suitePolicies {
		out = append(out, name)
	}
	return out
}

// providerStrict is whether the AWS e2e tests hold the controller to a
// local AWS as strict as a real account: IAM enforced (the deciding set
// refuses calls, and a denial fails the test) and EC2's and IAM's eventual
// consistency on. False would only evaluate and record the controller's
// calls and make launches visible at once. Throttling at EC2's figures is
// on either way.
const providerStrict = true

// iamEnforced makes the deciding set refuse calls.
const iamEnforced = providerStrict

// awsOptions are the e2e tests' local AWS options.
func awsOptions(dir string) awslocal.Options {
	return awslocal.Options{Dir: dir, Consistency: awslocal.ConsistencyOptions{Disabled: !providerStrict}}
}

// controllerPrincipal is the principal's name.
const controllerPrincipal = "karpenter-controller"

// shippedPolicyPath is the shipped CloudFormation template, from this
// package's directory.
var shippedPolicyPath = filepath.Join("..", "..", "docs", "iam", "cloudformation.yaml")

func policyVars() awslocal.PolicyVars {
	return awslocal.PolicyVars{ClusterName: awsClusterName}
}

// controllerPolicies are upstream's and the shipped policies for the e2e
// cluster.
func controllerPolicies(t testing.TB) (upstream, shipped []awslocal.Policy) {
	t.Helper()
	upstream, err := awslocal.UpstreamControllerPolicies(policyVars())
	if err != nil {
		t.Fatalf("upstream's controller policy: %v", err)
	}
	b, err := os.ReadFile(shippedPolicyPath)
	if err != nil {
		t.Fatalf("the shipped IAM policy: %v", err)
	}
	shipped, err = awslocal.CloudFormationPolicies(b, policyVars())
	if err != nil {
		t.Fatalf("the shipped IAM policy %s: %v", shippedPolicyPath, err)
	}
	return upstream, shipped
}

// controllerCredentials makes the controller's principal (once per local
// AWS) under the test's policy set and, at the test's end, reports its
// denials (failing the test when IAM is enforced) and adds its call log to
// the suite's.
func (e *awsEnv) controllerCredentials(t testing.TB) awslocal.Credentials {
	t.Helper()
	if e.creds != nil {
		return *e.creds
	}
	upstream, shipped := controllerPolicies(t)
	p := awslocal.Principal{Name: controllerPrincipal, Policies: upstream, Shadow: map[string][]awslocal.Policy{"shipped": shipped},
		AuditOnly: !iamEnforced}
	if e.policy == underShipped {
		p.Policies, p.Shadow = shipped, map[string][]awslocal.Policy{"upstream": upstream}
	}
	creds, err := e.local.AddPrincipal(p)
	if err != nil {
		t.Fatalf("adding the controller's principal: %v", err)
	}
	e.creds = &creds
	t.Cleanup(func() { e.checkDenials(t) })
	return creds
}

// checkDenials reports the controller's denials under both sets.
func (e *awsEnv) checkDenials(t testing.TB) {
	shadow := "shipped"
	if e.policy == underShipped {
		shadow = "upstream"
	}
	sets := map[string][]awslocal.Denial{
		e.policy.String(): e.local.Denials(controllerPrincipal),
		shadow:            e.local.ShadowDenials(controllerPrincipal, shadow),
	}
	for _, set := range []string{e.policy.String(), shadow} {
		list := sets[set]
		if len(list) == 0 {
			continue
		}
		msg := fmt.Sprintf("%d call(s) the %s policy denies, e.g.:\n%s", len(list), set, summarizeDenials(list, 12))
		if iamEnforced {
			t.Error(msg)
		} else {
			t.Log(msg)
		}
	}
	if iamEnforced && e.local.DenialCount() != 0 {
		t.Errorf("the local AWS's denial counter is %d", e.local.DenialCount())
	}
	log := e.local.AuthorizationLog(controllerPrincipal)
	t.Logf("the controller's calls needed %d distinct authorizations; throttled: %s", len(log), e.local.ThrottleSummary())
	if !t.Failed() {
		suiteLog.add(t.Name(), log)
	}
}

// summarizeDenials lists the distinct denied (call, action, resource)
// triples, at most n.
func summarizeDenials(list []awslocal.Denial, n int) string {
	seen := map[string]int{}
	var order []string
	for _, d := range list {
		k := d.Call + ": " + d.Request.String()
		if keys := d.Request.Context["aws:tagkeys"]; len(keys) > 0 {
			k += " with tags " + strings.Join(keys, ", ")
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	var b strings.Builder
	for i, k := range order {
		if i == n {
			fmt.Fprintf(&b, "  … and %d more\n", len(order)-n)
			break
		}
		fmt.Fprintf(&b, "  %s (×%d)\n", k, seen[k])
	}
	return b.String()
}

// suiteLog gathers the call logs of the suite's passing tests, for the
// rule-removal proof at the end of the package run.
var suiteLog = &callLog{byTest: map[string][]awslocal.LoggedRequest{}}

type callLog struct {
	mu     sync.Mutex
	byTest map[string][]awslocal.LoggedRequest
}

func (c *callLog) add(test string, entries []awslocal.LoggedRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byTest[test] = append(c.byTest[test], entries...)
}

// complete reports whether every suite test contributed its log, and the
// union when it did.
func (c *callLog) complete() ([]awslocal.LoggedRequest, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	var all []awslocal.LoggedRequest
	for _, name := range suiteTests() {
		entries, ok := c.byTest[name]
		if !ok {
			missing = append(missing, name)
		}
		all = append(all, entries...)
	}
	sort.Strings(missing)
	return all, missing
}

// proveShippedPolicyRules is the rule-removal proof, run once the package's
// tests have passed: taking any one statement of the shipped policy away,
// or one action of a statement, must refuse at least one authorization the
// controller needed somewhere in the AWS suite (the calls recorded by every
// suite test, evaluated with the local AWS's own evaluator). It needs the
// whole suite's log, so a run of some of the tests only says it skipped.
func proveShippedPolicyRules() int {
	all, missing := suiteLog.complete()
	if len(missing) > 0 {
		if len(missing) < len(suiteTests()) {
			fmt.Printf("shipped IAM policy rule removal: skipped, the AWS suite did not run whole (missing %s)\n", strings.Join(missing, ", "))
		}
		return 0
	}
	b, err := os.ReadFile(shippedPolicyPath)
	if err != nil {
		fmt.Printf("--- FAIL: shipped IAM policy rule removal: %v\n", err)
		return 1
	}
	shipped, err := awslocal.CloudFormationPolicies(b, policyVars())
	if err != nil {
		fmt.Printf("--- FAIL: shipped IAM policy rule removal: %v\n", err)
		return 1
	}
	unneeded := awslocal.UnneededRules(shipped, all)
	if len(unneeded) > 0 {
		fmt.Printf("--- FAIL: shipped IAM policy rule removal: %d rule(s) the AWS suite never needed:\n", len(unneeded))
		for _, u := range unneeded {
			fmt.Printf("    %s\n", u)
		}
		return 1
	}
	statements := 0
	for _, p := range shipped {
		statements += len(p.Statement)
	}
	fmt.Printf("shipped IAM policy rule removal: each of its %d statements, and each action of them, is needed by the AWS suite (%d recorded authorizations)\n",
		statements, len(all))
	return 0
}
