package cloudprovider_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestWarmLaunchTemplates: the launch templates made for a NodePool ahead
// of its NodeClaims are the ones a NodeClaim the provisioner builds from
// it (template labels and taints, requirements narrowed to some of the
// types) launches from, so its Create creates none; a NodePool whose class
// does not exist makes none.
func TestWarmLaunchTemplates(t *testing.T) {
	cases := []struct {
		name     string
		class    func(e *env) string
		wantWarm bool
	}{
		{"a NodeClaim of the NodePool launches from the templates made ahead", func(e *env) string { return e.nodeClass.Name }, true},
		{"a NodePool without its class makes none", func(*env) string { return "missing-" + uuid.NewString()[:8] }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "warm-" + uuid.NewString()[:8]}}
			np.Spec.Template.SetLabelMap(map[string]string{"team": "payments"})
			np.Spec.Template.Spec = v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: tc.class(e)},
				Taints:       []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: candidates},
					{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				},
			}
			created := local.Calls("ec2", "CreateLaunchTemplate")
			n, err := e.cp.WarmLaunchTemplates(ctx, np)
			require.NoError(t, err)
			if !tc.wantWarm {
				assert.Zero(t, n)
				assert.Equal(t, created, local.Calls("ec2", "CreateLaunchTemplate"), "no template made")
				return
			}
			require.Positive(t, n)
			assert.Equal(t, created+n, local.Calls("ec2", "CreateLaunchTemplate"), "one template per image and pod capacity")

			// As the provisioner builds it: the pool's template, its
			// requirements narrowed to the types that fit the pods.
			nc := np.NodeClaimFromTemplate(nil)
			nc.Name = np.Name + "-a"
			nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: candidates[:3]},
				{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			}
			created = local.Calls("ec2", "CreateLaunchTemplate")
			got, err := e.cp.Create(ctx, nc)
			require.NoError(t, err)
			t.Cleanup(func() { cleanup(t, e, got) })
			assert.Equal(t, created, local.Calls("ec2", "CreateLaunchTemplate"), "the launch found its templates made")
		})
	}
}
