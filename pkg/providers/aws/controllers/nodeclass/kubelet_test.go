package nodeclass_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
)

func kubelet(t *testing.T, raw string) awsv1.KubeletConfiguration {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	out := awsv1.KubeletConfiguration{}
	for k, v := range m {
		out[k] = apiextensionsv1.JSON{Raw: v}
	}
	return out
}

// TestKubeletValidation: kubelet fields a family would drop, values that do
// not parse, and reserves no instance type can hold fail validation (and so
// Ready) with a reason; reserves only the small types cannot hold leave the
// class Ready and say so in FieldsSupported.
func TestKubeletValidation(t *testing.T) {
	prices := pricing.NewProvider(nil, clients.EC2, pricing.Options{Region: clients.Region})
	types := instancetypes.NewProvider(clients.EC2, prices, instancetypes.Options{Region: clients.Region, Settings: instancetype.DefaultSettings()})
	c, _ := newController(0, func(o *nodeclass.Options) { o.InstanceTypes = types })
	for _, tc := range []struct {
		name, alias, family, kubelet string
		reason, contains             string
		fields                       string // FieldsSupported status when validation passes
	}{
		{name: "al2023-passthrough", alias: "al2023@latest", kubelet: `{"serializeImagePulls": false, "maxPods": 58}`, fields: "True"},
		{name: "bottlerocket-unmanaged", alias: "bottlerocket@latest", kubelet: `{"serializeImagePulls": false, "podsPerCore": 4, "maxPods": 58}`,
			reason: nodeclass.ReasonUnsupportedKubeletConfiguration, contains: "podsPerCore, serializeImagePulls are not applied by the Bottlerocket AMI family"},
		{name: "al2-unmanaged", alias: "al2@latest", kubelet: `{"registryPullQPS": 10, "podsPerCore": 4}`,
			reason: nodeclass.ReasonUnsupportedKubeletConfiguration, contains: "fields registryPullQPS are not applied by the AL2"},
		{name: "bad-quantity", alias: "al2023@latest", kubelet: `{"kubeReserved": {"memory": "lots"}}`,
			reason: nodeclass.ReasonInvalidKubeletConfiguration, contains: "kubeReserved[memory]"},
		{name: "reserve-too-big-for-all", alias: "al2023@latest", kubelet: `{"systemReserved": {"memory": "100Ti"}}`,
			reason: nodeclass.ReasonKubeletReservedExceedsCapacity, contains: "exceed the capacity of every instance type"},
		{name: "reserve-too-big-for-some", alias: "al2023@latest", kubelet: `{"kubeReserved": {"cpu": "3"}}`, fields: "False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "kubelet-" + tc.name
			newNodeClass(t, name, func(nc *awsv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
				// A given profile: no managed profile outlives the test.
				nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String("kubelet-test")
				nc.Spec.Kubelet = kubelet(t, tc.kubelet)
			})
			reconcileOnce(t, c, name)
			got := get(t, name)
			v := condition(got, awsv1.ConditionTypeValidationSucceeded)
			if tc.reason != "" {
				require.Equal(t, "False", string(v.Status), "%+v", v)
				require.Equal(t, tc.reason, v.Reason)
				require.Contains(t, v.Message, tc.contains)
				require.Equal(t, "False", string(condition(got, awsv1.ConditionTypeReady).Status))
				return
			}
			require.Equal(t, "True", string(v.Status), "%+v", v)
			fs := condition(got, nodeclass.ConditionTypeFieldsSupported)
			require.Equal(t, tc.fields, string(fs.Status), "%+v", fs)
			if tc.fields == "False" {
				require.Equal(t, nodeclass.ReasonKubeletReservedExceedsCapacity, fs.Reason)
				require.True(t, strings.Contains(fs.Message, "c5.large") || strings.Contains(fs.Message, "m5.large"), fs.Message)
				require.Equal(t, "True", string(condition(got, awsv1.ConditionTypeReady).Status), "the bigger types still launch")
			}
		})
	}
}
