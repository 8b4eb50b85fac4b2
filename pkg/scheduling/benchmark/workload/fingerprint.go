package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Describe recovers a pod's record from the pod itself, so that the
// fingerprint checks the built pods and not just the draws behind them.
func Describe(p *corev1.Pod) Record {
	var req corev1.ResourceList
	if len(p.Spec.Containers) > 0 {
		req = p.Spec.Containers[0].Resources.Requests
	}
	r := Record{
		CPUMilli: req.Cpu().MilliValue(),
		MemMi:    req.Memory().Value() >> 20,
	}
	aff := p.Spec.Affinity
	switch {
	case aff != nil && aff.PodAntiAffinity != nil && len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0:
		r.Group = Preference
	case aff != nil && aff.PodAntiAffinity != nil && len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
		r.Group = AntiHostname
	case aff != nil && aff.PodAffinity != nil:
		r.Group = AffinityZone
		r.Label = p.Labels[MyAffinityLabel]
	case len(p.Spec.TopologySpreadConstraints) > 0:
		tsc := p.Spec.TopologySpreadConstraints[0]
		r.Group = SpreadZone
		if tsc.TopologyKey == HostnameKey {
			r.Group = SpreadHostname
		}
		r.Label = p.Labels[MyLabel]
		if tsc.LabelSelector != nil {
			r.Selector = tsc.LabelSelector.MatchLabels[MyLabel]
		}
	default:
		r.Group = Generic
		r.Label = p.Labels[MyLabel]
	}
	return r
}

// Line is the record's fingerprint line: group,cpu milli,mem Mi,label,selector.
func (r Record) Line() string {
	return fmt.Sprintf("%s,%d,%d,%s,%s", r.Group, r.CPUMilli, r.MemMi, r.Label, r.Selector)
}

// FingerprintRecords hashes records the way the spec does: one line per
// record, in order, each ending in a newline.
func FingerprintRecords(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.Line())
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// Fingerprint hashes pods, in the order given, as the spec does.
func Fingerprint(pods []*corev1.Pod) string {
	recs := make([]Record, len(pods))
	for i, p := range pods {
		recs[i] = Describe(p)
	}
	return FingerprintRecords(recs)
}
