//go:build tools

// Package anchors pins the versions of upstream Karpenter's own controllers
// that the migration tests and side-by-side benchmarks run as test tools:
// the kwok controller of sigs.k8s.io/karpenter and the AWS controller of
// github.com/aws/karpenter-provider-aws. They are built like kube-apiserver,
// into the tools folder, and never linked into the product. This module is
// separate from hack/tools because their dependency graphs pin other
// k8s.io versions than k8s.io/kubernetes does.
package anchors

import (
	_ "github.com/aws/karpenter-provider-aws/cmd/controller"
	_ "sigs.k8s.io/karpenter/kwok"
)
