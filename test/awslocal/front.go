package awslocal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// call is one request as the front understands it: the service from the
// SigV4 credential scope, the action, and the decoded parameters.
type call struct {
	Service  string
	Region   string
	Action   string
	Protocol protocol
	// Form holds EC2 / Query parameters; JSON holds the JSON body.
	Form url.Values
	Body []byte
	// Principal signed the call; nil for the account's root key.
	Principal *principal
	// templates are the launch templates the call names, read once for
	// its authorization, limits and consistency checks (templateFor).
	templates map[string]*templateAuth
}

// scopeRE picks region and service out of
// "Credential=AKID/20260101/us-east-1/ec2/aws4_request".
var scopeRE = regexp.MustCompile(`Credential=[^/,]+/\d{8}/([^/,]+)/([^/,]+)/aws4_request`)

const maxBody = 64 << 20

func parseCall(r *http.Request) (*call, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	r.Body.Close()
	c := &call{Body: body, Region: DefaultRegion}
	if m := scopeRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		c.Region, c.Service = m[1], m[2]
	}
	switch target := r.Header.Get("X-Amz-Target"); {
	case target != "":
		c.Action = target[strings.LastIndexByte(target, '.')+1:]
		c.Protocol = protoJSON11
		if strings.Contains(r.Header.Get("Content-Type"), "1.0") {
			c.Protocol = protoJSON10
		}
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || r.URL.Query().Has("Action"):
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("parsing query body: %w", err)
		}
		for k, v := range r.URL.Query() {
			form[k] = append(form[k], v...)
		}
		c.Form = form
		c.Action = form.Get("Action")
		c.Protocol = protoQuery
		if c.Service == "ec2" {
			c.Protocol = protoEC2
		}
	default:
		c.Protocol = protoREST
		c.Action = r.Method + " " + r.URL.Path
	}
	return c, nil
}

// handler answers a call the front owns. It returns false to forward the
// call to moto instead.
type handler func(ctx context.Context, w http.ResponseWriter, c *call) bool

type callKey struct{ Service, Action string }

// front is the HTTP server the SDK talks to.
type front struct {
	moto      *url.URL
	proxy     *httputil.ReverseProxy
	faults    *faults
	prices    *prices
	spot      *spotPrices
	catalog   *catalog
	sidecar   string
	client    *http.Client
	handlers  map[callKey]handler
	snapshots snapshots
	zonesMu   sync.Mutex
	zones     map[string][]zone
	// info caches moto's EC2 metadata; ec2 is what the front owns beyond
	// moto: capacity, reservations, launched-instance attributes, status.
	info *ec2Info
	ec2  *ec2State
	// deprecated are the AMI deprecation times moto cannot keep.
	deprecated *deprecations
	// iam holds the principals, their denials and call logs; throttle,
	// consist and limits are EC2's request throttling, eventual
	// consistency and quotas.
	iam      *iamState
	throttle *throttler
	consist  *consistency
	limits   LimitOptions
	// arc is ARC's zonal shift API, which moto lacks (arc.go).
	arc *arcState
	// eksVersions are upgraded cluster versions moto cannot keep (eks.go).
	eksVersions *eksVersions

	callsMu sync.Mutex
	calls   map[callKey]int
}

type ctxKey struct{}

func newFront(motoURL, sidecar string, cat *catalog, opts Options) (*front, error) {
	u, err := url.Parse(motoURL)
	if err != nil {
		return nil, fmt.Errorf("parsing moto URL: %w", err)
	}
	p, err := loadPrices()
	if err != nil {
		return nil, err
	}
	f := &front{
		moto:    u,
		faults:  &faults{},
		prices:  p,
		catalog: cat,
		sidecar: sidecar,
		client:  &http.Client{},
		zones:   map[string][]zone{},
		calls:   map[callKey]int{},

		deprecated: newDeprecations(),
		iam:        newIAMState(),
		throttle:   newThrottler(opts.Throttle),
		consist:    newConsistency(opts.Consistency),
		limits:     opts.Limits.withDefaults(),
		arc:        newARCState(),

		eksVersions: &eksVersions{version: map[string]string{}},
	}
	f.spot = newSpotPrices(p)
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			// Let the transport negotiate (and undo) compression so the
			// front can always read moto's answer.
			pr.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: f.fixResponse,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	f.handlers = map[callKey]handler{
		{"pricing", "GetProducts"}:               f.getProducts,
		{"ec2", "DescribeSpotPriceHistory"}:      f.describeSpotPriceHistory,
		{"ssm", "GetParameter"}:                  f.ssmGetParameter,
		{"ssm", "GetParameters"}:                 f.ssmGetParameters,
		{"ssm", "GetParametersByPath"}:           f.ssmGetParametersByPath,
		{"ec2", "DescribeInstanceTypes"}:         f.paged("instanceTypeSet", 5, 100, nil),
		{"ec2", "DescribeInstanceTypeOfferings"}: f.paged("instanceTypeOfferingSet", 5, 1000, nil),
		{"ec2", "DescribeImages"}:                f.paged("imagesSet", 5, 1000, f.overlayImages),
		{"ec2", "EnableImageDeprecation"}:        f.enableImageDeprecation,
		{"ec2", "DisableImageDeprecation"}:       f.disableImageDeprecation,
		{"sts", "DecodeAuthorizationMessage"}:    f.decodeAuthorizationMessage,
		{"ec2", "DescribeLaunchTemplates"}:       f.describeLaunchTemplates,
	}
	f.addEC2Handlers()
	f.addIAMPathHandlers()
	return f, nil
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// One bad request must not take the front down for every test.
		if p := recover(); p != nil {
			log.Printf("awslocal: panic serving %s %s: %v", r.Method, r.URL.Path, p)
			http.Error(w, "awslocal front panic", http.StatusInternalServerError)
		}
	}()
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		f.control(w, r)
		return
	}
	c, err := parseCall(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.count(c)
	ctx := r.Context()
	p, authErr := f.authenticate(r, c)
	if authErr != nil {
		writeError(w, c, authErr.status, authErr.code, authErr.msg)
		return
	}
	c.Principal = p
	fault, after := f.faults.take(ctx, c)
	if fault != nil {
		writeError(w, c, fault.Status, fault.Code, fault.message(c))
		return
	}
	if p != nil {
		if !f.throttle.admit(c) {
			writeThrottled(w, c)
			return
		}
		if !f.authorize(ctx, w, c, p) || f.refuseUnseen(ctx, w, c) {
			return
		}
	}
	if f.checkLimits(ctx, w, c) {
		return
	}
	if after > 0 {
		// Serve into a buffer, then hold the answer back; a caller that
		// gave up (or died) meanwhile never learns what happened.
		held := httptest.NewRecorder()
		defer func() {
			sleep(ctx, after)
			if ctx.Err() != nil {
				return
			}
			for k, v := range held.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(held.Code)
			_, _ = w.Write(held.Body.Bytes())
		}()
		w = held
	}
	if c.Service == arcService {
		f.serveARC(ctx, w, r, c)
		return
	}
	if c.Service == "eks" && f.serveEKS(ctx, w, r, c) {
		return
	}
	if h := f.handlers[callKey{c.Service, c.Action}]; h != nil && h(ctx, w, c) {
		return
	}
	f.forward(w, r, c, c.Body)
}

// forward sends the call to moto with body (possibly rewritten).
func (f *front) forward(w http.ResponseWriter, r *http.Request, c *call, body []byte) {
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, c))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	f.proxy.ServeHTTP(w, r)
}

func (f *front) count(c *call) {
	f.callsMu.Lock()
	f.calls[callKey{c.Service, c.Action}]++
	f.callsMu.Unlock()
}

// Calls is how many requests for service and action reached the front,
// retries included: the way to observe the SDK's retry behaviour.
func (l *Local) Calls(service, action string) int {
	l.front.callsMu.Lock()
	defer l.front.callsMu.Unlock()
	return l.front.calls[callKey{service, action}]
}

// fixResponse turns moto's HTML error pages into errors of the caller's
// protocol. SDK v2 treats an unparsable 500 as transient and retries it to
// exhaustion; AWS itself answers an unsupported filter or action with a 400.
func (f *front) fixResponse(resp *http.Response) error {
	c, _ := resp.Request.Context().Value(ctxKey{}).(*call)
	if c != nil && resp.StatusCode == http.StatusOK {
		f.observe(c, resp)
	}
	if c == nil || resp.StatusCode < 400 || isStructured(resp.Header.Get("Content-Type")) {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	code, msg := "UnsupportedOperation", fmt.Sprintf("The action %s is not supported by the local AWS (moto answered %d).", c.Action, resp.StatusCode)
	if names := filterNames(c); len(names) > 0 && resp.StatusCode >= 500 {
		code = "InvalidParameterValue"
		msg = fmt.Sprintf("The local AWS (moto) cannot apply the filters %s to %s.", strings.Join(names, ", "), c.Action)
	} else if resp.StatusCode < 500 {
		msg = fmt.Sprintf("%s: moto answered %d: %s", c.Action, resp.StatusCode, firstLine(body))
	}
	rec := newRecorder()
	writeError(rec, c, http.StatusBadRequest, code, msg)
	rec.into(resp)
	return nil
}

func isStructured(contentType string) bool {
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "xml") || strings.Contains(ct, "json")
}

func filterNames(c *call) []string {
	var names []string
	for k, v := range c.Form {
		if strings.HasPrefix(k, "Filter.") && strings.HasSuffix(k, ".Name") && len(v) > 0 {
			names = append(names, v[0])
		}
	}
	return names
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// recorder captures a response written by the error writers so it can
// replace the one moto sent.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

func (r *recorder) into(resp *http.Response) {
	resp.StatusCode = r.status
	resp.Status = fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	resp.Header = r.header
	resp.Header.Set("Content-Length", strconv.Itoa(r.body.Len()))
	resp.ContentLength = int64(r.body.Len())
	resp.Body = io.NopCloser(bytes.NewReader(r.body.Bytes()))
}

// motoCall asks moto directly (not through the front, so it is not counted
// or faulted) for a Query-protocol action.
func (f *front) motoCall(ctx context.Context, service, region string, form url.Values) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.moto.String()+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/20260101/%s/%s/aws4_request, SignedHeaders=host, Signature=0", AccessKeyID, region, service))
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling moto %s %s: %w", service, form.Get("Action"), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading moto %s %s: %w", service, form.Get("Action"), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &motoStatusError{action: form.Get("Action"), status: resp.StatusCode, body: firstLine(b)}
	}
	return b, nil
}

// motoStatusError is moto refusing a call the front made on a caller's
// behalf; the caller then gets moto's answer through the normal path.
type motoStatusError struct {
	action string
	status int
	body   string
}

func (e *motoStatusError) Error() string {
	return fmt.Sprintf("moto %s answered %d: %s", e.action, e.status, e.body)
}

// motoJSON is motoCall for the JSON protocols.
func (f *front) motoJSON(ctx context.Context, c *call, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.moto.String()+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ct := "application/x-amz-json-1.1"
	if c.Protocol == protoJSON10 {
		ct = "application/x-amz-json-1.0"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Amz-Target", jsonTargetPrefix[c.Service]+"."+c.Action)
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/20260101/%s/%s/aws4_request, SignedHeaders=host, Signature=0", AccessKeyID, c.Region, c.Service))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("calling moto %s %s: %w", c.Service, c.Action, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

var jsonTargetPrefix = map[string]string{"ssm": "AmazonSSM", "pricing": "AWSPriceListService", "sqs": "AmazonSQS"}
