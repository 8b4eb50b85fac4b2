// Package cli owns what the read-only `karpenter` command line answers and
// how it renders it: the objects it lists from a kubeconfig (or reads back
// from a saved snapshot file), the solver and disruption snapshots it builds
// from them with the same builders the controller uses, and the "status",
// "why pod" and "why node" answers as tables, JSON or YAML. It needs no cloud
// credentials and no running controller; instance types come from the kwok
// catalog for KWOKNodeClass pools and are reported as unresolvable otherwise.
package cli
