// Package instancetype turns one EC2 DescribeInstanceTypes record and an
// EC2NodeClass into the instance type the solver schedules against: its
// requirements (the karpenter.k8s.aws/* and well-known Kubernetes labels),
// its capacity, and the overhead (kube-reserved, system-reserved and the
// eviction threshold) that the kubelet subtracts before pods can use it.
//
// It is pure computation, with no API calls, cache or clock, and it gives
// the numbers upstream Karpenter's AWS provider gives before any node of the
// type has joined (no discovered capacity). Offerings, prices and caching
// belong to the caller.
package instancetype
