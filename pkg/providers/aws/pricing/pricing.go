// Package pricing owns the AWS provider's instance prices: on-demand prices
// from the Pricing API (GetProducts), spot prices per zone from EC2
// DescribeSpotPriceHistory, and a static on-demand table generated into the
// code (zz_generated.pricing.go, by ./gen) that seeds both, stands in while
// the APIs cannot be reached and is the only source in an isolated VPC,
// which has no Pricing API endpoint.
//
// Prices change slowly, so the provider refreshes them every RefreshInterval
// (12 hours) when its caller ticks it, and keeps the last good answer when a
// refresh fails; a failed refresh is retried after RetryInterval, so the
// static table serves only until the APIs answer. Nothing waits for a
// refresh: readers always get the prices held now.
//
//go:generate go run ./gen -in ../../../../../shared/reference/aws/on-demand-prices-us-east-1.tsv -out zz_generated.pricing.go
package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/interval"
)

// RefreshInterval is how often Tick refreshes prices (upstream's pricing
// controller period).
const RefreshInterval = 12 * time.Hour

// RetryInterval is how soon Tick tries again after a refresh failed.
const RetryInterval = 5 * time.Minute

// API is the part of the Pricing client the provider calls.
type API interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// spotProductDescriptions are the Linux spot products; VPC and classic
// instances are priced apart and both count.
var spotProductDescriptions = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// Provider holds the current prices. It is safe for concurrent use.
type Provider struct {
	pricing     API
	ec2         EC2API
	region      string
	isolatedVPC bool
	clock       clock.Clock

	mu       sync.RWMutex
	onDemand map[string]float64
	// dedicated holds the dedicated-tenancy on-demand prices of non-metal
	// types once an on-demand refresh succeeded (the static table has
	// none).
	dedicated map[string]float64
	// spot holds zonal spot prices once a spot refresh succeeded; before
	// that, spot is priced as on-demand from the static table, as upstream
	// does, so spot offerings are usable from the start.
	spot        map[string]map[string]float64 // instance type -> zone -> USD
	spotUpdated bool
	seq         uint64
	// ticks gates Tick; it has its own lock.
	ticks interval.Gate
}

// Options configure NewProvider.
type Options struct {
	// Region whose prices are wanted.
	Region string
	// IsolatedVPC (ISOLATED_VPC) skips the Pricing API: on-demand prices
	// come from the static table only.
	IsolatedVPC bool
	// Clock times Tick's refreshes (the real clock when nil).
	Clock clock.Clock
}

// NewProvider returns a provider seeded with the static table. pricingAPI
// may be nil when opts.IsolatedVPC is set.
func NewProvider(pricingAPI API, ec2API EC2API, opts Options) *Provider {
	p := &Provider{
		pricing:     pricingAPI,
		ec2:         ec2API,
		region:      opts.Region,
		isolatedVPC: opts.IsolatedVPC,
		clock:       opts.Clock,
		onDemand:    StaticOnDemandPrices(),
		spot:        map[string]map[string]float64{},
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	return p
}

// StaticOnDemandPrices is a copy of the generated fallback table. Upstream
// generates one per partition and region; the shared price list has
// us-east-1 only, so every region starts from us-east-1's prices.
func StaticOnDemandPrices() map[string]float64 {
	out := make(map[string]float64, len(staticOnDemandPrices))
	for k, v := range staticOnDemandPrices {
		out[k] = v
	}
	return out
}

// Endpoint is the region of the Pricing API endpoint serving region's
// prices: the API is served from a few regions only.
func Endpoint(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	default:
		return "us-east-1"
	}
}

// NewAPI is a Pricing client for the endpoint serving cfg's region.
func NewAPI(cfg aws.Config) *pricing.Client {
	cfg = cfg.Copy()
	cfg.Region = Endpoint(cfg.Region)
	return pricing.NewFromConfig(cfg)
}

// OnDemandPrice is the on-demand price of an instance type, if known.
func (p *Provider) OnDemandPrice(instanceType string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, ok := p.onDemand[instanceType]
	return v, ok
}

// DedicatedPrice is the on-demand price of a dedicated-tenancy instance of
// the type, if known: the Pricing API's Dedicated product of a non-metal
// type, and a bare-metal type's only price (bare metal is dedicated).
func (p *Provider) DedicatedPrice(instanceType string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if v, ok := p.dedicated[instanceType]; ok {
		return v, true
	}
	if strings.Contains(instanceType, ".metal") {
		v, ok := p.onDemand[instanceType]
		return v, ok
	}
	return 0, false
}

// SpotPrice is the spot price of an instance type in a zone, if known.
// Until spot prices have been fetched it is the on-demand price.
func (p *Provider) SpotPrice(instanceType, zone string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.spotUpdated {
		v, ok := p.onDemand[instanceType]
		return v, ok
	}
	v, ok := p.spot[instanceType][zone]
	return v, ok
}

// SeqNum changes whenever prices change, so callers can cache what they
// derive from them until it moves.
func (p *Provider) SeqNum() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.seq
}

// Tick refreshes prices when RefreshInterval has passed since the last
// refresh (or none ran yet). The caller ticks it from a loop as often as it
// likes; a failed refresh keeps the previous prices (the static table at
// first) and is retried on the first tick RetryInterval later.
func (p *Provider) Tick(ctx context.Context) error {
	if !p.ticks.Due(p.clock.Now(), RefreshInterval) {
		return nil
	}
	err := p.Refresh(ctx)
	if err != nil {
		p.ticks.RetryAt(p.clock.Now().Add(RetryInterval))
	}
	return err
}

// Refresh fetches on-demand and spot prices now.
func (p *Provider) Refresh(ctx context.Context) error {
	return errors.Join(p.UpdateOnDemandPricing(ctx), p.UpdateSpotPricing(ctx))
}

// UpdateOnDemandPricing replaces on-demand prices with the Pricing API's.
// In an isolated VPC it does nothing: the static table stays.
func (p *Provider) UpdateOnDemandPricing(ctx context.Context) error {
	if p.isolatedVPC {
		return nil
	}
	if p.pricing == nil {
		return fmt.Errorf("updating on-demand pricing: no Pricing API client")
	}
	// Bare-metal types are a product family of their own with dedicated
	// tenancy; everything else is a shared-tenancy compute instance.
	shared, err := p.fetchOnDemand(ctx, "Shared", "Compute Instance")
	if err != nil {
		return err
	}
	metal, err := p.fetchOnDemand(ctx, "Dedicated", "Compute Instance (bare metal)")
	if err != nil {
		return err
	}
	for k, v := range metal {
		shared[k] = v
	}
	if len(shared) == 0 {
		return fmt.Errorf("updating on-demand pricing: no on-demand pricing found for %s", p.region)
	}
	// Dedicated-tenancy instances of the other types are priced apart;
	// the karpenter.k8s.aws/instance-tenancy=dedicated offerings use them.
	dedicated, err := p.fetchOnDemand(ctx, "Dedicated", "Compute Instance")
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.dedicated = dedicated
	p.onDemand = shared
	p.seq++
	p.mu.Unlock()
	log.FromContext(ctx).V(1).Info("updated on-demand pricing", "instance-type-count", len(shared))
	return nil
}

func (p *Provider) fetchOnDemand(ctx context.Context, tenancy, family string) (map[string]float64, error) {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(value)}
	}
	in := &pricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"),
		Filters: []pricingtypes.Filter{
			term("regionCode", p.region),
			term("serviceCode", "AmazonEC2"),
			term("preInstalledSw", "NA"),
			term("operatingSystem", "Linux"),
			term("capacitystatus", "Used"),
			term("marketoption", "OnDemand"),
			term("tenancy", tenancy),
			term("productFamily", family),
		},
	}
	out := map[string]float64{}
	for pages := pricing.NewGetProductsPaginator(p.pricing, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting on-demand prices (%s, %s): %w", tenancy, family, err)
		}
		for _, doc := range page.PriceList {
			instanceType, price, err := parseProduct(doc)
			if err != nil {
				return nil, fmt.Errorf("getting on-demand prices (%s, %s): %w", tenancy, family, err)
			}
			// A product without a price (or priced at zero) says nothing
			// useful; it must not make its type free.
			if instanceType != "" && price > 0 {
				out[instanceType] = price
			}
		}
	}
	return out, nil
}

// product is the part of a Pricing API price-list document the provider
// reads.
type product struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func parseProduct(doc string) (string, float64, error) {
	var pr product
	if err := json.Unmarshal([]byte(doc), &pr); err != nil {
		return "", 0, fmt.Errorf("decoding a price-list document: %w", err)
	}
	for _, term := range pr.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, ok := dim.PricePerUnit["USD"]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(usd, 64)
			if err != nil {
				return "", 0, fmt.Errorf("price %q of %s: %w", usd, pr.Product.Attributes.InstanceType, err)
			}
			return pr.Product.Attributes.InstanceType, v, nil
		}
	}
	return pr.Product.Attributes.InstanceType, 0, nil
}

// UpdateSpotPricing replaces spot prices with the latest price per
// instance type and zone from DescribeSpotPriceHistory.
func (p *Provider) UpdateSpotPricing(ctx context.Context) error {
	if p.ec2 == nil {
		return fmt.Errorf("updating spot pricing: no EC2 client")
	}
	seen := map[string]map[string]spotSample{}
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: spotProductDescriptions,
		// Starting now returns just the price in effect for each type.
		StartTime: aws.Time(p.clock.Now()),
	}
	for pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing spot price history: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			if err := addSpot(seen, sp); err != nil {
				return err
			}
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("updating spot pricing: no spot pricing found for %s", p.region)
	}
	spot := make(map[string]map[string]float64, len(seen))
	for it, zones := range seen {
		spot[it] = make(map[string]float64, len(zones))
		for z, l := range zones {
			spot[it][z] = l.price
		}
	}
	p.mu.Lock()
	p.spot = spot
	p.spotUpdated = true
	p.seq++
	p.mu.Unlock()
	log.FromContext(ctx).V(1).Info("updated spot pricing", "instance-type-count", len(spot))
	return nil
}

// spotSample is one zone's newest spot price seen so far.
type spotSample struct {
	price float64
	at    time.Time
}

// addSpot keeps sp if it is the newest price seen for its type and zone.
func addSpot(seen map[string]map[string]spotSample, sp ec2types.SpotPrice) error {
	it, zone := string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)
	if it == "" || zone == "" || sp.SpotPrice == nil {
		return nil
	}
	v, err := strconv.ParseFloat(*sp.SpotPrice, 64)
	if err != nil {
		return fmt.Errorf("spot price %q of %s in %s: %w", *sp.SpotPrice, it, zone, err)
	}
	at := aws.ToTime(sp.Timestamp)
	if seen[it] == nil {
		seen[it] = map[string]spotSample{}
	}
	if old, ok := seen[it][zone]; ok && !old.at.Before(at) {
		return nil
	}
	seen[it][zone] = spotSample{v, at}
	return nil
}
