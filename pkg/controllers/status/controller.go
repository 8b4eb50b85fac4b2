// Package status publishes upstream's operator_* status-condition and
// termination series for one kind of object (NodeClaim, NodePool, Node, a
// provider's NodeClass, CapacityBuffer): a gauge per condition with its
// status and reason and how long it has held it, a count and a duration
// per transition, and how long a deleting object has been terminating and
// took to go. The gauges are computed at each scrape from what the
// controller remembers of each object (it needs that memory to see
// transitions anyway), so they need no periodic pass to keep their
// "seconds so far" current; each condition's label pairs are kept from
// one scrape to the next while its status and reason and the object's
// labels stay, the pairs that many series have shared. It also records
// upstream's condition-transition events for the kinds whose own
// controllers do not, and its Finalized events.
package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Options describe one kind.
type Options struct {
	// Object makes an empty object of the kind.
	Object func() client.Object
	// Metrics are the kind's series (metrics.NodeClaimStatusMetrics, ...);
	// they are registered by New.
	Metrics *metrics.StatusMetrics
	// LabelKeys are the object labels the kind's series carry, in the
	// order of Metrics.ExtraLabels.
	LabelKeys []string
	// Generic also publishes the kind-less series labelled by group and
	// kind, as upstream does for every kind but Node.
	Generic bool
	// Events records the condition-transition events; off for kinds whose
	// controllers already record them (NodeClaim). Finalized events are
	// always recorded.
	Events bool
	// Recorder publishes the events (Register defaults it to the manager's).
	Recorder record.EventRecorder
	Clock    clock.Clock
}

// Controller publishes one kind's series.
type Controller struct {
	opts Options
	kube client.Client
	gvk  schema.GroupVersionKind
	name string

	mu          sync.Mutex
	observed    map[types]observedObject
	terminating map[types]terminatingObject
	// shared are the label pairs the condition series share (types,
	// statuses, reasons, object label values).
	shared metrics.LabelPairs
}

type types = reconcile.Request

type observedObject struct {
	conditions map[string]condition
	labels     []string
	finalizers []string
	series     *seriesCache
}

// seriesCache keeps an object's condition series between scrapes, so that
// a scrape builds no label pairs for objects that did not change: one map
// for the kind's families and one for the kind-less ones, by condition
// type. A condition's series is built again when its status or reason
// changes, and all of them when the object's labels do.
type seriesCache struct {
	bySlot [2]map[string]cachedSeries
}

type cachedSeries struct {
	status, reason string
	series         *metrics.Series
}

type terminatingObject struct {
	deleted time.Time
	labels  []string
}

type condition struct {
	Type, Status, Reason, Message string
	LastTransitionTime            time.Time
}

// New builds the controller for a kind and registers its metrics.
func New(kube client.Client, scheme *runtime.Scheme, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	gvk, err := apiutil.GVKForObject(opts.Object(), scheme)
	if err != nil {
		return nil, fmt.Errorf("status metrics: %w", err)
	}
	if len(opts.LabelKeys) != len(opts.Metrics.ExtraLabels) {
		return nil, fmt.Errorf("status metrics for %s: %d label keys for %d labels", gvk.Kind, len(opts.LabelKeys), len(opts.Metrics.ExtraLabels))
	}
	if err := metrics.Register(opts.Metrics.Collectors()...); err != nil {
		return nil, fmt.Errorf("registering %s status metrics: %w", gvk.Kind, err)
	}
	c := &Controller{
		opts: opts, kube: kube, gvk: gvk, name: "status." + strings.ToLower(gvk.Kind),
		observed: map[types]observedObject{}, terminating: map[types]terminatingObject{},
	}
	c.addSources(opts.Metrics, nil, 0)
	if opts.Generic {
		c.addSources(metrics.GenericStatus, []string{gvk.Group, gvk.Kind}, 1)
	}
	return c, nil
}

// addSources makes m's gauges read the objects c remembers, each series
// labelled with the object's label values or, when given, with fixed
// ones (the kind-less series' group and kind). slot says which of an
// object's cached series maps the families use.
func (c *Controller) addSources(m *metrics.StatusMetrics, fixed []string, slot int) {
	extra := func(labels []string) []string {
		if fixed != nil {
			return fixed
		}
		return labels
	}
	conditions := func(value func(now time.Time, cond condition) float64) func(func(float64, *metrics.Series)) {
		return func(emit func(float64, *metrics.Series)) {
			now := c.opts.Clock.Now()
			c.mu.Lock()
			defer c.mu.Unlock()
			for req, o := range c.observed {
				for _, cond := range o.conditions {
					if s := c.conditionSeriesLocked(m, slot, req, o, cond, extra(o.labels)); s != nil {
						emit(value(now, cond), s)
					}
				}
			}
		}
	}
	m.ConditionCount.AddSeriesSource(conditions(func(time.Time, condition) float64 { return 1 }))
	m.ConditionCurrentStatusSeconds.AddSeriesSource(conditions(func(now time.Time, cond condition) float64 {
		return now.Sub(cond.LastTransitionTime).Seconds()
	}))
	m.TerminationCurrentTimeSeconds.AddSource(func(emit func(float64, ...string)) {
		now := c.opts.Clock.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		for req, t := range c.terminating {
			emit(now.Sub(t.deleted).Seconds(), append([]string{req.Namespace, req.Name}, extra(t.labels)...)...)
		}
	})
}

// conditionSeriesLocked is the series of one condition of an object in m's
// condition families (the count and the seconds share it: their label
// names are the same), built at the first scrape that needs it and kept
// while the condition's status and reason stay.
func (c *Controller) conditionSeriesLocked(m *metrics.StatusMetrics, slot int, req types, o observedObject, cond condition, extra []string) *metrics.Series {
	cache := o.series.bySlot[slot]
	if cache == nil {
		cache = map[string]cachedSeries{}
		o.series.bySlot[slot] = cache
	}
	if cached, ok := cache[cond.Type]; ok && cached.status == cond.Status && cached.reason == cond.Reason {
		return cached.series
	}
	values := append([]string{req.Namespace, req.Name, cond.Type, cond.Status, cond.Reason}, extra...)
	// Label values that do not fit (not UTF-8) leave the series out, as a
	// failed scrape would lose every series.
	s, _ := m.ConditionCount.SeriesOf(values, &c.shared, 1)
	cache[cond.Type] = cachedSeries{status: cond.Status, reason: cond.Reason, series: s}
	return s
}

// Name is the controller's name.
func (c *Controller) Name() string { return c.name }

// Register adds the controller to mgr.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	if c.opts.Recorder == nil {
		c.opts.Recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, as upstream shows them
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(c.name).
		For(c.opts.Object()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(c)
}

// Reconcile publishes one object's series.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := c.opts.Object()
	if err := c.kube.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			c.gone(req)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting %s %s: %w", c.gvk.Kind, req.NamespacedName, err)
	}
	conds, err := conditionsOf(obj)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading conditions of %s %s: %w", c.gvk.Kind, req.NamespacedName, err)
	}
	labels := c.labelValues(obj)
	m := c.opts.Metrics

	c.mu.Lock()
	prev, seen := c.observed[req]
	cache := &seriesCache{}
	if seen && slices.Equal(prev.labels, labels) {
		// The cached series whose condition changed are built again at
		// the next scrape; a condition that went stays in the cache, at
		// most one entry per condition type the kind has.
		cache = prev.series
	}
	c.observed[req] = observedObject{conditions: conds, labels: labels, finalizers: obj.GetFinalizers(), series: cache}
	c.mu.Unlock()

	if seen {
		for _, f := range prev.finalizers {
			if !contains(obj.GetFinalizers(), f) {
				c.event(obj, "Finalized", "Finalized "+f)
			}
		}
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		c.mu.Lock()
		c.terminating[req] = terminatingObject{deleted: obj.GetDeletionTimestamp().Time, labels: labels}
		c.mu.Unlock()
	}

	for _, cond := range conds {
		old, had := prev.conditions[cond.Type]
		if seen && had && old.Status == cond.Status {
			continue
		}
		// A condition that is new or changed status is a transition.
		m.ConditionTransitionsTotal.WithLabelValues(append([]string{cond.Type, cond.Status, cond.Reason}, labels...)...).Inc()
		if c.opts.Generic {
			metrics.GenericStatus.ConditionTransitionsTotal.WithLabelValues(cond.Type, cond.Status, cond.Reason, c.gvk.Group, c.gvk.Kind).Inc()
		}
		if !had {
			continue
		}
		held := cond.LastTransitionTime.Sub(old.LastTransitionTime).Seconds()
		m.ConditionTransitionSeconds.WithLabelValues(append([]string{old.Type, old.Status}, labels...)...).Observe(held)
		if c.opts.Generic {
			metrics.GenericStatus.ConditionTransitionSeconds.WithLabelValues(old.Type, old.Status, c.gvk.Group, c.gvk.Kind).Observe(held)
		}
		if c.opts.Events {
			msg := fmt.Sprintf("Status condition transitioned, Type: %s, Status: %s -> %s, Reason: %s", cond.Type, old.Status, cond.Status, cond.Reason)
			if cond.Message != "" {
				msg += ", Message: " + cond.Message
			}
			c.event(obj, cond.Type, msg)
		}
	}
	return reconcile.Result{}, nil
}

// gone ends a deleted object's series: its gauges go, and its termination
// is observed if it was seen terminating.
func (c *Controller) gone(req reconcile.Request) {
	c.mu.Lock()
	prev, seen := c.observed[req]
	term, terminating := c.terminating[req]
	delete(c.observed, req)
	delete(c.terminating, req)
	c.mu.Unlock()
	m := c.opts.Metrics
	if terminating {
		took := c.opts.Clock.Since(term.deleted).Seconds()
		m.TerminationDurationSeconds.WithLabelValues(term.labels...).Observe(took)
		if c.opts.Generic {
			metrics.GenericStatus.TerminationDurationSeconds.WithLabelValues(c.gvk.Group, c.gvk.Kind).Observe(took)
		}
	}
	if seen && len(prev.finalizers) > 0 {
		// Upstream records a gone object's Finalized events against the
		// empty object its Get failed to fill: an Event of the kind with
		// no name, in the default namespace, that every later deletion
		// folds into. Ours names no object either, so deleting a hundred
		// NodeClaims is one Event, not a hundred (and none on the object,
		// which is gone with its Events' use).
		empty := c.opts.Object()
		for _, f := range prev.finalizers {
			c.event(empty, "Finalized", "Finalized "+f)
		}
	}
}

func (c *Controller) labelValues(obj client.Object) []string {
	out := make([]string, len(c.opts.LabelKeys))
	for i, k := range c.opts.LabelKeys {
		out[i] = obj.GetLabels()[k]
	}
	return out
}

func (c *Controller) event(obj client.Object, reason, msg string) {
	if c.opts.Recorder == nil {
		return
	}
	if ro, ok := obj.(runtime.Object); ok {
		c.opts.Recorder.Event(ro, corev1.EventTypeNormal, reason, msg)
	}
}

// conditioned is a kind whose conditions are metav1.Conditions (ours and
// the providers' kinds).
type conditioned interface {
	GetConditions() []metav1.Condition
}

// conditionsOf reads status.conditions of any object, by type: from the
// typed object for Nodes and the kinds with metav1.Conditions, otherwise
// through its unstructured form (converting a whole Node on each of its
// heartbeats was most of this controller's cost).
func conditionsOf(obj client.Object) (map[string]condition, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		out := make(map[string]condition, len(o.Status.Conditions))
		for _, c := range o.Status.Conditions {
			if c.Type != "" {
				out[string(c.Type)] = condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
					Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time}
			}
		}
		return out, nil
	case conditioned:
		list := o.GetConditions()
		out := make(map[string]condition, len(list))
		for _, c := range list {
			if c.Type != "" {
				out[c.Type] = condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
					Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time}
			}
		}
		return out, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	list, _, err := unstructured.NestedSlice(u, "status", "conditions")
	if err != nil {
		return nil, err
	}
	out := make(map[string]condition, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		cond := condition{}
		cond.Type, _ = m["type"].(string)
		cond.Status, _ = m["status"].(string)
		cond.Reason, _ = m["reason"].(string)
		cond.Message, _ = m["message"].(string)
		if s, _ := m["lastTransitionTime"].(string); s != "" {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err == nil {
				cond.LastTransitionTime = t.Time
			}
		}
		if cond.Type != "" {
			out[cond.Type] = cond
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
