package v1alpha1_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// TestStatusDefaultsReady: nothing reconciles a KWOKNodeClass, so the schema
// default must make a new one Ready on its own.
func TestStatusDefaultsReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := &kwokv1alpha1.KWOKNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       kwokv1alpha1.KWOKNodeClassSpec{NodeRegistrationDelay: metav1.Duration{Duration: 90 * time.Second}},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })

	got := &kwokv1alpha1.KWOKNodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), got))
	require.Equal(t, 90*time.Second, got.Spec.NodeRegistrationDelay.Duration)
	require.Len(t, got.Status.Conditions, 1)
	require.Equal(t, "Ready", got.Status.Conditions[0].Type)
	require.Equal(t, metav1.ConditionTrue, got.Status.Conditions[0].Status)
}

func TestNodeRegistrationDelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		delay string
		valid bool
	}{
		{"30s", true},
		{"1m30s", true},
		{"2h", true},
		{"500ms", false},
		{"1.5m", false},
		{"10", false},
		{"-1m", false},
	} {
		t.Run(tc.delay, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": kwokv1alpha1.GroupVersion.String(),
				"kind":       "KWOKNodeClass",
				"metadata":   map[string]any{"name": "delay"},
				"spec":       map[string]any{"nodeRegistrationDelay": tc.delay},
			}}
			err := cp.Client.Create(ctx, obj, client.DryRunAll)
			if tc.valid {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			require.ErrorContains(t, err, "spec.nodeRegistrationDelay")
			require.ErrorContains(t, err, "should match '^([0-9]+(s|m|h))+$'")
		})
	}
}
