package v1

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/mitchellh/hashstructure/v2"
)

// Hash is the static-drift hash of the class, as a decimal string (the form
// of the karpenter.k8s.aws/ec2nodeclass-hash annotation). A NodeClaim
// launched from the class carries the value it was launched with; when the
// class's value moves on, the NodeClaim has drifted (NodeClassDrift).
//
// What goes in follows upstream: the spec, with the options upstream uses
// (slices are sets, zero and nil fields are skipped, so adding an optional
// API field does not move every hash). Fields tagged hash:"ignore" are left
// out because their drift is judged elsewhere: the subnet, security group,
// capacity reservation and AMI selectors are compared through what they
// resolved to (status), and ipPrefixCount only affects new interfaces.
// amiFamily is hashed as resolved (AMIFamily), so spelling out the family an
// alias already implies is not drift. The kubelet map holds raw JSON bytes,
// which SlicesAsSets would hash as an unordered set of bytes, so it is
// hashed as canonical JSON text instead.
//
// The value is not numerically upstream's: upstream hashes its typed
// kubelet struct (and, in newer releases, the cluster CA bundle). A class
// and NodeClaims stamped by upstream under the same version would be seen
// as drifted; the version annotation is what guards that transition.
func (in *EC2NodeClass) Hash() string {
	h, err := hashstructure.Hash([]any{in.Spec, in.AMIFamily(), canonicalKubelet(in.Spec.Kubelet)},
		hashstructure.FormatV2, hashOptions())
	if err != nil {
		// The spec holds only strings, numbers, bools, maps, slices,
		// pointers and Quantities (hashed through String), which
		// hashstructure always accepts.
		panic(err)
	}
	return strconv.FormatUint(h, 10)
}

// hashOptions are fresh for each call: hashstructure keeps its hasher in
// the options it is given, so options shared between goroutines would mix
// concurrent hashes.
func hashOptions() *hashstructure.HashOptions {
	return &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true}
}

// canonicalKubelet is the kubelet map as JSON with sorted keys at every
// level and no insignificant whitespace, so the same configuration written
// differently hashes the same. Numbers keep their text (UseNumber) so large
// integers do not round through float64. A value that is not JSON (the API
// server never stores one) is kept as its raw text so that it still counts.
func canonicalKubelet(k KubeletConfiguration) string {
	if len(k) == 0 {
		return ""
	}
	m := make(map[string]any, len(k))
	for key, v := range k {
		dec := json.NewDecoder(bytes.NewReader(v.Raw))
		dec.UseNumber()
		var val any
		if err := dec.Decode(&val); err != nil {
			val = string(v.Raw)
		}
		m[key] = val
	}
	out, err := json.Marshal(m)
	if err != nil {
		// Decoded JSON always encodes again.
		panic(err)
	}
	return string(out)
}
