package options

import (
	"fmt"
	"sort"
	"strings"
)

// FeatureGates switches optional behaviour on and off. It implements
// flag.Value: "Name=bool,Name=bool". Gates not mentioned keep their defaults
// and unknown names are ignored, so that a chart written for a newer version
// still starts.
type FeatureGates struct {
	NodeRepair              bool
	ReservedCapacity        bool
	SpotToSpotConsolidation bool
	NodeOverlay             bool
	StaticCapacity          bool
	CapacityBuffer          bool
	// AnticipateReplicaSets is ours, not upstream's: a provisioning round
	// also plans for the pods the ReplicaSets of pending pods are about to
	// create. Off gives upstream's behaviour of planning only for pods
	// that exist.
	AnticipateReplicaSets bool
}

// DefaultFeatureGates are upstream's defaults.
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{ReservedCapacity: true, AnticipateReplicaSets: true}
}

func (g *FeatureGates) fields() map[string]*bool {
	return map[string]*bool{
		"NodeRepair":              &g.NodeRepair,
		"ReservedCapacity":        &g.ReservedCapacity,
		"SpotToSpotConsolidation": &g.SpotToSpotConsolidation,
		"NodeOverlay":             &g.NodeOverlay,
		"StaticCapacity":          &g.StaticCapacity,
		"CapacityBuffer":          &g.CapacityBuffer,
		"AnticipateReplicaSets":   &g.AnticipateReplicaSets,
	}
}

func gateNames() []string {
	var g FeatureGates
	names := make([]string, 0, 7)
	for n := range g.fields() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseFeatureGates reads "Name=bool,..." on top of the defaults.
func ParseFeatureGates(s string) (FeatureGates, error) {
	g := DefaultFeatureGates()
	if err := g.Set(s); err != nil {
		return FeatureGates{}, err
	}
	return g, nil
}

// Set applies "Name=bool,..." to g. Malformed pairs are errors; unknown names
// are skipped.
func (g *FeatureGates) Set(s string) error {
	fields := g.fields()
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("feature gate %q: missing bool value", pair)
		}
		b, err := parseBool(value)
		if err != nil {
			return fmt.Errorf("feature gate %q: invalid value %q", strings.TrimSpace(name), value)
		}
		if f, known := fields[strings.TrimSpace(name)]; known {
			*f = b
		}
	}
	return nil
}

// String renders every gate, sorted by name.
func (g *FeatureGates) String() string {
	if g == nil {
		return ""
	}
	fields := g.fields()
	parts := make([]string, 0, len(fields))
	for _, n := range gateNames() {
		parts = append(parts, fmt.Sprintf("%s=%t", n, *fields[n]))
	}
	return strings.Join(parts, ",")
}
