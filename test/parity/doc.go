// Package parity holds whole-system tests of the surface upstream Karpenter
// users carry over unchanged: the metrics upstream's dashboards query,
// NodeOverlays, CapacityBuffers and the handling of DRA pods. Each test runs
// the controller binary against the real local control plane. It is a
// package of its own so that `go test ./...` runs it beside test/e2e.
package parity
