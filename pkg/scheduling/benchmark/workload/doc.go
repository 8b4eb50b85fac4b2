// Package workload rebuilds, in our own code, the pods and the instance-type
// catalogue of upstream Karpenter's scheduling benchmark
// (see shared/bench/scheduling-workload.md), so that our solver can be timed
// and judged on exactly the same input upstream was measured on.
//
// It owns three things:
//   - Stream: the single seeded random stream all benchmark cases draw from,
//     and the canonical case order that fixes which pods each case gets;
//   - Catalogue: the 400 synthetic instance types, in a solver-neutral form;
//   - LowerBound: a cost floor for a set of pods, used to report how far a
//     plan's price is from the best possible.
//
// Fingerprint reduces a pod list to the SHA-256 the spec publishes, which is
// how the tests prove the pods are identical to upstream's.
package workload
