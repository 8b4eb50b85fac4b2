// Package amifamily resolves an EC2NodeClass's amiSelectorTerms into images
// with the node requirements each serves, as upstream does. An alias
// (family@version) reads the public SSM parameters of the EKS-optimized
// AL2023 and AL2, Bottlerocket and Windows AMIs for the cluster's Kubernetes
// version; other terms become DescribeImages queries (ids batched into one,
// name defaulting owners to self and amazon, tags with "*" as any value,
// ssmParameter read from SSM). Per requirement set the newest
// non-deprecated image wins; the result is newest first.
//
// User data and launch-template defaults per family live elsewhere; this
// package only answers "which images".
package amifamily

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// SSMAPI is the part of the SSM client the provider calls.
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Cache lifetimes, upstream's defaults.
const (
	DefaultSSMTTL       = 24 * time.Hour
	DefaultCustomSSMTTL = 5 * time.Minute
	DefaultImageTTL     = time.Minute // AMI_REFRESH_INTERVAL
)

// PageSize is the MaxResults DescribeImages is asked for (EC2: 5..1000).
var PageSize int32 = 1000

// Options configure a Provider.
type Options struct {
	// KubernetesVersion returns the cluster's minor version ("1.34"),
	// which alias parameters are published per.
	KubernetesVersion func(context.Context) (string, error)
	// SSMTTL caches alias parameters; CustomSSMTTL ssmParameter terms;
	// ImageTTL DescribeImages answers. Zero means the default.
	SSMTTL, CustomSSMTTL, ImageTTL time.Duration
	// Now is the clock deprecation is judged by (time.Now when nil).
	Now func() time.Time
}

// AMI is one resolved image and the requirements an instance type must
// meet to run it.
type AMI struct {
	ID           string
	Name         string
	CreationDate time.Time
	Deprecated   bool
	Requirements []corev1.NodeSelectorRequirement
}

// Provider resolves AMIs. It is safe for concurrent use.
type Provider struct {
	ec2    EC2API
	ssm    SSMAPI
	opts   Options
	params *ttl.Cache[string]
	images *ttl.Cache[[]ec2types.Image]

	// latest are the cached alias parameters that move to each new
	// release, which InvalidateDeprecated checks.
	latestMu sync.Mutex
	latest   map[string]struct{}
}

// NewProvider returns a provider over the EC2 and SSM clients.
func NewProvider(ec2api EC2API, ssmapi SSMAPI, opts Options) *Provider {
	if opts.SSMTTL == 0 {
		opts.SSMTTL = DefaultSSMTTL
	}
	if opts.CustomSSMTTL == 0 {
		opts.CustomSSMTTL = DefaultCustomSSMTTL
	}
	if opts.ImageTTL == 0 {
		opts.ImageTTL = DefaultImageTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{ec2: ec2api, ssm: ssmapi, opts: opts, params: ttl.New[string](opts.Now), images: ttl.New[[]ec2types.Image](opts.Now), latest: map[string]struct{}{}}
}

// NotFoundError says an alias found no published image for this
// Kubernetes version (no SSM parameter exists for any of its variants).
type NotFoundError struct {
	Alias, KubernetesVersion string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("failed to discover any AMIs for alias %q (kubernetes %s)", e.Alias, e.KubernetesVersion)
}

// query is one DescribeImages call and what SSM told us about its images.
type query struct {
	filters []ec2types.Filter
	owners  []string
	// known maps image ids to requirement sets learnt from SSM (GPU or
	// Neuron variants, Windows build); each set becomes one AMI entry.
	known map[string][][]corev1.NodeSelectorRequirement
}

// List returns the AMIs nodeClass selects, newest first.
func (p *Provider) List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]AMI, error) {
	queries, err := p.queries(ctx, nodeClass)
	if err != nil {
		return nil, err
	}
	now := p.opts.Now()
	best := map[string]AMI{}
	for _, q := range queries {
		images, err := p.describe(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, img := range images {
			arch, ok := kubeArch(img.Architecture)
			if !ok {
				continue
			}
			for _, reqs := range q.requirements(aws.ToString(img.ImageId), arch) {
				candidate := AMI{
					ID:           aws.ToString(img.ImageId),
					Name:         aws.ToString(img.Name),
					CreationDate: parseTime(aws.ToString(img.CreationDate)),
					Deprecated:   isDeprecated(aws.ToString(img.DeprecationTime), now),
					Requirements: reqs,
				}
				key := requirementsKey(reqs)
				if existing, ok := best[key]; !ok || better(candidate, existing) {
					best[key] = candidate
				}
			}
		}
	}
	out := make([]AMI, 0, len(best))
	for _, ami := range best {
		out = append(out, ami)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationDate.Equal(out[j].CreationDate) {
			return out[i].CreationDate.After(out[j].CreationDate)
		}
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return requirementsKey(out[i].Requirements) < requirementsKey(out[j].Requirements)
	})
	return out, nil
}

// better says whether candidate should replace existing for one requirement
// set: a non-deprecated image beats a deprecated one, then the newer wins,
// and at equal dates the greater name (upstream's tie-break).
func better(candidate, existing AMI) bool {
	if candidate.Deprecated != existing.Deprecated {
		return !candidate.Deprecated
	}
	if !candidate.CreationDate.Equal(existing.CreationDate) {
		return candidate.CreationDate.After(existing.CreationDate)
	}
	return candidate.Name > existing.Name
}

func (p *Provider) queries(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]query, error) {
	if alias := nodeClass.Alias(); alias != "" {
		return p.aliasQuery(ctx, alias)
	}
	var queries []query
	var ids []string
	for _, term := range nodeClass.Spec.AMISelectorTerms {
		switch {
		case term.ID != "":
			ids = append(ids, term.ID)
		case term.SSMParameter != "":
			id, found, err := p.parameter(ctx, term.SSMParameter, p.opts.CustomSSMTTL)
			if err != nil {
				return nil, err
			}
			if found {
				ids = append(ids, id)
			}
		default:
			q := query{}
			if term.Owner != "" {
				q.owners = splitOwners(term.Owner)
			}
			if term.Name != "" {
				// Without an owner a name could match anyone's public
				// image; upstream limits it to self and amazon.
				if len(q.owners) == 0 {
					q.owners = []string{"self", "amazon"}
				}
				q.filters = append(q.filters, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
			}
			q.filters = append(q.filters, subnet.TagFilters(term.Tags)...)
			queries = append(queries, q)
		}
	}
	if len(ids) > 0 {
		queries = append(queries, query{filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}})
	}
	return queries, nil
}

func (p *Provider) aliasQuery(ctx context.Context, alias string) ([]query, error) {
	if p.opts.KubernetesVersion == nil {
		return nil, errors.New("resolving an AMI alias needs the Kubernetes version, none configured")
	}
	version, err := p.opts.KubernetesVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting kubernetes version: %w", err)
	}
	params, err := aliasQueries(alias, version)
	if err != nil {
		return nil, err
	}
	known := map[string][][]corev1.NodeSelectorRequirement{}
	for _, param := range params {
		// Upstream caches "latest" and pinned parameters alike for 24h; a
		// new release shows once the entry expires (or is invalidated).
		id, found, err := p.parameter(ctx, param.path, p.opts.SSMTTL)
		if err != nil {
			return nil, err
		}
		if param.mutable {
			p.latestMu.Lock()
			p.latest[param.path] = struct{}{}
			p.latestMu.Unlock()
		}
		if found {
			known[id] = append(known[id], param.extra...)
		}
	}
	if len(known) == 0 {
		return nil, &NotFoundError{Alias: alias, KubernetesVersion: version}
	}
	ids := make([]string, 0, len(known))
	for id := range known {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return []query{{filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}, known: known}}, nil
}

// parameter reads an SSM parameter through the cache; found is false when
// the parameter does not exist (an unpublished variant), which is not an
// error.
func (p *Provider) parameter(ctx context.Context, name string, d time.Duration) (string, bool, error) {
	if v, ok := p.params.Get(name); ok {
		return v, v != "", nil
	}
	out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		var nf *ssmtypes.ParameterNotFound
		if errors.As(err, &nf) {
			// Remember the absence too, so every variant an alias
			// probes is one call per TTL rather than per reconcile.
			p.params.Set(name, "", d)
			return "", false, nil
		}
		return "", false, fmt.Errorf("getting ssm parameter %q: %w", name, err)
	}
	v := aws.ToString(out.Parameter.Value)
	p.params.Set(name, v, d)
	return v, v != "", nil
}

// InvalidateDeprecated forgets the cached "latest" alias parameters whose
// image is now deprecated, so the next resolution reads SSM again and finds
// the release that replaced it instead of waiting out the 24 h cache (as
// upstream's SSM invalidation controller). Pinned versions and ssmParameter
// terms are left alone: the first never move, the second expire in minutes.
// It returns the parameters forgotten.
func (p *Provider) InvalidateDeprecated(ctx context.Context) ([]string, error) {
	byImage := map[string][]string{}
	p.latestMu.Lock()
	for name := range p.latest {
		id, ok := p.params.Get(name)
		if !ok {
			delete(p.latest, name) // expired: the next read is fresh anyway
			continue
		}
		if id != "" {
			byImage[id] = append(byImage[id], name)
		}
	}
	p.latestMu.Unlock()
	if len(byImage) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(byImage))
	for id := range byImage {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// EC2 refuses MaxResults together with ImageIds; the ids are a handful.
	out, err := p.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids, IncludeDeprecated: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("describing the images of cached ssm parameters: %w", err)
	}
	now := p.opts.Now()
	var forgotten []string
	for _, img := range out.Images {
		if !isDeprecated(aws.ToString(img.DeprecationTime), now) {
			continue
		}
		for _, name := range byImage[aws.ToString(img.ImageId)] {
			p.params.Delete(name)
			forgotten = append(forgotten, name)
		}
	}
	sort.Strings(forgotten)
	return forgotten, nil
}

func (p *Provider) describe(ctx context.Context, q query) ([]ec2types.Image, error) {
	key := q.key()
	if images, ok := p.images.Get(key); ok {
		return images, nil
	}
	in := &ec2.DescribeImagesInput{IncludeDeprecated: aws.Bool(true), MaxResults: aws.Int32(PageSize), Owners: q.owners}
	if len(q.filters) > 0 {
		in.Filters = q.filters
	}
	var images []ec2types.Image
	pages := ec2.NewDescribeImagesPaginator(p.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing images %s: %w", key, err)
		}
		images = append(images, page.Images...)
	}
	p.images.Set(key, images, p.opts.ImageTTL)
	return images, nil
}

func (q query) key() string {
	var parts []string
	for _, f := range q.filters {
		vals := append([]string(nil), f.Values...)
		sort.Strings(vals)
		parts = append(parts, aws.ToString(f.Name)+"="+strings.Join(vals, ","))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "] owners=" + strings.Join(q.owners, ",")
}

// requirements are the requirement sets one image serves: each known set
// (or none) plus its architecture.
func (q query) requirements(id, arch string) [][]corev1.NodeSelectorRequirement {
	archReq := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}
	known := q.known[id]
	if len(known) == 0 {
		return [][]corev1.NodeSelectorRequirement{{archReq}}
	}
	out := make([][]corev1.NodeSelectorRequirement, 0, len(known))
	for _, set := range known {
		reqs := append([]corev1.NodeSelectorRequirement{archReq}, set...)
		out = append(out, SortRequirements(reqs))
	}
	return out
}

// SortRequirements orders requirements as upstream's status does: shorter
// keys first, then by key.
func SortRequirements(reqs []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	out := append([]corev1.NodeSelectorRequirement(nil), reqs...)
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Key) != len(out[j].Key) {
			return len(out[i].Key) < len(out[j].Key)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func requirementsKey(reqs []corev1.NodeSelectorRequirement) string {
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		vals := append([]string(nil), r.Values...)
		sort.Strings(vals)
		parts = append(parts, r.Key+" "+string(r.Operator)+" "+strings.Join(vals, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

func kubeArch(a ec2types.ArchitectureValues) (string, bool) {
	switch a {
	case ec2types.ArchitectureValuesX8664:
		return "amd64", true
	case ec2types.ArchitectureValuesArm64:
		return "arm64", true
	}
	return "", false
}

func splitOwners(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// parseTime reads EC2's RFC 3339 dates; a missing or bad date sorts oldest.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func isDeprecated(deprecation string, now time.Time) bool {
	if deprecation == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339, deprecation)
	return err == nil && !t.After(now)
}

// Status converts AMIs to EC2NodeClass status entries.
func Status(amis []AMI) []awsv1.AMI {
	out := make([]awsv1.AMI, 0, len(amis))
	for _, a := range amis {
		out = append(out, awsv1.AMI{ID: a.ID, Name: a.Name, Deprecated: a.Deprecated, Requirements: SortRequirements(a.Requirements)})
	}
	return out
}
