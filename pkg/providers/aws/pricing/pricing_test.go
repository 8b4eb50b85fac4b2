package pricing_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var local *awslocal.Local

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

// priceList reads the shared price list (or the local AWS's copy of it).
func priceList(t *testing.T) map[string]float64 {
	t.Helper()
	var f *os.File
	var err error
	for _, p := range []string{
		"../../../../../shared/reference/aws/on-demand-prices-us-east-1.tsv",
		"../../../../test/awslocal/testdata/on-demand-prices-us-east-1.tsv",
	} {
		if f, err = os.Open(p); err == nil {
			break
		}
	}
	require.NoError(t, err)
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.Len(t, fields, 2, line)
		v, err := strconv.ParseFloat(fields[1], 64)
		require.NoError(t, err)
		out[fields[0]] = v
	}
	return out
}

func newProvider(t *testing.T, region string, opts pricing.Options) *pricing.Provider {
	t.Helper()
	cfg := local.ConfigFor(context.Background(), region)
	opts.Region = region
	return pricing.NewProvider(pricing.NewAPI(cfg), ec2.NewFromConfig(cfg), opts)
}

func TestStaticTableEqualsThePriceList(t *testing.T) {
	assert.Equal(t, priceList(t), pricing.StaticOnDemandPrices())
}

func TestNewProviderStartsFromTheStaticTable(t *testing.T) {
	p := newProvider(t, "us-west-1", pricing.Options{})
	want := priceList(t)
	for it, v := range want {
		got, ok := p.OnDemandPrice(it)
		require.True(t, ok, it)
		require.Equal(t, v, got, it)
		// Before spot prices are fetched spot is priced as on-demand.
		got, ok = p.SpotPrice(it, "us-west-1a")
		require.True(t, ok, it)
		require.Equal(t, v, got, it)
	}
	_, ok := p.OnDemandPrice("x9.imaginary")
	assert.False(t, ok)
	// The static table has no dedicated prices.
	_, ok = p.DedicatedPrice("m5.large")
	assert.False(t, ok)
}

// TestOnDemandPricesFromGetProducts reads every price through the Pricing
// API, across pages, in us-east-1 (where they are the price list's) and in
// us-west-1 (where the local AWS charges a regional premium, so a price
// that stayed static would show).
func TestOnDemandPricesFromGetProducts(t *testing.T) {
	list := priceList(t)
	for _, region := range []string{"us-east-1", "us-west-1"} {
		t.Run(region, func(t *testing.T) {
			p := newProvider(t, region, pricing.Options{})
			before, seq := local.Calls("pricing", "GetProducts"), p.SeqNum()
			require.NoError(t, p.UpdateOnDemandPricing(context.Background()))
			// Over a thousand products at 100 per page.
			assert.Greater(t, local.Calls("pricing", "GetProducts")-before, 10)
			assert.NotEqual(t, seq, p.SeqNum())
			nonMetal := 0
			for it, base := range list {
				want, ok := local.OnDemandPrice(it, region)
				require.True(t, ok, it)
				if region == "us-east-1" {
					require.Equal(t, base, want, it)
				}
				got, ok := p.OnDemandPrice(it)
				// Metal types come from the dedicated bare-metal query, as
				// upstream asks for them; every type must be priced.
				if !strings.Contains(it, ".metal") {
					nonMetal++
				}
				require.True(t, ok, "%s has no on-demand price from GetProducts", it)
				require.Equal(t, want, got, it)
				// Dedicated tenancy has its own products; bare metal is
				// dedicated already.
				wantDedicated, ok := local.DedicatedPrice(it, region)
				if !ok {
					wantDedicated = want
				}
				gotDedicated, ok := p.DedicatedPrice(it)
				require.True(t, ok, "%s has no dedicated price", it)
				require.Equal(t, wantDedicated, gotDedicated, it)
			}
			assert.Greater(t, nonMetal, 1000)
		})
	}
}

func TestSpotPricesFromHistoryPerZone(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, "us-east-1", pricing.Options{})
	before := local.Calls("ec2", "DescribeSpotPriceHistory")
	require.NoError(t, p.UpdateSpotPricing(ctx))
	// Two products per type and zone are several pages of 1000.
	assert.Greater(t, local.Calls("ec2", "DescribeSpotPriceHistory")-before, 2)
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	for _, it := range []string{"m5.large", "c6i.2xlarge", "r7g.xlarge", "t3.micro"} {
		var seen []float64
		for _, z := range zones {
			want, ok := local.SpotPrice("us-east-1", z, it)
			require.True(t, ok)
			got, ok := p.SpotPrice(it, z)
			require.True(t, ok, "%s in %s", it, z)
			require.Equal(t, want, got, "%s in %s", it, z)
			od, _ := p.OnDemandPrice(it)
			require.Less(t, got, od, "%s spot is a fraction of on-demand", it)
			seen = append(seen, got)
		}
		assert.NotEqual(t, seen[0], seen[1], "%s: zones are priced apart", it)
	}
	_, ok := p.SpotPrice("m5.large", "us-east-1z")
	assert.False(t, ok, "no price in a zone without history")

	// A new price shows up on the next refresh, in its zone only.
	other, _ := p.SpotPrice("m5.large", "us-east-1b")
	require.NoError(t, local.SetSpotPrice("us-east-1a", "m5.large", 0.0123))
	t.Cleanup(local.ClearSpotPrices)
	seq := p.SeqNum()
	require.NoError(t, p.UpdateSpotPricing(ctx))
	got, _ := p.SpotPrice("m5.large", "us-east-1a")
	assert.Equal(t, 0.0123, got)
	got, _ = p.SpotPrice("m5.large", "us-east-1b")
	assert.Equal(t, other, got)
	assert.NotEqual(t, seq, p.SeqNum())
}

// TestIsolatedVPCUsesTheStaticTable: with ISOLATED_VPC the Pricing API is
// never called, even in a region whose API prices differ from the table.
func TestIsolatedVPCUsesTheStaticTable(t *testing.T) {
	p := newProvider(t, "us-west-1", pricing.Options{IsolatedVPC: true})
	before := local.Calls("pricing", "GetProducts")
	require.NoError(t, p.Refresh(context.Background()))
	assert.Equal(t, 0, local.Calls("pricing", "GetProducts")-before)
	for it, v := range priceList(t) {
		got, ok := p.OnDemandPrice(it)
		require.True(t, ok, it)
		require.Equal(t, v, got, it)
	}
	// Spot history is an EC2 call, which has a VPC endpoint: still fetched.
	want, _ := local.SpotPrice("us-west-1", "us-west-1a", "m5.large")
	got, ok := p.SpotPrice("m5.large", "us-west-1a")
	require.True(t, ok)
	assert.Equal(t, want, got)

	// Without any Pricing client at all.
	cfg := local.ConfigFor(context.Background(), "us-west-1")
	bare := pricing.NewProvider(nil, ec2.NewFromConfig(cfg), pricing.Options{Region: "us-west-1", IsolatedVPC: true})
	require.NoError(t, bare.UpdateOnDemandPricing(context.Background()))
}

// TestFailedRefreshKeepsTheLastGoodPrices: a Pricing API that fails keeps
// the prices from before.
func TestFailedRefreshKeepsTheLastGoodPrices(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, "us-west-1", pricing.Options{})
	require.NoError(t, p.UpdateOnDemandPricing(ctx))
	good, _ := p.OnDemandPrice("m5.large")
	seq := p.SeqNum()

	_, err := local.AddFault(awslocal.Fault{Service: "pricing", Action: "GetProducts", Kind: awslocal.FaultServerError})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("pricing", "GetProducts") })
	require.Error(t, p.UpdateOnDemandPricing(ctx))
	got, ok := p.OnDemandPrice("m5.large")
	require.True(t, ok)
	assert.Equal(t, good, got)
	assert.Equal(t, seq, p.SeqNum())
}

func TestTickRefreshesEveryTwelveHours(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := newProvider(t, "us-east-1", pricing.Options{Clock: clk})
	calls := func() int {
		return local.Calls("pricing", "GetProducts") + local.Calls("ec2", "DescribeSpotPriceHistory")
	}

	before := calls()
	require.NoError(t, p.Tick(ctx))
	assert.Greater(t, calls(), before, "the first tick refreshes")

	before = calls()
	clk.Step(pricing.RefreshInterval - time.Minute)
	require.NoError(t, p.Tick(ctx))
	assert.Equal(t, before, calls(), "no refresh within the interval")

	clk.Step(time.Minute)
	require.NoError(t, p.Tick(ctx))
	assert.Greater(t, calls(), before, "refreshed once the interval passed")
}

func TestPricingEndpointRegion(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1": "us-east-1", "us-west-2": "us-east-1", "ca-central-1": "us-east-1",
		"ap-northeast-1": "ap-south-1", "eu-west-1": "eu-central-1", "cn-north-1": "cn-northwest-1",
	} {
		assert.Equal(t, want, pricing.Endpoint(region), region)
	}
}

// TestStaticTableServesWhilePricingFails: a provider whose Pricing API
// fails from the start answers from the static table, the failed tick is
// retried after RetryInterval (not after RefreshInterval), and the API's
// prices replace the table once it answers.
func TestStaticTableServesWhilePricingFails(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := newProvider(t, "us-east-1", pricing.Options{Clock: clk})
	static := pricing.StaticOnDemandPrices()["m5.large"]
	require.NotZero(t, static)
	_, err := local.AddFault(awslocal.Fault{Service: "pricing", Action: "GetProducts", Kind: awslocal.FaultServerError})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("pricing", "GetProducts") })

	require.Error(t, p.Tick(ctx))
	got, ok := p.OnDemandPrice("m5.large")
	require.True(t, ok, "the static table serves while Pricing fails")
	assert.Equal(t, static, got)
	seq := p.SeqNum()

	calls := func() int { return local.Calls("pricing", "GetProducts") }
	before := calls()
	clk.Step(pricing.RetryInterval - time.Second)
	require.NoError(t, p.Tick(ctx), "not due yet")
	assert.Equal(t, before, calls())

	local.ClearFaults("pricing", "GetProducts")
	clk.Step(time.Second)
	require.NoError(t, p.Tick(ctx), "retried after RetryInterval")
	assert.Greater(t, calls(), before)
	assert.Greater(t, p.SeqNum(), seq, "the API's prices replaced the table")
	want, ok := local.OnDemandPrice("m5.large", "us-east-1")
	require.True(t, ok)
	got, _ = p.OnDemandPrice("m5.large")
	assert.Equal(t, want, got)
}
