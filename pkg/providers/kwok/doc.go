// Package kwok is a simulated cloud provider named "kwok", the counterpart of
// upstream Karpenter's KWOKNodeClass provider. Its "instances" are Node
// objects that it creates itself, the way a kubelet would register, and that
// the kwok controller (started with
// --manage-nodes-with-label-selector=kwok.x-k8s.io/node=fake) then keeps Ready.
//
// Instance types come from a JSON catalog (see CatalogEntry for the format):
// the built-in "default" catalog is AWS-shaped so that the AWS example
// NodePools work unchanged, and "upstream-kwok" reproduces upstream kwok's
// catalog so both implementations can be compared on identical offerings.
// Faults (insufficient capacity, create errors, slow or missing registration)
// can be injected to exercise the controllers' error paths.
package kwok
