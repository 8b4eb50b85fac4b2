package awslocal

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// IAM for the local AWS's principals. The static credentials
// (AccessKeyID) are the account's root: moto's and the tests' own calls,
// never refused, throttled or delayed. A Principal added with AddPrincipal
// gets its own access key; every call signed with it is authenticated
// (SigV4, checked against its secret) and authorized against its identity
// policies with IAM's evaluation logic (Evaluate) before the front serves
// it, and it sees EC2's request throttling and eventual consistency.

// Principal is an IAM identity of the account with identity policies.
type Principal struct {
	// Name is the IAM user's name: its ARN is
	// arn:aws:iam::123456789012:user/<Name>.
	Name string
	// Policies decide the principal's calls.
	Policies []Policy
	// Shadow policy sets are evaluated on every call and their would-be
	// denials recorded (ShadowDenials) without deciding anything: with the
	// enforced policies denying nothing, a run proves the shadow sets
	// would have allowed the same run.
	Shadow map[string][]Policy
	// AuditOnly records the denials of Policies (Denials, the counter)
	// but lets the calls through.
	AuditOnly bool
}

// Credentials are a principal's access key.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// Denial is a call IAM refused (or, for audit-only and shadow sets, would
// have refused).
type Denial struct {
	Principal string `json:"principal"`
	// PolicySet is "" for the principal's own policies, else the shadow
	// set's name.
	PolicySet string      `json:"policySet,omitempty"`
	Call      string      `json:"call"`
	Request   AuthRequest `json:"request"`
	Decision  Decision    `json:"decision"`
	Time      time.Time   `json:"time"`
}

func (d Denial) String() string {
	set := ""
	if d.PolicySet != "" {
		set = " [" + d.PolicySet + "]"
	}
	return fmt.Sprintf("%s%s: %s denied %s %s", d.Principal, set, d.Call, d.Request, d.Decision.Reason(d.Request.Action))
}

// LoggedRequest is one distinct authorization a principal's calls needed,
// with the API call that needed it and how often.
type LoggedRequest struct {
	Call    string      `json:"call"`
	Request AuthRequest `json:"request"`
	Count   int         `json:"count"`
}

type principal struct {
	Principal
	arn   string
	creds Credentials
}

// maxDenials bounds the denials kept per principal; the counters go on.
const maxDenials = 1000

type iamState struct {
	mu sync.Mutex
	// calls counts each principal's requests by "service:Action".
	calls   map[string]map[string]int
	byKey   map[string]*principal
	byName  map[string]*principal
	denials map[string][]Denial // principal + "\x00" + set
	counts  map[string]int
	log     map[string]map[string]*LoggedRequest
	total   int
}

func newIAMState() *iamState {
	return &iamState{byKey: map[string]*principal{}, byName: map[string]*principal{}, denials: map[string][]Denial{},
		counts: map[string]int{}, log: map[string]map[string]*LoggedRequest{}, calls: map[string]map[string]int{}}
}

var principalNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)

// AddPrincipal creates (or replaces the policies of) the named principal and
// returns its access key, which stays the same across replacements.
func (l *Local) AddPrincipal(p Principal) (Credentials, error) {
	if !principalNameRE.MatchString(p.Name) {
		return Credentials{}, fmt.Errorf("principal name %q: want 1-64 of letters, digits and +=,.@_-", p.Name)
	}
	for _, pol := range p.Policies {
		if err := pol.Validate(); err != nil {
			return Credentials{}, err
		}
	}
	for _, set := range p.Shadow {
		for _, pol := range set {
			if err := pol.Validate(); err != nil {
				return Credentials{}, err
			}
		}
	}
	s := l.front.iam
	s.mu.Lock()
	defer s.mu.Unlock()
	if have := s.byName[p.Name]; have != nil {
		have.Principal = p
		return have.creds, nil
	}
	creds := Credentials{AccessKeyID: "AKIA" + randomText(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
		SecretAccessKey: randomText(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
	pr := &principal{Principal: p, arn: fmt.Sprintf("arn:aws:iam::%s:user/%s", AccountID, p.Name), creds: creds}
	s.byKey[creds.AccessKeyID] = pr
	s.byName[p.Name] = pr
	return creds, nil
}

func randomText(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// ConfigWith is Config for region signed with a principal's credentials.
func (l *Local) ConfigWith(_ context.Context, region string, c Credentials) aws.Config {
	if region == "" {
		region = DefaultRegion
	}
	return aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
		BaseEndpoint: aws.String(l.endpoint),
	}
}

// EnvWith is Env with a principal's credentials.
func (l *Local) EnvWith(c Credentials) []string {
	env := l.Env()
	for i, kv := range env {
		switch {
		case strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID="):
			env[i] = "AWS_ACCESS_KEY_ID=" + c.AccessKeyID
		case strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY="):
			env[i] = "AWS_SECRET_ACCESS_KEY=" + c.SecretAccessKey
		}
	}
	return env
}

// Denials are the denials of the principal's own policies, oldest first
// (at most the last 1000).
func (l *Local) Denials(name string) []Denial { return l.front.iam.denialsOf(name, "") }

// ShadowDenials are the would-be denials of one shadow policy set.
func (l *Local) ShadowDenials(name, set string) []Denial { return l.front.iam.denialsOf(name, set) }

// DenialCount is how many calls the principals' own policies denied (or,
// audit-only, would have denied), all principals together.
func (l *Local) DenialCount() int {
	s := l.front.iam
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// AuthorizationLog is every distinct authorization the principal's calls
// needed, whatever the decision, in a stable order: the call log a reduced
// policy can be evaluated against (Evaluate) without running again.
func (l *Local) AuthorizationLog(name string) []LoggedRequest {
	s := l.front.iam
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LoggedRequest, 0, len(s.log[name]))
	for _, e := range s.log[name] {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Request.key() < out[j].Request.key() })
	return out
}

func (s *iamState) denialsOf(name, set string) []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Denial(nil), s.denials[name+"\x00"+set]...)
}

func (s *iamState) record(p *principal, call string, reqs []AuthRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.log[p.Name]
	if m == nil {
		m = map[string]*LoggedRequest{}
		s.log[p.Name] = m
	}
	for _, r := range reqs {
		k := r.key()
		if e := m[k]; e != nil {
			e.Count++
			continue
		}
		m[k] = &LoggedRequest{Call: call, Request: r, Count: 1}
	}
}

func (s *iamState) deny(d Denial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := d.Principal + "\x00" + d.PolicySet
	s.counts[k]++
	if d.PolicySet == "" {
		s.total++
	}
	list := append(s.denials[k], d)
	if len(list) > maxDenials {
		list = list[len(list)-maxDenials:]
	}
	s.denials[k] = list
}

// authError is a refusal before authorization: an unknown key or a bad
// signature.
type authError struct {
	status    int
	code, msg string
}

var (
	credentialRE    = regexp.MustCompile(`Credential=([^/,\s]+)/(\d{8})/([^/,]+)/([^/,]+)/aws4_request`)
	signedHeadersRE = regexp.MustCompile(`SignedHeaders=([^,\s]+)`)
	signatureRE     = regexp.MustCompile(`Signature=([0-9a-fA-F]+)`)
)

// authenticate finds the principal that signed r: nil for the account's
// static (root) key and unsigned requests; an error for an unknown key or
// a signature that does not verify with the principal's secret.
func (f *front) authenticate(r *http.Request, c *call) (*principal, *authError) {
	auth := r.Header.Get("Authorization")
	m := credentialRE.FindStringSubmatch(auth)
	if m == nil || m[1] == AccessKeyID {
		return nil, nil
	}
	f.iam.mu.Lock()
	p := f.iam.byKey[m[1]]
	f.iam.mu.Unlock()
	if p == nil {
		return nil, unknownKey(c)
	}
	if !verifySignature(r, c.Body, p.creds, m[4], m[3], auth) {
		return nil, badSignature(c)
	}
	f.iam.mu.Lock()
	if f.iam.calls[p.Name] == nil {
		f.iam.calls[p.Name] = map[string]int{}
	}
	f.iam.calls[p.Name][c.Service+":"+c.Action]++
	f.iam.mu.Unlock()
	return p, nil
}

// CallsBy is how many requests the named principal made, by
// "service:Action", retries, throttled and denied calls included.
func (l *Local) CallsBy(name string) map[string]int {
	s := l.front.iam
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls[name]))
	for k, v := range s.calls[name] {
		out[k] = v
	}
	return out
}

func unknownKey(c *call) *authError {
	switch c.Protocol {
	case protoEC2:
		return &authError{http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials"}
	case protoQuery:
		return &authError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}
	default:
		return &authError{http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid."}
	}
}

func badSignature(c *call) *authError {
	const msg = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	if c.Protocol == protoEC2 {
		return &authError{http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials"}
	}
	return &authError{http.StatusForbidden, "SignatureDoesNotMatch", msg}
}

// verifySignature signs a copy of r holding only the headers r says it
// signed, with the same time and payload, and compares the signatures.
func verifySignature(r *http.Request, body []byte, creds Credentials, service, region, auth string) bool {
	sh := signedHeadersRE.FindStringSubmatch(auth)
	sig := signatureRE.FindStringSubmatch(auth)
	if sh == nil || sig == nil {
		return false
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	cp, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return false
	}
	cp.URL.RawPath, cp.URL.Path = r.URL.RawPath, r.URL.Path
	cp.Host = r.Host
	for _, h := range strings.Split(sh[1], ";") {
		switch h {
		case "host":
		case "content-length":
			cp.ContentLength = int64(len(body))
		default:
			if v := r.Header.Values(h); len(v) > 0 {
				cp.Header[http.CanonicalHeaderKey(h)] = v
			}
		}
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		h := sha256.Sum256(body)
		payload = hex.EncodeToString(h[:])
	}
	signer := v4.NewSigner()
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey},
		cp, payload, service, region, when); err != nil {
		return false
	}
	want := signatureRE.FindStringSubmatch(cp.Header.Get("Authorization"))
	return want != nil && subtle.ConstantTimeCompare([]byte(strings.ToLower(want[1])), []byte(strings.ToLower(sig[1]))) == 1
}

// authorize evaluates the call's authorizations for p: the principal's own
// policies decide, the shadow sets are only recorded. It answers the call
// with AWS's denial and returns false when the call is refused.
func (f *front) authorize(ctx context.Context, w http.ResponseWriter, c *call, p *principal) bool {
	reqs, err := f.authRequests(ctx, c, p)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, internalCode(c), "the local AWS could not authorize the call: "+err.Error())
		return false
	}
	return f.decide(w, c, p, reqs)
}

// decide records reqs and answers the first refused one, if any.
func (f *front) decide(w http.ResponseWriter, c *call, p *principal, reqs []AuthRequest) bool {
	call := iamPrefix(c.Service) + ":" + c.Action
	f.iam.record(p, call, reqs)
	now := time.Now()
	for name, set := range p.Shadow {
		for _, r := range reqs {
			if d := Evaluate(set, r); !d.Allowed {
				f.iam.deny(Denial{Principal: p.Name, PolicySet: name, Call: call, Request: r, Decision: d, Time: now})
			}
		}
	}
	for _, r := range reqs {
		d := Evaluate(p.Policies, r)
		if d.Allowed {
			continue
		}
		f.iam.deny(Denial{Principal: p.Name, Call: call, Request: r, Decision: d, Time: now})
		if p.AuditOnly {
			continue
		}
		writeDenial(w, c, p, r, d)
		return false
	}
	return true
}

func internalCode(c *call) string {
	if c.Protocol == protoEC2 {
		return "InternalError"
	}
	return "InternalFailure"
}

// writeDenial answers as the service does when IAM refuses: EC2's
// UnauthorizedOperation carries an encoded authorization message
// (DecodeAuthorizationMessage reads it back); IAM and the Query services
// answer AccessDenied; the JSON and REST services AccessDeniedException.
func writeDenial(w http.ResponseWriter, c *call, p *principal, r AuthRequest, d Decision) {
	msg := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", p.arn, r.Action, r.Resource, d.Reason(r.Action))
	switch c.Protocol {
	case protoEC2:
		writeError(w, c, http.StatusForbidden, "UnauthorizedOperation",
			"You are not authorized to perform this operation. "+msg+". Encoded authorization failure message: "+encodeAuthorization(p, r, d))
	case protoQuery:
		writeError(w, c, http.StatusForbidden, "AccessDenied", msg)
	case protoREST:
		writeError(w, c, http.StatusForbidden, "AccessDeniedException", msg)
	default:
		code := "AccessDeniedException"
		if c.Service == "sqs" {
			code = "AccessDenied"
		}
		writeError(w, c, http.StatusBadRequest, code, msg)
	}
}

// authorizationMessage is the decoded form of EC2's encoded authorization
// failure message, in the shape STS's DecodeAuthorizationMessage returns.
type authorizationMessage struct {
	Allowed           bool `json:"allowed"`
	ExplicitDeny      bool `json:"explicitDeny"`
	MatchedStatements struct {
		Items []map[string]string `json:"items"`
	} `json:"matchedStatements"`
	Failures struct {
		Items []string `json:"items"`
	} `json:"failures"`
	Context struct {
		Principal struct {
			Arn string `json:"arn"`
		} `json:"principal"`
		Action     string `json:"action"`
		Resource   string `json:"resource"`
		Conditions struct {
			Items []map[string]any `json:"items"`
		} `json:"conditions"`
	} `json:"context"`
}

func encodeAuthorization(p *principal, r AuthRequest, d Decision) string {
	var m authorizationMessage
	m.Allowed, m.ExplicitDeny = false, d.ExplicitDeny
	m.MatchedStatements.Items = []map[string]string{}
	if d.ExplicitDeny {
		m.MatchedStatements.Items = append(m.MatchedStatements.Items, map[string]string{"policy": d.Policy, "statementId": d.Statement, "effect": "DENY"})
	}
	m.Failures.Items = []string{}
	m.Context.Principal.Arn = p.arn
	m.Context.Action, m.Context.Resource = r.Action, r.Resource
	keys := make([]string, 0, len(r.Context))
	for k := range r.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m.Context.Conditions.Items = []map[string]any{}
	for _, k := range keys {
		m.Context.Conditions.Items = append(m.Context.Conditions.Items, map[string]any{"key": k, "values": r.Context[k]})
	}
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeAuthorizationMessage reads an encoded authorization failure message
// back, as STS's DecodeAuthorizationMessage does (the front also answers
// that call).
func DecodeAuthorizationMessage(encoded string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return "", fmt.Errorf("the encoded authorization message is invalid: %w", err)
	}
	return string(b), nil
}

// iamPrefix is the IAM service prefix of a SigV4 signing name.
func iamPrefix(service string) string {
	switch service {
	case "":
		return "unknown"
	default:
		return service
	}
}

// decodeAuthorizationMessage serves STS's DecodeAuthorizationMessage for
// the messages the front encodes.
func (f *front) decodeAuthorizationMessage(_ context.Context, w http.ResponseWriter, c *call) bool {
	msg, err := DecodeAuthorizationMessage(c.Form.Get("EncodedMessage"))
	if err != nil {
		writeError(w, c, http.StatusBadRequest, "InvalidAuthorizationMessageException", err.Error())
		return true
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<DecodeAuthorizationMessageResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><DecodeAuthorizationMessageResult><DecodedMessage>%s</DecodedMessage></DecodeAuthorizationMessageResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></DecodeAuthorizationMessageResponse>`,
		xmlText(msg), newRequestID())
	return true
}
