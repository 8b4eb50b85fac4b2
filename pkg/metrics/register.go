package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	dynamicMu sync.Mutex
	dynamic   = map[string]prometheus.Collector{}
)

// Register puts collectors whose label names are only known at run time
// (the node gauges, the per-kind status metrics) on controller-runtime's
// registry. A collector already registered under the same descriptors is
// replaced by the new one, so that a process that builds its controllers
// twice (tests do) serves the latest.
func Register(cs ...prometheus.Collector) error {
	dynamicMu.Lock()
	defer dynamicMu.Unlock()
	for _, c := range cs {
		name := firstName(c)
		if old, ok := dynamic[name]; ok {
			crmetrics.Registry.Unregister(old)
		}
		if err := crmetrics.Registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
			crmetrics.Registry.Unregister(already.ExistingCollector)
			if err := crmetrics.Registry.Register(c); err != nil {
				return err
			}
		}
		dynamic[name] = c
	}
	return nil
}

// firstName is the descriptor string of a collector's first metric, which
// identifies it among the collectors Register keeps.
func firstName(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	name := ""
	for d := range ch {
		if name == "" {
			name = d.String()
			if desc, err := parseDesc(name); err == nil {
				name = desc.name
			}
		}
	}
	return name
}
