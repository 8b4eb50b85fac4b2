// Package zonalshift is upstream's zonal shift controller: every 30 seconds
// it reads the cluster's active ARC zonal shifts and autoshifts (the
// provider the instance-type offerings consult), and when the set of shifted
// zones changes it tells each NodePool that could launch there: a Warning
// ZonalShiftActive when a zone it provisions into is shifted away from, a
// Normal ZonalShiftCleared when the zone is restored.
package zonalshift

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Interval is upstream's period.
const Interval = 30 * time.Second

// Event reasons, upstream's.
const (
	ReasonZonalShiftActive  = "ZonalShiftActive"
	ReasonZonalShiftCleared = "ZonalShiftCleared"
)

// Shifts is the zonal shift provider (zonalshift.Provider).
type Shifts interface {
	Update(ctx context.Context) error
	ShiftedZoneIDs() []string
}

// Recorder publishes Kubernetes events (record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Controller publishes zonal shift transitions.
type Controller struct {
	kube     client.Client
	shifts   Shifts
	recorder Recorder
	log      logr.Logger
	interval time.Duration
	previous []string
}

// NewController returns the controller; interval 0 is Interval.
func NewController(kube client.Client, shifts Shifts, recorder Recorder, interval time.Duration, log logr.Logger) *Controller {
	if interval <= 0 {
		interval = Interval
	}
	return &Controller{kube: kube, shifts: shifts, recorder: recorder, interval: interval, log: log}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "zonalshift" }

// Register adds the periodic pass to mgr (leader only).
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	if c.recorder == nil {
		c.recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, like the rest of the project
	}
	return mgr.Add(manager.RunnableFunc(periodic.Loop{
		Interval: c.interval, Immediately: true, Pass: c.Pass, Log: c.log, Failure: "updating zonal shifts",
	}.Run))
}

// Pass reads the shifts and publishes the transitions since the last pass.
// A failed publish leaves the previous set, so the next pass retries it.
func (c *Controller) Pass(ctx context.Context) error {
	if err := c.shifts.Update(ctx); err != nil {
		return err
	}
	current := c.shifts.ShiftedZoneIDs()
	if slices.Equal(current, c.previous) {
		return nil
	}
	shifted, cleared := diff(c.previous, current), diff(current, c.previous)
	c.log.Info("zonal shifts changed", "shifted", current, "started", shifted, "cleared", cleared)
	if err := c.publish(ctx, shifted, cleared); err != nil {
		return fmt.Errorf("publishing zonal shift events: %w", err)
	}
	c.previous = current
	return nil
}

func (c *Controller) publish(ctx context.Context, shifted, cleared []string) error {
	var pools v1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return fmt.Errorf("listing nodepools: %w", err)
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil || ref.Group != awsv1.Group {
			continue
		}
		nc := &awsv1.EC2NodeClass{}
		if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return fmt.Errorf("getting EC2NodeClass %s of NodePool %s: %w", ref.Name, np.Name, err)
		}
		reqs, err := requirements(np)
		if err != nil {
			continue // the NodePool's own validation reports it
		}
		for _, id := range shifted {
			if zone, ok := affected(reqs, nc, id); ok {
				c.recorder.Eventf(np, corev1.EventTypeWarning, ReasonZonalShiftActive,
					"Zonal shift detected: offerings in zone %s (%s) are unavailable for this NodePool", zone, id)
			}
		}
		for _, id := range cleared {
			if zone, ok := affected(reqs, nc, id); ok {
				c.recorder.Eventf(np, corev1.EventTypeNormal, ReasonZonalShiftCleared,
					"Zonal shift cleared: offerings in zone %s (%s) are restored for this NodePool", zone, id)
			}
		}
	}
	return nil
}

// affected finds the zone name of zoneID among the class's subnets and says
// whether the NodePool's requirements let it provision there.
func affected(reqs scheduling.Requirements, nc *awsv1.EC2NodeClass, zoneID string) (string, bool) {
	for _, s := range nc.Status.Subnets {
		if s.ZoneID != zoneID {
			continue
		}
		return s.Zone, reqs.Get(corev1.LabelTopologyZone).Has(s.Zone) && reqs.Get(awsv1.LabelTopologyZoneID).Has(zoneID)
	}
	return "", false
}

func requirements(np *v1.NodePool) (scheduling.Requirements, error) {
	in := make([]scheduling.RequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
	}
	return scheduling.RequirementsFromMinValues(in)
}

// diff is b without a; both sorted.
func diff(a, b []string) []string {
	var out []string
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}
