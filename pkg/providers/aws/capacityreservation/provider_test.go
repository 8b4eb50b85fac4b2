package capacityreservation_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local  *awslocal.Local
	ec2API *ec2.Client
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	ec2API = ec2.NewFromConfig(local.Config(ctx))
	cancel()
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

// add creates a reservation in the local AWS (removed after the test).
func add(t *testing.T, r awslocal.CapacityReservation) string {
	t.Helper()
	if r.InstanceType == "" {
		r.InstanceType = "m5.large"
	}
	if r.AvailabilityZone == "" {
		r.AvailabilityZone = "us-east-1a"
	}
	if r.TotalInstanceCount == 0 {
		r.TotalInstanceCount = 2
	}
	out, err := local.AddCapacityReservation(r)
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(out.ID) })
	return out.ID
}

func ids(rs []ec2types.CapacityReservation) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, aws.ToString(r.CapacityReservationId))
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func TestListSelectorTerms(t *testing.T) {
	ctx := context.Background()
	const other = "210987654321"
	past := time.Now().Add(-time.Hour)
	future := time.Now().Add(48 * time.Hour)
	// Tagged with the test's name so other reservations never match.
	team := map[string]string{"team": "ml", "suite": "terms"}
	mlTargeted := add(t, awslocal.CapacityReservation{Tags: team})
	mlOpen := add(t, awslocal.CapacityReservation{Tags: team, InstanceMatchCriteria: "open"})
	mlOther := add(t, awslocal.CapacityReservation{Tags: team, OwnerID: other, EndDate: &future})
	webOpen := add(t, awslocal.CapacityReservation{Tags: map[string]string{"team": "web", "suite": "terms"}, InstanceMatchCriteria: "open"})
	expired := add(t, awslocal.CapacityReservation{Tags: team, State: awslocal.ReservationStateExpired})
	cancelled := add(t, awslocal.CapacityReservation{Tags: team, State: awslocal.ReservationStateCancelled})
	// EC2 still says active, but its end has passed.
	ended := add(t, awslocal.CapacityReservation{Tags: team, EndDate: &past})

	cases := []struct {
		name  string
		terms []awsv1.CapacityReservationSelectorTerm
		want  []string
	}{
		{"no terms", nil, []string{}},
		{"by id", []awsv1.CapacityReservationSelectorTerm{{ID: mlTargeted}, {ID: webOpen}}, sorted(mlTargeted, webOpen)},
		{"an unknown id is skipped", []awsv1.CapacityReservationSelectorTerm{{ID: mlOpen}, {ID: "cr-00000000000000bad"}}, []string{mlOpen}},
		{"ids of expired, cancelled and ended reservations give nothing", []awsv1.CapacityReservationSelectorTerm{{ID: expired}, {ID: cancelled}, {ID: ended}}, []string{}},
		{"by tags: active and not ended only", []awsv1.CapacityReservationSelectorTerm{{Tags: team}}, sorted(mlTargeted, mlOpen, mlOther)},
		{"by tag key (*)", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"suite": "*", "team": "web"}}}, []string{webOpen}},
		{"by tags and owner", []awsv1.CapacityReservationSelectorTerm{{Tags: team, OwnerID: other}}, []string{mlOther}},
		{"by instance match criteria", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"suite": "terms"}, InstanceMatchCriteria: "open"}}, sorted(mlOpen, webOpen)},
		{"terms are ORed, duplicates dropped", []awsv1.CapacityReservationSelectorTerm{{ID: mlOpen}, {Tags: team, InstanceMatchCriteria: "open"}, {Tags: map[string]string{"team": "web"}}}, sorted(mlOpen, webOpen)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := capacityreservation.NewProvider(ec2API, nil)
			got, err := p.List(ctx, tc.terms...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, ids(got))
			assert.Len(t, got, len(tc.want), "each reservation once")
		})
	}
}

func TestListPagesAndCaches(t *testing.T) {
	ctx := context.Background()
	old := capacityreservation.PageSize
	capacityreservation.PageSize = 2
	t.Cleanup(func() { capacityreservation.PageSize = old })
	tags := map[string]string{"suite": "paging"}
	var want []string
	for range 5 {
		want = append(want, add(t, awslocal.CapacityReservation{Tags: tags}))
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := capacityreservation.NewProvider(ec2API, clk)
	before := local.Calls("ec2", "DescribeCapacityReservations")
	got, err := p.List(ctx, awsv1.CapacityReservationSelectorTerm{Tags: tags})
	require.NoError(t, err)
	assert.Equal(t, sorted(want...), ids(got))
	assert.Equal(t, 3, local.Calls("ec2", "DescribeCapacityReservations")-before, "5 reservations in pages of 2")

	// Within the minute the answer is reused, even for terms in another
	// order; after it EC2 is asked again and sees a new reservation.
	before = local.Calls("ec2", "DescribeCapacityReservations")
	_, err = p.List(ctx, awsv1.CapacityReservationSelectorTerm{Tags: tags})
	require.NoError(t, err)
	assert.Zero(t, local.Calls("ec2", "DescribeCapacityReservations")-before)
	want = append(want, add(t, awslocal.CapacityReservation{Tags: tags}))
	clk.Step(capacityreservation.QueryTTL)
	got, err = p.List(ctx, awsv1.CapacityReservationSelectorTerm{Tags: tags})
	require.NoError(t, err)
	assert.Equal(t, sorted(want...), ids(got))
}

func TestListErrorNamesTheQuery(t *testing.T) {
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeCapacityReservations", Kind: awslocal.FaultThrottle})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeCapacityReservations") })
	p := capacityreservation.NewProvider(ec2API, nil)
	_, err = p.List(context.Background(), awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"suite": "fault"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tag:suite=fault")
}

func TestAvailabilityTracking(t *testing.T) {
	ctx := context.Background()
	id := add(t, awslocal.CapacityReservation{TotalInstanceCount: 3, Tags: map[string]string{"suite": "availability"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := capacityreservation.NewProvider(ec2API, clk)

	_, known := p.Available(id)
	assert.False(t, known, "not described yet")
	p.MarkLaunched(id) // ignored: nothing to count from
	_, err := p.List(ctx, awsv1.CapacityReservationSelectorTerm{ID: id})
	require.NoError(t, err)

	steps := []struct {
		name string
		mark func(string)
		want int
	}{
		{"seeded from EC2", nil, 3},
		{"a launch", p.MarkLaunched, 2},
		{"another launch", p.MarkLaunched, 1},
		{"a termination", p.MarkTerminated, 2},
		{"terminations never exceed the total", func(id string) { p.MarkTerminated(id); p.MarkTerminated(id); p.MarkTerminated(id) }, 3},
		{"interrupted or refused", p.MarkUnavailable, 0},
		{"launches never go below zero", p.MarkLaunched, 0},
		{"a termination after unavailable", p.MarkTerminated, 1},
	}
	for _, s := range steps {
		if s.mark != nil {
			s.mark(id)
		}
		n, ok := p.Available(id)
		require.True(t, ok, s.name)
		require.Equal(t, s.want, n, s.name)
	}

	// A describe after the query cache expires takes EC2's count again.
	p.MarkUnavailable(id)
	clk.Step(capacityreservation.QueryTTL)
	_, err = p.List(ctx, awsv1.CapacityReservationSelectorTerm{ID: id})
	require.NoError(t, err)
	n, _ := p.Available(id)
	assert.Equal(t, 3, n)

	// Without a describe for a day the count is forgotten.
	clk.Step(capacityreservation.AvailabilityTTL)
	_, known = p.Available(id)
	assert.False(t, known)
}

func TestAvailabilityIsConcurrencySafe(t *testing.T) {
	id := add(t, awslocal.CapacityReservation{TotalInstanceCount: 200, Tags: map[string]string{"suite": "concurrent"}})
	p := capacityreservation.NewProvider(ec2API, nil)
	_, err := p.List(context.Background(), awsv1.CapacityReservationSelectorTerm{ID: id})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 150 {
		wg.Add(1)
		go func() { defer wg.Done(); p.MarkLaunched(id) }()
	}
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); p.MarkTerminated(id) }()
	}
	wg.Wait()
	// The 50 terminations may run before launches brought the count below
	// the total (and are then capped), so between 50 and 100 remain.
	n, _ := p.Available(id)
	assert.GreaterOrEqual(t, n, 50)
	assert.LessOrEqual(t, n, 100)
	for range 150 {
		wg.Add(1)
		go func() { defer wg.Done(); p.MarkLaunched(id) }()
	}
	wg.Wait()
	n, _ = p.Available(id)
	assert.Zero(t, n)
}

func TestStatusFromEC2(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	soon, later := now.Add(39*time.Minute), now.Add(41*time.Minute)
	tags := map[string]string{"suite": "status"}
	block := add(t, awslocal.CapacityReservation{Tags: tags, ReservationType: awslocal.ReservationTypeCapacityBlock, EndDate: &soon, InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b"})
	laterBlock := add(t, awslocal.CapacityReservation{Tags: tags, ReservationType: awslocal.ReservationTypeCapacityBlock, EndDate: &later})
	odcr := add(t, awslocal.CapacityReservation{Tags: tags, EndDate: &soon, InstanceMatchCriteria: "open", Interruptible: true, OwnerID: "210987654321"})

	p := capacityreservation.NewProvider(ec2API, nil)
	found, err := p.List(ctx, awsv1.CapacityReservationSelectorTerm{Tags: tags})
	require.NoError(t, err)
	status, err := capacityreservation.Status(now, found)
	require.NoError(t, err)
	byID := map[string]awsv1.CapacityReservation{}
	for _, s := range status {
		byID[s.ID] = s
	}
	require.Len(t, byID, 3)

	b := byID[block]
	assert.Equal(t, awsv1.CapacityReservationTypeCapacityBlock, b.ReservationType)
	assert.Equal(t, awsv1.CapacityReservationStateExpiring, b.State, "within 40 minutes of its end")
	assert.Equal(t, "p5.48xlarge", b.InstanceType)
	assert.Equal(t, "us-east-1b", b.AvailabilityZone)
	assert.Equal(t, "targeted", b.InstanceMatchCriteria)
	assert.Equal(t, "123456789012", b.OwnerID)
	require.NotNil(t, b.EndTime)
	assert.True(t, soon.Equal(b.EndTime.Time))
	assert.False(t, b.Interruptible)

	assert.Equal(t, awsv1.CapacityReservationStateActive, byID[laterBlock].State, "41 minutes from its end")

	o := byID[odcr]
	assert.Equal(t, awsv1.CapacityReservationTypeDefault, o.ReservationType)
	assert.Equal(t, awsv1.CapacityReservationStateActive, o.State, "only capacity blocks expire early")
	assert.Equal(t, "open", o.InstanceMatchCriteria)
	assert.True(t, o.Interruptible)
	assert.Equal(t, "210987654321", o.OwnerID)

	// The status changes next when the later block turns expiring (in a
	// minute), then when the block and the ODCR end.
	assert.Equal(t, later.Add(-capacityreservation.ExpirationWindow), capacityreservation.NextChange(now, found).UTC())
	assert.Equal(t, soon, capacityreservation.NextChange(now.Add(2*time.Minute), found).UTC())
	assert.True(t, capacityreservation.NextChange(now.Add(time.Hour), found).IsZero())
}

func TestStatusSkipsUnsupportedMatchCriteria(t *testing.T) {
	now := time.Now()
	good := ec2types.CapacityReservation{CapacityReservationId: aws.String("cr-1"), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaOpen}
	bad := ec2types.CapacityReservation{CapacityReservationId: aws.String("cr-2"), InstanceMatchCriteria: "exclusive"}
	status, err := capacityreservation.Status(now, []ec2types.CapacityReservation{bad, good})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `cr-2 has an unsupported instance match criteria "exclusive"`)
	require.Len(t, status, 1)
	assert.Equal(t, "cr-1", status[0].ID)
}
