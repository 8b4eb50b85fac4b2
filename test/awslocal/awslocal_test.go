package awslocal_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// fastRetries keeps the SDK's standard retryer (3 attempts, the same
// retryable and throttling codes) but caps its backoff so retried tests
// do not sleep for seconds.
func fastRetries() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond })
}

func ec2Client(t testing.TB) *ec2.Client {
	t.Helper()
	return ec2.NewFromConfig(local.Config(context.Background()), func(o *ec2.Options) { o.Retryer = fastRetries() })
}

func ssmClient(t *testing.T) *ssm.Client {
	t.Helper()
	return ssm.NewFromConfig(local.Config(context.Background()), func(o *ssm.Options) { o.Retryer = fastRetries() })
}

func apiCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	require.Truef(t, errors.As(err, &ae), "want an AWS API error, got %v", err)
	return ae.ErrorCode()
}

func TestDescribeInstanceTypesPagesThroughTheSDKPaginator(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	// Without MaxResults the call goes to moto untouched: its full list.
	all, err := client.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	require.NoError(t, err)
	require.Nil(t, all.NextToken)
	require.Greater(t, len(all.InstanceTypes), 1000)

	pages, seen := 0, map[ec2types.InstanceType]bool{}
	p := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out.InstanceTypes), 100)
		pages++
		for _, it := range out.InstanceTypes {
			require.Falsef(t, seen[it.InstanceType], "%s on two pages", it.InstanceType)
			seen[it.InstanceType] = true
		}
	}
	require.Equal(t, (len(all.InstanceTypes)+99)/100, pages)
	for _, it := range all.InstanceTypes {
		require.Truef(t, seen[it.InstanceType], "%s missing from the pages", it.InstanceType)
	}

	// Out-of-range MaxResults is refused as EC2 does.
	_, err = client.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(1000)})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

func TestOfferingsAndImagesArePaged(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	loc := &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters: []ec2types.Filter{{Name: aws.String("location"), Values: []string{"us-east-1a"}}}}
	whole, err := client.DescribeInstanceTypeOfferings(ctx, loc)
	require.NoError(t, err)
	loc.MaxResults = aws.Int32(300)
	n, pages := 0, 0
	for p := ec2.NewDescribeInstanceTypeOfferingsPaginator(client, loc); p.HasMorePages(); pages++ {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		n += len(out.InstanceTypeOfferings)
	}
	require.Equal(t, len(whole.InstanceTypeOfferings), n)
	require.Greater(t, pages, 1)

	imgs, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}})
	require.NoError(t, err)
	n, pages = 0, 0
	for p := ec2.NewDescribeImagesPaginator(client, &ec2.DescribeImagesInput{Owners: []string{"amazon"}, MaxResults: aws.Int32(250)}); p.HasMorePages(); pages++ {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		n += len(out.Images)
	}
	require.Equal(t, len(imgs.Images), n)
	require.Greater(t, pages, 1)
}

func TestUnsupportedFilterIsAnAWSErrorNotARetryStorm(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	// moto only trips over the filter when it has an instance to test.
	run, err := client.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(img.ID), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{*run.Instances[0].InstanceId}})
	})

	before := local.Calls("ec2", "DescribeInstances")
	_, err = client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-lifecycle"), Values: []string{"spot"}}}})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	require.Contains(t, err.Error(), "instance-lifecycle")
	// A 400 is not retried: the front saw the one attempt.
	require.Equal(t, 1, local.Calls("ec2", "DescribeInstances")-before)
}

func TestThrottlingFaultThenRecovery(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeAvailabilityZones", Kind: awslocal.FaultThrottle})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("", "") })

	before := local.Calls("ec2", "DescribeAvailabilityZones")
	_, err = client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.Equal(t, "RequestLimitExceeded", apiCode(t, err))
	// The SDK retried the throttle to its limit of attempts.
	require.Equal(t, retry.DefaultMaxAttempts, local.Calls("ec2", "DescribeAvailabilityZones")-before)

	require.Equal(t, 1, local.ClearFaults("ec2", "DescribeAvailabilityZones"))
	out, err := client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	require.NotEmpty(t, out.AvailabilityZones)

	// A burst shorter than the SDK's attempts is absorbed by its retries.
	_, err = local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeAvailabilityZones", Kind: awslocal.FaultThrottle, Count: 2})
	require.NoError(t, err)
	before = local.Calls("ec2", "DescribeAvailabilityZones")
	_, err = client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	require.Equal(t, 3, local.Calls("ec2", "DescribeAvailabilityZones")-before)
	require.Empty(t, local.Faults(), "a count-limited fault goes away once spent")
}

func TestFaultsPerProtocol(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { local.ClearFaults("", "") })
	name := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
	cases := []struct {
		fault awslocal.Fault
		call  func() error
		code  string
	}{
		{awslocal.Fault{Service: "ssm", Action: "GetParameter", Kind: awslocal.FaultThrottle},
			func() error {
				_, err := ssmClient(t).GetParameter(ctx, &ssm.GetParameterInput{Name: &name})
				return err
			}, "ThrottlingException"},
		{awslocal.Fault{Service: "ec2", Action: "DescribeSubnets", Kind: awslocal.FaultServerError},
			func() error { _, err := ec2Client(t).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); return err }, "InternalError"},
		{awslocal.Fault{Service: "ec2", Action: "DescribeSubnets", Kind: awslocal.FaultServerError, Status: 503},
			func() error { _, err := ec2Client(t).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); return err }, "ServiceUnavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			local.ClearFaults("", "")
			_, err := local.AddFault(tc.fault)
			require.NoError(t, err)
			before := local.Calls(tc.fault.Service, tc.fault.Action)
			require.Equal(t, tc.code, apiCode(t, tc.call()))
			require.Equal(t, retry.DefaultMaxAttempts, local.Calls(tc.fault.Service, tc.fault.Action)-before, "5xx and throttles are retried")
			local.ClearFaults("", "")
			require.NoError(t, tc.call())
		})
	}

	// Latency delays the call and then serves it.
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeVpcs", Kind: awslocal.FaultLatency, Latency: 300 * time.Millisecond, Count: 1})
	require.NoError(t, err)
	start := time.Now()
	_, err = ec2Client(t).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	_, err = local.AddFault(awslocal.Fault{Kind: "flood"})
	require.Error(t, err)
}

// tsvPrice reads the shared price list independently of the front.
func tsvPrice(t *testing.T, instanceType string) float64 {
	t.Helper()
	f, err := os.Open("testdata/on-demand-prices-us-east-1.tsv")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == instanceType {
			v, err := strconv.ParseFloat(fields[1], 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("%s not in the price list", instanceType)
	return 0
}

func countTSV(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("testdata/on-demand-prices-us-east-1.tsv")
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

type product struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func (p product) usd(t *testing.T) float64 {
	for _, term := range p.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatal("no on-demand price dimension")
	return 0
}

func ec2Filters(region string, extra ...pricingtypes.Filter) []pricingtypes.Filter {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(value)}
	}
	return append([]pricingtypes.Filter{
		term("tenancy", "Shared"), term("productFamily", "Compute Instance"), term("serviceCode", "AmazonEC2"),
		term("preInstalledSw", "NA"), term("operatingSystem", "Linux"), term("capacitystatus", "Used"),
		term("marketoption", "OnDemand"), term("regionCode", region),
	}, extra...)
}

func TestGetProducts(t *testing.T) {
	ctx := context.Background()
	client := pricing.NewFromConfig(local.Config(ctx))
	// Shared and dedicated tenancy are products of their own; dedicated
	// costs DedicatedFactor more.
	for _, tc := range []struct {
		region, tenancy string
		factor          float64
	}{{"us-east-1", "Shared", 1}, {"eu-central-1", "Shared", 1.20}, {"us-east-1", "Dedicated", awslocal.DedicatedFactor}, {"eu-central-1", "Dedicated", 1.20 * awslocal.DedicatedFactor}} {
		t.Run(tc.region+"/"+tc.tenancy, func(t *testing.T) {
			typeFilter := pricingtypes.Filter{Field: aws.String("instanceType"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("m5.large")}
			filters := ec2Filters(tc.region, typeFilter)
			filters[0].Value = aws.String(tc.tenancy)
			out, err := client.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"), Filters: filters})
			require.NoError(t, err)
			require.Len(t, out.PriceList, 1)
			var p product
			require.NoError(t, json.Unmarshal([]byte(out.PriceList[0]), &p))
			require.Equal(t, "m5.large", p.Product.Attributes["instanceType"])
			require.Equal(t, tc.tenancy, p.Product.Attributes["tenancy"])
			require.InDelta(t, tsvPrice(t, "m5.large")*tc.factor, p.usd(t), 1e-5)
		})
	}

	// Without an instance type the list is paged; every Compute Instance
	// type of the price list comes back once.
	n := 0
	for pg := pricing.NewGetProductsPaginator(client, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: ec2Filters("us-east-1")}); pg.HasMorePages(); {
		out, err := pg.NextPage(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out.PriceList), 100)
		n += len(out.PriceList)
	}
	metal := 0
	b, _ := os.ReadFile("testdata/on-demand-prices-us-east-1.tsv")
	metal = strings.Count(string(b), ".metal")
	require.Equal(t, countTSV(t)-metal, n)

	// Windows is not in the list: nothing matches, as AWS answers a filter
	// no product satisfies.
	win := ec2Filters("us-east-1")
	win[4].Value = aws.String("Windows")
	out, err := client.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: win})
	require.NoError(t, err)
	require.Empty(t, out.PriceList)
}

func TestSpotPriceHistoryPerZone(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	zones, err := client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	in := &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(time.Now())}
	out, err := client.DescribeSpotPriceHistory(ctx, in)
	require.NoError(t, err)
	require.Len(t, out.SpotPriceHistory, len(zones.AvailabilityZones))
	od := tsvPrice(t, "m5.large")
	distinct := map[string]bool{}
	for _, h := range out.SpotPriceHistory {
		p, err := strconv.ParseFloat(*h.SpotPrice, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, math.Floor(od*awslocal.SpotFractionMin*1e6)/1e6)
		require.LessOrEqual(t, p, od*awslocal.SpotFractionMax)
		require.Equal(t, "Linux/UNIX", string(h.ProductDescription))
		distinct[*h.SpotPrice] = true
	}
	require.Greater(t, len(distinct), 1, "zones have different spot prices")

	zone := *out.SpotPriceHistory[0].AvailabilityZone
	require.NoError(t, local.SetSpotPrice(zone, "m5.large", 0.0123))
	t.Cleanup(local.ClearSpotPrices)
	in.AvailabilityZone = &zone
	out, err = client.DescribeSpotPriceHistory(ctx, in)
	require.NoError(t, err)
	require.Len(t, out.SpotPriceHistory, 1)
	require.Equal(t, "0.012300", *out.SpotPriceHistory[0].SpotPrice)

	// The whole market is paged through the SDK paginator.
	n := 0
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(client, &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux/UNIX"}}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		n += len(page.SpotPriceHistory)
	}
	require.Equal(t, countTSV(t)*len(zones.AvailabilityZones), n)
}
