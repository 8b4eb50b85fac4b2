package options

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// SchedulerConfig mirrors the part of the kube-scheduler configuration that
// changes where pods land, so the simulation can match the real scheduler.
type SchedulerConfig struct {
	PodTopologySpread *PodTopologySpreadConfig `json:"podTopologySpread,omitempty"`
}

// PodTopologySpreadConfig holds cluster-wide default spread constraints,
// applied to pods that declare none of their own.
type PodTopologySpreadConfig struct {
	DefaultConstraints []corev1.TopologySpreadConstraint `json:"defaultConstraints,omitempty"`
}

// LoadSchedulerConfig reads a file, or an inline JSON object when the value
// starts with '{', decoding strictly (unknown fields are errors) and
// validating the constraints as kube-scheduler would.
func LoadSchedulerConfig(pathOrInline string) (*SchedulerConfig, error) {
	data := []byte(pathOrInline)
	if !strings.HasPrefix(strings.TrimSpace(pathOrInline), "{") {
		var err error
		if data, err = os.ReadFile(pathOrInline); err != nil {
			return nil, fmt.Errorf("reading scheduler config: %w", err)
		}
	}
	cfg := &SchedulerConfig{}
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(data), cfg); err != nil {
		return nil, fmt.Errorf("decoding scheduler config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validating scheduler config: %w", err)
	}
	return cfg, nil
}

// Validate applies kube-scheduler's rules for default constraints.
func (c *SchedulerConfig) Validate() error {
	if c == nil || c.PodTopologySpread == nil {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	for i, tsc := range c.PodTopologySpread.DefaultConstraints {
		path := fmt.Sprintf("podTopologySpread.defaultConstraints[%d]", i)
		if tsc.MaxSkew <= 0 {
			errs = append(errs, fmt.Errorf("%s.maxSkew: must be greater than zero", path))
		}
		if tsc.TopologyKey == "" {
			errs = append(errs, fmt.Errorf("%s.topologyKey: can not be empty", path))
		} else if msgs := validation.IsQualifiedName(tsc.TopologyKey); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.topologyKey: %s", path, strings.Join(msgs, "; ")))
		}
		switch tsc.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, fmt.Errorf("%s.whenUnsatisfiable: unsupported value %q", path, tsc.WhenUnsatisfiable))
		}
		if tsc.LabelSelector != nil {
			errs = append(errs, fmt.Errorf("%s.labelSelector: forbidden: default constraints must not define a selector; it is derived from each pod", path))
		}
		if len(tsc.MatchLabelKeys) > 0 {
			errs = append(errs, fmt.Errorf("%s.matchLabelKeys: forbidden: default constraints must not define matchLabelKeys", path))
		}
		key := tsc.TopologyKey + "/" + string(tsc.WhenUnsatisfiable)
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s: duplicate {%q, %q}", path, tsc.TopologyKey, tsc.WhenUnsatisfiable))
		}
		seen[key] = true
	}
	return errors.Join(errs...)
}
