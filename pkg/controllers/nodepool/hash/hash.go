// Package hash owns the karpenter.sh/nodepool-hash annotation: how a
// NodePool template is hashed, and the controller that stamps the hash on
// NodePools (and re-stamps NodeClaims when the hash version changes).
//
// The hash is our own: SHA-256 over a canonical JSON rendering of the
// template fields that matter for static drift, printed as a decimal uint64.
// It is deterministic and stable across versions of this project (changing
// the rendering requires bumping NodePoolHashVersion), but it is not
// numerically equal to upstream Karpenter's hashstructure value.
package hash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// canonical holds exactly the template fields that take part in the hash.
// Requirements are left out (requirement drift is computed against the
// NodeClaim's live requirements instead), as are the disruption settings and
// budgets, which live outside the template. Empty values are omitted so that
// nil and empty maps or slices hash the same.
type canonical struct {
	Labels                 map[string]string `json:"labels,omitempty"`
	Annotations            map[string]string `json:"annotations,omitempty"`
	Taints                 []string          `json:"taints,omitempty"`
	StartupTaints          []string          `json:"startupTaints,omitempty"`
	NodeClassGroup         string            `json:"nodeClassGroup,omitempty"`
	NodeClassKind          string            `json:"nodeClassKind,omitempty"`
	NodeClassName          string            `json:"nodeClassName,omitempty"`
	TerminationGracePeriod string            `json:"terminationGracePeriod,omitempty"`
	ExpireAfter            string            `json:"expireAfter,omitempty"`
}

// NodePool returns the hash of np's template as a decimal string (the same
// shape as upstream's annotation value). Taint order does not matter;
// durations hash by value, so "720h" and "720h0m0s" are equal.
func NodePool(np *v1.NodePool) string {
	t := np.Spec.Template
	c := canonical{
		Labels:        nonEmpty(t.LabelMap()),
		Annotations:   nonEmpty(t.Annotations),
		Taints:        taintSet(t.Spec.Taints),
		StartupTaints: taintSet(t.Spec.StartupTaints),
	}
	if ref := t.Spec.NodeClassRef; ref != nil {
		c.NodeClassGroup, c.NodeClassKind, c.NodeClassName = ref.Group, ref.Kind, ref.Name
	}
	if tgp := t.Spec.TerminationGracePeriod; tgp != nil {
		c.TerminationGracePeriod = tgp.Duration.String()
	}
	switch ea := t.Spec.ExpireAfter; {
	case ea.Duration != nil:
		c.ExpireAfter = ea.Duration.String()
	case ea.IsNever():
		c.ExpireAfter = v1.Never
	}
	// encoding/json sorts map keys, so the rendering is canonical.
	raw, err := json.Marshal(c)
	if err != nil {
		// Only strings and string maps: marshalling cannot fail.
		panic(err)
	}
	sum := sha256.Sum256(raw)
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// taintSet renders taints as sorted, de-duplicated strings: the API treats
// them as a set, so reordering them must not look like drift.
func taintSet(taints []corev1.Taint) []string {
	if len(taints) == 0 {
		return nil
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(taints))
	for _, t := range taints {
		s := t.Key + "=" + t.Value + ":" + string(t.Effect)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
