// Package launchtemplate owns the EC2 launch templates Karpenter launches
// from: it resolves an EC2NodeClass and a launch into template options
// (image, the family's user data, block devices, metadata options,
// profile, security groups, monitoring, public IP, tags), names the
// template by the options' hash, finds or creates it through
// DescribeLaunchTemplates/CreateLaunchTemplate and caches it, and deletes
// a class's templates (by tags) when the class goes away.
package launchtemplate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// ClusterTagKey tags every template with the cluster that owns it, so a
// controller finds its own templates and leaves other clusters' alone.
const ClusterTagKey = awsv1.Group + "/cluster"

// DefaultTTL is how long an unused template stays cached (upstream's
// default cache TTL); each use extends it.
const DefaultTTL = time.Minute

// EC2 error codes the provider acts on.
const (
	errNameNotFound  = "InvalidLaunchTemplateName.NotFoundException"
	errIDNotFound    = "InvalidLaunchTemplateId.NotFound"
	errAlreadyExists = "InvalidLaunchTemplateName.AlreadyExistsException"
)

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// LaunchTemplate is a template Karpenter launches from.
type LaunchTemplate struct {
	Name string
	ID   string
	// ImageID is the image the template boots, to map launched
	// instance types back to their template.
	ImageID string
	// SecurityGroupIDs are the groups its instances get.
	SecurityGroupIDs []string
}

// Provider finds or creates launch templates. It is safe for concurrent
// use; concurrent requests for the same template make one set of calls.
type Provider struct {
	ec2         EC2API
	clusterName string
	ttl         time.Duration
	now         func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	lt        LaunchTemplate
	nodeClass string
	expires   time.Time
	// created is when this provider created the template; zero for one
	// it found.
	created time.Time
}

// PropagationDelay is how long after creating a template the provider
// reports it as propagating. EC2 is eventually consistent: a CreateFleet
// naming a template created moments ago can be refused with
// InvalidLaunchTemplateName.NotFoundException, which would cost a failed
// launch and a retry for every NodeClaim of the first round.
const PropagationDelay = 2 * time.Second

// ProviderOptions tune a Provider; zero values are upstream's defaults.
type ProviderOptions struct {
	TTL time.Duration
	Now func() time.Time
}

// NewProvider returns a provider for the templates of clusterName.
func NewProvider(ec2api EC2API, clusterName string, opts ProviderOptions) *Provider {
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{ec2: ec2api, clusterName: clusterName, ttl: opts.TTL, now: opts.Now, cache: map[string]cached{}}
}

// EnsureAll returns a template for each options, in order. The templates
// are ensured concurrently: a launch offering several images or pod
// capacities needs a template for each, and one after the other their
// creation would add up on the launch's path.
func (p *Provider) EnsureAll(ctx context.Context, opts []*Options) ([]LaunchTemplate, error) {
	out := make([]LaunchTemplate, len(opts))
	// Not errgroup.WithContext: a creation may be shared with other
	// launches (singleflight), which one failure here must not cancel.
	var g errgroup.Group
	g.SetLimit(ensureConcurrency)
	for i, o := range opts {
		g.Go(func() error {
			lt, err := p.Ensure(ctx, o)
			if err != nil {
				return err
			}
			// The name pins the options, so these are the template's groups.
			lt.SecurityGroupIDs = o.SecurityGroupIDs
			out[i] = lt
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// listPageSize is DescribeLaunchTemplates' largest MaxResults.
const listPageSize = 200

// ensureConcurrency bounds one launch's template calls in flight.
const ensureConcurrency = 4

// Ensure returns the template for o: from the cache, else the existing one
// of that name, else a new one.
func (p *Provider) Ensure(ctx context.Context, o *Options) (LaunchTemplate, error) {
	name, err := Name(o)
	if err != nil {
		return LaunchTemplate{}, err
	}
	if lt, ok := p.cached(name); ok {
		return lt, nil
	}
	v, err, _ := p.group.Do(name, func() (any, error) {
		if lt, ok := p.cached(name); ok {
			return lt, nil
		}
		lt, created, err := p.findOrCreate(ctx, name, o)
		if err != nil {
			return nil, err
		}
		p.store(name, o.NodeClassName, lt, created)
		return lt, nil
	})
	if err != nil {
		return LaunchTemplate{}, err
	}
	return v.(LaunchTemplate), nil
}

// findOrCreate returns the template of that name, creating it if EC2 has
// none; created is when it did so (zero for a template it found).
func (p *Provider) findOrCreate(ctx context.Context, name string, o *Options) (_ LaunchTemplate, created time.Time, _ error) {
	// The name pins the options, so a template found by name boots o's image.
	if lt, found, err := p.describe(ctx, name); err != nil || found {
		lt.ImageID = o.ImageID
		return lt, time.Time{}, err
	}
	out, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: o.requestData(),
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: o.templateTags()},
		},
	})
	if errorCode(err) == errAlreadyExists {
		// Another replica (or a create whose answer was lost to a retry)
		// made it first; it has the same contents, by its name.
		lt, found, derr := p.describe(ctx, name)
		if derr != nil {
			return LaunchTemplate{}, time.Time{}, derr
		}
		if found {
			lt.ImageID = o.ImageID
			return lt, time.Time{}, nil
		}
	}
	if err != nil {
		return LaunchTemplate{}, time.Time{}, fmt.Errorf("creating launch template %s: %w", name, err)
	}
	id := aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	log.FromContext(ctx).WithValues("id", id).V(1).Info("created launch template")
	return LaunchTemplate{Name: name, ID: id, ImageID: o.ImageID}, p.now(), nil
}

// describe looks a template up by name; found is false when EC2 has none.
func (p *Provider) describe(ctx context.Context, name string) (LaunchTemplate, bool, error) {
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if errorCode(err) == errNameNotFound {
		return LaunchTemplate{}, false, nil
	}
	if err != nil {
		return LaunchTemplate{}, false, fmt.Errorf("describing launch template %s: %w", name, err)
	}
	for _, lt := range out.LaunchTemplates {
		if aws.ToString(lt.LaunchTemplateName) == name {
			return LaunchTemplate{Name: name, ID: aws.ToString(lt.LaunchTemplateId)}, true, nil
		}
	}
	return LaunchTemplate{}, false, nil
}

func (p *Provider) cached(name string) (LaunchTemplate, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.cache[name]
	if !ok || !p.now().Before(c.expires) {
		return LaunchTemplate{}, false
	}
	// Sliding expiry: a template in use stays cached.
	c.expires = p.now().Add(p.ttl)
	p.cache[name] = c
	return c.lt, true
}

func (p *Provider) store(name, nodeClass string, lt LaunchTemplate, created time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cache[name] = cached{lt: lt, nodeClass: nodeClass, expires: p.now().Add(p.ttl), created: created}
}

// Propagating is how much longer the newest of the named templates this
// provider created may be unknown to CreateFleet (see PropagationDelay);
// 0 when none was created that recently.
func (p *Provider) Propagating(names ...string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var wait time.Duration
	for _, n := range names {
		c, ok := p.cache[n]
		if !ok || c.created.IsZero() {
			continue
		}
		wait = max(wait, c.created.Add(PropagationDelay).Sub(p.now()))
	}
	return wait
}

// Invalidate forgets a template, e.g. after CreateFleet answered that it
// no longer exists, so the next Ensure looks it up (and recreates it).
func (p *Provider) Invalidate(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.cache, name)
}

// Hydrate caches the cluster's existing templates, as upstream does on
// taking leadership, so a restart neither re-describes every template nor
// loses track of those it should prune.
func (p *Provider) Hydrate(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("tag-key", ClusterTagKey, "tag-value", p.clusterName)
	lts, err := p.list(ctx, []ec2types.Filter{{Name: aws.String("tag:" + ClusterTagKey), Values: []string{p.clusterName}}})
	if err != nil {
		logger.Error(err, "unable to hydrate the AWS launch template cache")
		return err
	}
	for _, lt := range lts {
		name := aws.ToString(lt.LaunchTemplateName)
		p.mu.Lock()
		if _, ok := p.cache[name]; !ok {
			p.cache[name] = cached{lt: LaunchTemplate{Name: name, ID: aws.ToString(lt.LaunchTemplateId)}, nodeClass: tagValue(lt.Tags, awsv1.NodeClassTagKey), expires: p.now().Add(p.ttl)}
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	count := len(p.cache)
	p.mu.Unlock()
	logger.WithValues("count", count).V(1).Info("hydrated launch template cache")
	return nil
}

// Prune deletes the cached templates nobody ensured within the TTL: an
// unused template is garbage (its options changed, or its class went),
// and a later launch with the same options recreates it.
func (p *Provider) Prune(ctx context.Context) (int, error) {
	p.mu.Lock()
	var expired []cached
	for name, c := range p.cache {
		if !p.now().Before(c.expires) {
			expired = append(expired, c)
			delete(p.cache, name)
		}
	}
	p.mu.Unlock()
	var errs []error
	deleted := 0
	for _, c := range expired {
		if err := p.delete(ctx, c.lt.ID); err != nil {
			log.FromContext(ctx).WithValues("launch-template", c.lt.Name).Error(err, "failed to delete launch template")
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).WithValues("id", c.lt.ID, "name", c.lt.Name).V(1).Info("deleted launch template")
		deleted++
	}
	return deleted, errors.Join(errs...)
}

// DeleteAll deletes every template of nodeClass in this cluster, found by
// their tags (not the cache, which a restart empties).
func (p *Provider) DeleteAll(ctx context.Context, nodeClass *awsv1.EC2NodeClass) error {
	lts, err := p.list(ctx, []ec2types.Filter{
		{Name: aws.String("tag:" + ClusterTagKey), Values: []string{p.clusterName}},
		{Name: aws.String("tag:" + awsv1.NodeClassTagKey), Values: []string{nodeClass.Name}},
	})
	if err != nil {
		return err
	}
	var errs []error
	var names []string
	for _, lt := range lts {
		p.Invalidate(aws.ToString(lt.LaunchTemplateName))
		if err := p.delete(ctx, aws.ToString(lt.LaunchTemplateId)); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, aws.ToString(lt.LaunchTemplateName))
	}
	if len(names) > 0 {
		// Upstream's line names at most five templates and counts the rest.
		shown := strings.Join(names[:min(len(names), 5)], ", ")
		if len(names) > 5 {
			shown += fmt.Sprintf(" and %d other(s)", len(names)-5)
		}
		log.FromContext(ctx).WithValues("launchTemplates", shown).V(1).Info("deleted launch templates")
	}
	// Templates created after the listing belong to launches still
	// running; forget the class's cached ones so they are looked up again.
	p.mu.Lock()
	for name, c := range p.cache {
		if c.nodeClass == nodeClass.Name {
			delete(p.cache, name)
		}
	}
	p.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting launch templates of %s: %w", nodeClass.Name, err)
	}
	return nil
}

func (p *Provider) list(ctx context.Context, filters []ec2types.Filter) ([]ec2types.LaunchTemplate, error) {
	var out []ec2types.LaunchTemplate
	// EC2's largest page: a class's templates (one per image and pod
	// capacity of its NodePools' types) come in one call, and a listing
	// that does not page (the local AWS's moto stops at 15 without a
	// token) still sees them all.
	pager := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{Filters: filters, MaxResults: aws.Int32(listPageSize)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		out = append(out, page.LaunchTemplates...)
	}
	return out, nil
}

// delete removes a template; one already gone is not an error.
func (p *Provider) delete(ctx context.Context, id string) error {
	_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	if code := errorCode(err); code == errIDNotFound || code == errNameNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting launch template %s: %w", id, err)
	}
	return nil
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
