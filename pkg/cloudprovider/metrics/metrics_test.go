package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// fake returns err from every call; the embedded nil interface makes any
// method the test does not exercise panic loudly.
type fake struct {
	cloudprovider.CloudProvider
	err error
}

func (f *fake) Name() string { return "fake" }
func (f *fake) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return &v1.NodeClaim{}, f.err
}
func (f *fake) Delete(context.Context, *v1.NodeClaim) error        { return f.err }
func (f *fake) Get(context.Context, string) (*v1.NodeClaim, error) { return nil, f.err }
func (f *fake) List(context.Context) ([]*v1.NodeClaim, error)      { return nil, f.err }
func (f *fake) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, f.err
}
func (f *fake) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", f.err
}

func TestDecorator(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name      string
		err       error
		call      func(ctx context.Context, d *Decorator) error
		method    string
		wantLabel string
	}{
		{"create ice", fmt.Errorf("wrapped: %w", cloudprovider.NewInsufficientCapacityError(cause)),
			func(ctx context.Context, d *Decorator) error { _, err := d.Create(ctx, &v1.NodeClaim{}); return err },
			"Create", "InsufficientCapacityError"},
		{"create error", cloudprovider.NewCreateError(cause, "R", "M"),
			func(ctx context.Context, d *Decorator) error { _, err := d.Create(ctx, &v1.NodeClaim{}); return err },
			"Create", "CreateError"},
		{"nodeclass not ready", cloudprovider.NewNodeClassNotReadyError(cause),
			func(ctx context.Context, d *Decorator) error { _, err := d.Create(ctx, &v1.NodeClaim{}); return err },
			"Create", "NodeClassNotReadyError"},
		{"delete not found", cloudprovider.NewNodeClaimNotFoundError(cause),
			func(ctx context.Context, d *Decorator) error { return d.Delete(ctx, &v1.NodeClaim{}) },
			"Delete", "NodeClaimNotFoundError"},
		{"get untyped", cause,
			func(ctx context.Context, d *Decorator) error { _, err := d.Get(ctx, "id"); return err },
			"Get", ""},
		{"list", cause,
			func(ctx context.Context, d *Decorator) error { _, err := d.List(ctx); return err },
			"List", ""},
		{"instance types", cause,
			func(ctx context.Context, d *Decorator) error {
				_, err := d.GetInstanceTypes(ctx, &v1.NodePool{})
				return err
			},
			"GetInstanceTypes", ""},
		{"drift", cause,
			func(ctx context.Context, d *Decorator) error { _, err := d.IsDrifted(ctx, &v1.NodeClaim{}); return err },
			"IsDrifted", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controller := "test." + tt.name
			ctx := WithController(context.Background(), controller)
			d := Decorate(&fake{err: tt.err})
			require.ErrorIs(t, tt.call(ctx, d), tt.err, "errors pass through unchanged")
			assert.Equal(t, 1.0, counterValue(t, metrics.CloudProviderErrorsTotal.WithLabelValues(controller, tt.method, "fake", tt.wantLabel)))
			m := &dto.Metric{}
			require.NoError(t, metrics.CloudProviderDurationSeconds.WithLabelValues(controller, tt.method, "fake").(prometheus.Metric).Write(m))
			assert.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
		})
	}
}

func TestSuccessCountsNoError(t *testing.T) {
	ctx := WithController(context.Background(), "ok")
	d := Decorate(&fake{})
	_, err := d.Create(ctx, &v1.NodeClaim{})
	require.NoError(t, err)
	assert.Equal(t, 0.0, counterValue(t, metrics.CloudProviderErrorsTotal.WithLabelValues("ok", "Create", "fake", "")))
	assert.Equal(t, "ok", ControllerFrom(ctx))
	assert.Equal(t, "", ControllerFrom(context.Background()))
	assert.Equal(t, "fake", d.Unwrap().Name())
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, c.Write(m))
	return m.GetCounter().GetValue()
}
