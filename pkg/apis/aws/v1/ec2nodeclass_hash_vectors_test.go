package v1_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// upstreamHashVectors are the values upstream's own EC2NodeClass.Hash
// printed (aws/karpenter-provider-aws v1.14.1, hash version v6) for the
// objects in testdata/ec2nodeclass-hash-vectors.yaml, copied from
// shared/reference/ec2nodeclass-hash-vectors.md: the object as written, as
// the API server stores it (with upstream's CRD), and as stored with the CA
// bundle upstream's unit test uses. Equality is what lets a cluster move
// between upstream and this controller without its nodes turning drifted.
var upstreamHashVectors = []struct {
	name, asWritten, asStored, asStoredWithCA string
}{
	{"minimal", "14400096326436527473", "10649819112656183274", "4087369949482540540"},
	{"minimal-as-defaulted", "10649819112656183274", "10649819112656183274", "4087369949482540540"},
	{"explicit-family", "14400096326436527473", "10649819112656183274", "4087369949482540540"},
	{"pinned-alias", "14400096326436527473", "10649819112656183274", "4087369949482540540"},
	{"selectors-changed", "14400096326436527473", "10649819112656183274", "4087369949482540540"},
	{"custom-family-alias", "9365929175485602416", "15413252690740304107", "9121017357842651901"},
	{"bottlerocket", "9765536542291058845", "15247656582565814790", "8712228591669190672"},
	{"al2-by-id", "12694112097994286756", "16444369490479785023", "5711868013554918953"},
	{"windows2022-by-id", "11793017403575786218", "17849348096606328945", "6685343889618442855"},
	{"instance-profile", "12970237940820529738", "17018385971892879961", "5143093737221537871"},
	{"user-data", "18028054583916411971", "18212252731115997519", "6326545939603671897"},
	{"tags", "6142579998914043853", "6222591692446512508", "18242276082736232298"},
	{"tags-reordered", "6142579998914043853", "6222591692446512508", "18242276082736232298"},
	{"tags-empty", "5506451141240125550", "13333335069155897801", "1331665557069591519"},
	{"kubelet", "17713611619658003859", "11659760835908335368", "773855983483565342"},
	{"kubelet-reordered", "17713611619658003859", "11659760835908335368", "773855983483565342"},
	{"kubelet-maxpods-only", "1895211235488081248", "5643447720774019067", "16511056686576035309"},
	{"kubelet-empty", "14400096326436527473", "10649819112656183274", "4087369949482540540"},
	{"block-device-root", "17768572628674546246", "8273685150140714793", "15681687353515380031"},
	{"block-devices-two", "14493685673829410805", "2094395395067239178", "13142148976117061916"},
	{"block-devices-two-reordered", "14493685673829410805", "2094395395067239178", "13142148976117061916"},
	{"block-devices-empty", "2731658506613021372", "6191489322105134441", "18347125996491743103"},
	{"volume-1ti", "14755272838868074276", "12511351429635123066", "491944079499781484"},
	{"volume-1024gi", "14755272838868074276", "12511351429635123066", "491944079499781484"},
	{"metadata-options-explicit", "8360721550659429586", "8360721550659429586", "16101983485115819716"},
	{"metadata-options-partial", "10592056487565617655", "16829824460863786177", "4827031363037007575"},
	{"metadata-options-partial-as-defaulted", "16829824460863786177", "16829824460863786177", "4827031363037007575"},
	{"detailed-monitoring", "1501023735861177171", "6877443450680442378", "17582920733400382492"},
	{"detailed-monitoring-false", "13512533479020397316", "1653899745249160456", "13655290450069008158"},
	{"public-ip-false", "17453227671410762539", "6655445969225295447", "17811287402290897985"},
	{"raid0", "13218817852067694591", "3031134286247884495", "9323088722646086873"},
	{"context", "9166141757858696676", "14458174288701519567", "7194293384318006489"},
	{"placement-group", "13906760504863219046", "14703711386416497842", "7456994257991239332"},
	{"network-interfaces", "11183169085186532426", "9405267031670688350", "3023247778825783368"},
	{"connection-tracking", "11797060999745337821", "8957905146048575322", "15502054134325228876"},
	{"cpu-options", "15602952910006350085", "3426348284939526394", "9583192450128421612"},
	{"upstream-unit-test-base", "3586199404471678909", "3586199404471678909", "11148166120438674859"},
}

// hashVectorObjects are the vectors' manifests by name, typed and as they
// are written (a typed object would drop tags: {} and
// blockDeviceMappings: [] on the way to the API server, kubectl does not).
func hashVectorObjects(t *testing.T) (map[string]*awsv1.EC2NodeClass, map[string]*unstructured.Unstructured) {
	t.Helper()
	raw, err := os.ReadFile("testdata/ec2nodeclass-hash-vectors.yaml")
	require.NoError(t, err)
	out, written := map[string]*awsv1.EC2NodeClass{}, map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		// The separator took the document's last line break, which a
		// block scalar at its end (userData: |) keeps.
		doc = append(doc, '\n')
		nc := &awsv1.EC2NodeClass{}
		require.NoError(t, yaml.UnmarshalStrict(doc, nc))
		out[nc.Name] = nc
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		written[nc.Name] = u
	}
	require.Len(t, out, len(upstreamHashVectors), "one object per vector")
	return out, written
}

// TestUpstreamHashVectors: every vector, as written, and as our own CRD
// makes the API server store it (so our CRD's defaults must be upstream's),
// with no CA bundle and with upstream's test one.
func TestUpstreamHashVectors(t *testing.T) {
	ctx := context.Background()
	objects, written := hashVectorObjects(t)
	for _, v := range upstreamHashVectors {
		t.Run(v.name, func(t *testing.T) {
			nc, ok := objects[v.name]
			require.True(t, ok, "no object named %q", v.name)
			assert.Equal(t, v.asWritten, nc.DeepCopy().Hash(nil), "as written")

			created := written[v.name].DeepCopy()
			created.SetName("vector-" + v.name)
			require.NoError(t, cp.Client.Create(ctx, created))
			t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), created) })
			stored := &awsv1.EC2NodeClass{}
			require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Name: created.GetName()}, stored))
			assert.Equal(t, v.asStored, stored.Hash(nil), "as stored")
			assert.Equal(t, v.asStored, stored.Hash(ptr.To("")), "an empty CA bundle is no CA bundle")
			assert.Equal(t, v.asStoredWithCA, stored.Hash(ptr.To("test-ca-bundle")), "as stored, CA bundle test-ca-bundle")
		})
	}
}
