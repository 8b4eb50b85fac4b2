// Package cli owns what the read-only `karpenter` command line answers and
// how it renders it: the objects it lists from a kubeconfig (or reads back
// from a saved snapshot file), the solver and disruption snapshots it builds
// from them with the same builder the controller uses (snapshot.Build), and
// the "status", "why pod", "why node" and "simulate" answers as tables, JSON
// or YAML. It needs no running controller. A NodePool's instance types come
// through the cloud provider contract from the provider that supports its
// NodeClass kind: the kwok catalog for KWOKNodeClass pools, EC2 for
// EC2NodeClass pools with the user's AWS configuration (without one, such
// pools are reported as unresolvable).
package cli
