// Package metrics decorates a CloudProvider so that every call is timed and
// every failure counted under upstream's karpenter_cloudprovider_* names.
// Controllers name themselves with WithController so the series say who
// called.
package metrics

import (
	"context"
	"errors"
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

type controllerKey struct{}

// WithController records the calling controller's name in ctx for the
// controller label.
func WithController(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, controllerKey{}, name)
}

// ControllerFrom returns the name WithController stored, or "".
func ControllerFrom(ctx context.Context) string {
	name, _ := ctx.Value(controllerKey{}).(string)
	return name
}

// Decorator wraps a CloudProvider with metrics. It adds no behaviour.
type Decorator struct {
	cloudprovider.CloudProvider
}

var _ cloudprovider.CloudProvider = (*Decorator)(nil)

// Decorate wraps cp.
func Decorate(cp cloudprovider.CloudProvider) *Decorator {
	return &Decorator{CloudProvider: cp}
}

// Unwrap returns the decorated provider, for callers that need its concrete
// type (e.g. to inject faults into the kwok provider).
func (d *Decorator) Unwrap() cloudprovider.CloudProvider { return d.CloudProvider }

// observe times one call and counts its error, if any.
func (d *Decorator) observe(ctx context.Context, method string, start time.Time, err error) {
	controller, provider := ControllerFrom(ctx), d.CloudProvider.Name()
	metrics.CloudProviderDurationSeconds.WithLabelValues(controller, method, provider).Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.CloudProviderErrorsTotal.WithLabelValues(controller, method, provider, ErrorType(err)).Inc()
	}
}

// ErrorType is the error label: the typed cloud provider error's name, or ""
// for untyped errors.
func ErrorType(err error) string {
	var (
		ice      *cloudprovider.InsufficientCapacityError
		notReady *cloudprovider.NodeClassNotReadyError
		create   *cloudprovider.CreateError
		notFound *cloudprovider.NodeClaimNotFoundError
	)
	switch {
	case errors.As(err, &ice):
		return "InsufficientCapacityError"
	case errors.As(err, &notReady):
		return "NodeClassNotReadyError"
	case errors.As(err, &create):
		return "CreateError"
	case errors.As(err, &notFound):
		return "NodeClaimNotFoundError"
	}
	return ""
}

func (d *Decorator) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Create(ctx, nc)
	d.observe(ctx, "Create", start, err)
	return out, err
}

func (d *Decorator) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	start := time.Now()
	err := d.CloudProvider.Delete(ctx, nc)
	d.observe(ctx, "Delete", start, err)
	return err
}

func (d *Decorator) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Get(ctx, providerID)
	d.observe(ctx, "Get", start, err)
	return out, err
}

func (d *Decorator) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.List(ctx)
	d.observe(ctx, "List", start, err)
	return out, err
}

func (d *Decorator) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	start := time.Now()
	out, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	d.observe(ctx, "GetInstanceTypes", start, err)
	return out, err
}

func (d *Decorator) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	start := time.Now()
	out, err := d.CloudProvider.IsDrifted(ctx, nc)
	d.observe(ctx, "IsDrifted", start, err)
	return out, err
}
