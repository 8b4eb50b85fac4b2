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
// types) launches from, so its Create creates none; so are those made
// while the class waits only for IAM to propagate its instance profile; a
// NodePool whose class does not exist, or is not Ready for another
// reason, makes none.
func TestWarmLaunchTemplates(t *testing.T) {
	className := func(e *env) string { return e.nodeClass.Name }
	cases := []struct {
		name  string
		class func(e *env) string
		// notReady, when set, is the class's one condition besides Ready
		// (False) and ValidationSucceeded (waiting) that is not True.
		notReady *metav1.Condition
		wantWarm bool
	}{
		{"a NodeClaim of the NodePool launches from the templates made ahead", className, nil, true},
		{"a NodePool without its class makes none", func(*env) string { return "missing-" + uuid.NewString()[:8] }, nil, false},
		{"a class whose instance profile propagates: made", className,
			&metav1.Condition{Type: awsv1.ConditionTypeInstanceProfileReady, Status: metav1.ConditionFalse, Reason: awsv1.ReasonInstanceProfilePropagating}, true},
		{"a class without its security groups makes none", className,
			&metav1.Condition{Type: awsv1.ConditionTypeSecurityGroupsReady, Status: metav1.ConditionFalse, Reason: "SecurityGroupsNotFound"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			if tc.notReady != nil {
				notReady(t, e, *tc.notReady)
			}
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
			if tc.notReady != nil {
				// Its Create waits for the class to be Ready.
				ready(t, e)
			}
			got, err := e.cp.Create(ctx, nc)
			require.NoError(t, err)
			t.Cleanup(func() { cleanup(t, e, got) })
			assert.Equal(t, created, local.Calls("ec2", "CreateLaunchTemplate"), "the launch found its templates made")
		})
	}
}

// notReady sets the class's conditions: Ready False, ValidationSucceeded
// waiting for its dependencies, cond, and the other dependents True.
func notReady(t *testing.T, e *env, cond metav1.Condition) {
	t.Helper()
	conds := []metav1.Condition{
		{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "UnhealthyDependents"},
		{Type: awsv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: awsv1.ReasonDependenciesNotReady},
		cond,
	}
	for _, ct := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypePlacementGroupReady} {
		if ct != cond.Type {
			conds = append(conds, metav1.Condition{Type: ct, Status: metav1.ConditionTrue, Reason: ct})
		}
	}
	setConditions(t, e, conds)
}

// ready makes the class Ready again.
func ready(t *testing.T, e *env) {
	t.Helper()
	setConditions(t, e, []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready"}})
}

func setConditions(t *testing.T, e *env, conds []metav1.Condition) {
	t.Helper()
	for i := range conds {
		conds[i].LastTransitionTime = metav1.Now()
	}
	e.nodeClass.Status.Conditions = conds
	require.NoError(t, kube.Status().Update(context.Background(), e.nodeClass))
}
