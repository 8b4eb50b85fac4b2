package interruption_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
	recv "github.com/karpenter-go/karpenter/pkg/providers/aws/interruption"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// reservations remembers the reservations marked unavailable.
type reservations struct {
	mu  sync.Mutex
	ids []string
}

func (r *reservations) MarkUnavailable(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *reservations) marked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// harness is one controller polling its own queue.
type harness struct {
	name, url    string
	rec          *recorder
	unavailable  *cloudprovider.UnavailableOfferings
	reservations *reservations
	ctrl         *interruption.Controller
}

// start runs a controller on a fresh queue until the test ends.
func start(t *testing.T, mutate func(*interruption.Options)) *harness {
	t.Helper()
	h := &harness{rec: newRecorder(), unavailable: cloudprovider.NewUnavailableOfferings(nil, 0), reservations: &reservations{}}
	h.name, h.url = createQueue(t)
	opts := interruption.Options{Unavailable: h.unavailable, Reservations: h.reservations, Recorder: h.rec,
		Receiver: recv.Options{Workers: 2, MinBackoff: 10 * time.Millisecond}}
	if mutate != nil {
		mutate(&opts)
	}
	h.ctrl = interruption.NewController(cp.Client, sqsClient, h.name, opts)
	require.Equal(t, "interruption", h.ctrl.Name())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop")
		}
	})
	return h
}

func (h *harness) send(t *testing.T, in awslocal.Interruption) {
	t.Helper()
	in.QueueURL = h.url
	_, err := local.SendInterruption(context.Background(), in)
	require.NoError(t, err)
}

func (h *harness) drained(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return queueEmpty(t, h.url) }, 30*time.Second, 100*time.Millisecond, "queue never drained")
}

func TestInterruptionActions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		in           awslocal.Interruption
		capacityType string
		kind         string
		deleted      bool
		reasons      []string
		spotMarked   bool
		reservation  string
	}{
		{name: "spot interruption", in: awslocal.Interruption{Kind: awslocal.InterruptionSpot}, capacityType: v1.CapacityTypeSpot,
			kind: "spot_interrupted", deleted: true, reasons: []string{"SpotInterrupted", "TerminatingOnInterruption"}, spotMarked: true},
		{name: "rebalance recommendation", in: awslocal.Interruption{Kind: awslocal.InterruptionRebalance}, capacityType: v1.CapacityTypeSpot,
			kind: "rebalance_recommendation", reasons: []string{"SpotRebalanceRecommendation"}},
		{name: "stopping", in: awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "stopping"}, capacityType: v1.CapacityTypeOnDemand,
			kind: "instance_stopped", deleted: true, reasons: []string{"InstanceStopping", "TerminatingOnInterruption"}},
		{name: "stopped", in: awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "stopped"}, capacityType: v1.CapacityTypeOnDemand,
			kind: "instance_stopped", deleted: true, reasons: []string{"InstanceStopping", "TerminatingOnInterruption"}},
		{name: "shutting down", in: awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "shutting-down"}, capacityType: v1.CapacityTypeOnDemand,
			kind: "instance_terminated", deleted: true, reasons: []string{"InstanceTerminating", "TerminatingOnInterruption"}},
		{name: "terminated", in: awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "terminated"}, capacityType: v1.CapacityTypeOnDemand,
			kind: "instance_terminated", deleted: true, reasons: []string{"InstanceTerminating", "TerminatingOnInterruption"}},
		{name: "scheduled change", in: awslocal.Interruption{Kind: awslocal.InterruptionScheduledChange}, capacityType: v1.CapacityTypeOnDemand,
			kind: "scheduled_change", deleted: true, reasons: []string{"InstanceUnhealthy", "TerminatingOnInterruption"}},
		{name: "reservation interruption", in: awslocal.Interruption{Kind: awslocal.InterruptionCapacityReservation, CapacityReservationID: "cr-0123456789abcdef0"},
			capacityType: v1.CapacityTypeReserved, kind: "capacity_reservation_interrupted", deleted: true,
			reasons: []string{"CapacityReservationInstanceInterrupted", "TerminatingOnInterruption"}, reservation: "cr-0123456789abcdef0"},
		{name: "reservation from the nodeclaim's label", in: awslocal.Interruption{Kind: awslocal.InterruptionCapacityReservation},
			capacityType: v1.CapacityTypeReserved, kind: "capacity_reservation_interrupted", deleted: true,
			reasons: []string{"CapacityReservationInstanceInterrupted", "TerminatingOnInterruption"}, reservation: "cr-0fedcba9876543210"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil)
			id, zone := launch(t, "m5.large")
			c := newClaim(t, id, zone, "m5.large", tc.capacityType)
			if tc.capacityType == v1.CapacityTypeReserved {
				stored := get(t, c.nc)
				stored.Labels[awsv1.LabelCapacityReservationID] = "cr-0fedcba9876543210"
				require.NoError(t, cp.Client.Update(context.Background(), stored))
			}
			pool := c.nc.Labels[v1.NodePoolLabelKey]
			disrupted := metrics.NodeClaimsDisruptedTotal.WithLabelValues(tc.kind, pool, tc.capacityType, "", "graceful")
			actions := metrics.InterruptionActionsPerformedTotal.WithLabelValues(tc.kind, interruption.ActionCordonAndDrain)
			notify := metrics.InterruptionActionsPerformedTotal.WithLabelValues(tc.kind, interruption.ActionNotify)
			deleted := metrics.InterruptionDeletedMessagesTotal.WithLabelValues(tc.kind)
			before, beforeActions, beforeNotify, beforeDeleted := counter(t, disrupted), counter(t, actions), counter(t, notify), counter(t, deleted)

			tc.in.InstanceID = id
			h.send(t, tc.in)
			h.drained(t)
			require.Eventually(t, func() bool { return counter(t, deleted) == beforeDeleted+1 }, 5*time.Second, 50*time.Millisecond)

			assert.Equal(t, tc.deleted, deleting(t, c.nc), "nodeclaim deleted")
			assert.Equal(t, tc.reasons, h.rec.reasons(c.nc.Name), "nodeclaim events")
			assert.Equal(t, tc.reasons, h.rec.reasons(c.node.Name), "node events")
			spot := cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: zone, CapacityType: v1.CapacityTypeSpot}
			assert.Equal(t, tc.spotMarked, h.unavailable.IsUnavailable(spot), "spot offering unavailable")
			if tc.reservation != "" {
				assert.Equal(t, []string{tc.reservation}, h.reservations.marked())
			} else {
				assert.Empty(t, h.reservations.marked())
			}
			if tc.deleted {
				assert.Equal(t, before+1, counter(t, disrupted), "karpenter_nodeclaims_disrupted_total")
				assert.Equal(t, beforeActions+1, counter(t, actions))
			} else {
				assert.Equal(t, beforeNotify+1, counter(t, notify))
			}
		})
	}
}

// With ReplaceOnRebalance a rebalance recommendation marks the NodeClaim
// for replacement (the provider then reports it drifted) instead of
// deleting it; a second recommendation keeps the first time.
func TestRebalanceReplaceFirst(t *testing.T) {
	h := start(t, func(o *interruption.Options) { o.ReplaceOnRebalance = true })
	id, zone := launch(t, "m5.large")
	c := newClaim(t, id, zone, "m5.large", v1.CapacityTypeSpot)
	replace := metrics.InterruptionActionsPerformedTotal.WithLabelValues("rebalance_recommendation", interruption.ActionReplace)
	before := counter(t, replace)

	h.send(t, awslocal.Interruption{Kind: awslocal.InterruptionRebalance, InstanceID: id})
	h.drained(t)
	require.Eventually(t, func() bool { return counter(t, replace) == before+1 }, 5*time.Second, 50*time.Millisecond)
	got := get(t, c.nc)
	marked := got.Annotations[awsv1.AnnotationRebalanceRecommendation]
	require.NotEmpty(t, marked, "annotated for replacement")
	_, err := time.Parse(time.RFC3339, marked)
	require.NoError(t, err)
	assert.False(t, deleting(t, c.nc), "replaced by the disruption queue, not deleted here")
	assert.Equal(t, []string{"SpotRebalanceRecommendation"}, h.rec.reasons(c.nc.Name))

	h.send(t, awslocal.Interruption{Kind: awslocal.InterruptionRebalance, InstanceID: id})
	h.drained(t)
	assert.Equal(t, marked, get(t, c.nc).Annotations[awsv1.AnnotationRebalanceRecommendation], "the first recommendation's time is kept")
	assert.Equal(t, before+1, counter(t, replace))
}

// A scheduled change for several instances drains each of Karpenter's and
// ignores the one it does not manage.
func TestScheduledChangeForSeveralInstances(t *testing.T) {
	h := start(t, nil)
	a, zone := launch(t, "m5.large")
	b, _ := launch(t, "m5.large")
	ca, cb := newClaim(t, a, zone, "m5.large", v1.CapacityTypeOnDemand), newClaim(t, b, zone, "m5.large", v1.CapacityTypeOnDemand)
	body, err := local.InterruptionBody(context.Background(), awslocal.Interruption{QueueURL: h.url, Kind: awslocal.InterruptionScheduledChange, InstanceID: a})
	require.NoError(t, err)
	body = strings.Replace(body, `"affectedEntities":[{"entityValue":"`+a+`"}]`,
		`"affectedEntities":[{"entityValue":"`+a+`"},{"entityValue":"`+b+`"},{"entityValue":"i-0000000000000000f"}]`, 1)
	unmanaged := metrics.InterruptionActionsPerformedTotal.WithLabelValues("scheduled_change", interruption.ActionUnmanaged)
	before := counter(t, unmanaged)
	sendRaw(t, h.url, body)
	h.drained(t)
	require.Eventually(t, func() bool { return deleting(t, ca.nc) && deleting(t, cb.nc) }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return counter(t, unmanaged) == before+1 }, 5*time.Second, 50*time.Millisecond)
}

// Bad input never blocks the queue: malformed bodies, unknown events,
// missing instance IDs, foreign instances, NodeClaims already deleting and
// Nodes already gone are all deleted from the queue and counted, and the
// real interruptions among them still act.
func TestBadInputDrainsTheQueue(t *testing.T) {
	h := start(t, func(o *interruption.Options) { o.Receiver.Workers = 4 })
	ctx := context.Background()

	var real []claim
	var bodies []string
	for range 3 {
		id, zone := launch(t, "c5.large")
		c := newClaim(t, id, zone, "c5.large", v1.CapacityTypeSpot)
		real = append(real, c)
		body, err := local.InterruptionBody(ctx, awslocal.Interruption{QueueURL: h.url, Kind: awslocal.InterruptionSpot, InstanceID: id})
		require.NoError(t, err)
		bodies = append(bodies, body)
	}
	// A NodeClaim already being deleted, whose Node is already gone.
	goneID, zone := launch(t, "c5.large")
	gone := newClaim(t, goneID, zone, "c5.large", v1.CapacityTypeOnDemand)
	require.NoError(t, cp.Client.Delete(ctx, gone.node))
	require.NoError(t, cp.Client.Delete(ctx, gone.nc))
	goneBody, err := local.InterruptionBody(ctx, awslocal.Interruption{QueueURL: h.url, Kind: awslocal.InterruptionStateChange, State: "terminated", InstanceID: goneID})
	require.NoError(t, err)
	bodies = append(bodies, goneBody)

	foreign, err := local.InterruptionBody(ctx, awslocal.Interruption{QueueURL: h.url, Kind: awslocal.InterruptionSpot, InstanceID: "i-0aaaaaaaaaaaaaaaa"})
	require.NoError(t, err)
	missingID := strings.Replace(bodies[0], real[0].nc.Status.ProviderID[strings.LastIndex(real[0].nc.Status.ProviderID, "/")+1:], "", -1)
	bad := []string{
		"", "not json", `{"version":"0"`, `[]`, `null`, `{"detail-type":7}`,
		`{"version":"0","id":"x","detail-type":"Meteor Strike","source":"aws.ec2","account":"1","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{}}`,
		missingID,
		strings.Replace(bodies[0], `"instance-id":"`, `"instance-id":"not-an-id`, 1),
		strings.Repeat("{", 10000),
	}
	for range 20 {
		bodies = append(bodies, foreign)
	}
	bodies = append(bodies, bad...)

	parseErrors := metrics.InterruptionReceivedMessagesTotal.WithLabelValues(recv.ParseErrorMessageType)
	unmanaged := metrics.InterruptionActionsPerformedTotal.WithLabelValues("spot_interrupted", interruption.ActionUnmanaged)
	alreadyDeleting := metrics.InterruptionActionsPerformedTotal.WithLabelValues("instance_terminated", interruption.ActionAlreadyDeleting)
	beforeParse, beforeUnmanaged, beforeDeleting := counter(t, parseErrors), counter(t, unmanaged), counter(t, alreadyDeleting)

	sendRaw(t, h.url, bodies...)
	h.drained(t)
	for _, c := range real {
		assert.True(t, deleting(t, c.nc), "real interruption of %s acted", c.nc.Name)
	}
	require.Eventually(t, func() bool {
		return counter(t, unmanaged) == beforeUnmanaged+20 && counter(t, alreadyDeleting) == beforeDeleting+1
	}, 5*time.Second, 50*time.Millisecond, "unmanaged %v, already deleting %v", counter(t, unmanaged)-beforeUnmanaged, counter(t, alreadyDeleting)-beforeDeleting)
	// Every bad body but the unknown detail-type (a well-formed no_op) is a
	// parse error.
	assert.Equal(t, beforeParse+float64(len(bad)-1), counter(t, parseErrors))
	// No event on a NodeClaim that was already deleting but for its own
	// kind's warning, and no second termination.
	assert.Equal(t, []string{"InstanceTerminating"}, h.rec.reasons(gone.nc.Name))
}

// With learning on, repeated spot interruptions of one offering raise its
// learned rate and lengthen its hold.
func TestLearnerLearnsFromSpotInterruptions(t *testing.T) {
	var learner *interruption.Learner
	h := start(t, func(o *interruption.Options) {
		learner = interruption.NewLearner(o.Unavailable, interruption.LearnerOptions{})
		o.Learner = learner
	})
	key := cloudprovider.OfferingKey{InstanceType: "r5.large", CapacityType: v1.CapacityTypeSpot}
	for range 2 {
		id, zone := launch(t, "r5.large")
		key.Zone = zone
		c := newClaim(t, id, zone, "r5.large", v1.CapacityTypeSpot)
		h.send(t, awslocal.Interruption{Kind: awslocal.InterruptionSpot, InstanceID: id})
		require.Eventually(t, func() bool { return deleting(t, c.nc) }, 30*time.Second, 50*time.Millisecond)
	}
	score, until := learner.Score(key)
	assert.InDelta(t, 2, score, 0.01)
	assert.WithinDuration(t, time.Now().Add(6*time.Minute), until, 30*time.Second, "second interruption doubles the 3m hold")
	assert.True(t, h.unavailable.IsUnavailable(key))
	rate := gauge(t, metrics.InterruptionOfferingInterruptionsPerHour.WithLabelValues(key.InstanceType, key.Zone, key.CapacityType))
	assert.InDelta(t, 2*0.6931/6, rate, 0.01)
}

// Registered on a manager, the controller reads NodeClaims through the
// manager's cache and its instance-ID index, and the status check runs on
// its interval beside it.
func TestRegisterWithManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := manager.New(cp.Config, manager.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	name, url := createQueue(t)
	unavailable := cloudprovider.NewUnavailableOfferings(nil, 0)
	rec := newRecorder()
	ctrl := interruption.NewController(mgr.GetClient(), sqsClient, name, interruption.Options{Unavailable: unavailable, Recorder: rec,
		Learner: interruption.NewLearner(unavailable, interruption.LearnerOptions{})})
	require.NoError(t, ctrl.Register(ctx, mgr))
	// The status check's clock is past the impairment toleration, so the
	// instance impaired below counts as impaired for long enough.
	status := interruption.NewStatusController(mgr.GetClient(), ec2Client, interruption.StatusOptions{Interval: 200 * time.Millisecond, Recorder: rec,
		Clock: clocktesting.NewFakeClock(time.Now().Add(interruption.ImpairmentToleration + time.Minute))})
	require.NoError(t, status.Register(ctx, mgr))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	spotID, zone := launch(t, "m5.large")
	spot := newClaim(t, spotID, zone, "m5.large", v1.CapacityTypeSpot)
	impairedID, _ := launch(t, "m5.large")
	impaired := newClaim(t, impairedID, zone, "m5.large", v1.CapacityTypeOnDemand)
	t.Cleanup(func() { local.ClearInstanceStatus(impairedID) })
	require.NoError(t, local.SetInstanceStatus(impairedID, awslocal.StatusImpaired, ""))
	_, err = local.SendInterruption(ctx, awslocal.Interruption{QueueURL: url, Kind: awslocal.InterruptionSpot, InstanceID: spotID})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return deleting(t, spot.nc) && deleting(t, impaired.nc) }, 30*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return queueEmpty(t, url) }, 30*time.Second, 100*time.Millisecond)
	assert.True(t, unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: zone, CapacityType: v1.CapacityTypeSpot}))
	assert.Contains(t, rec.reasons(impaired.nc.Name), "InstanceUnhealthy")
}
