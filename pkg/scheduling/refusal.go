package scheduling

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// RefusalKind says what kind of check refused a pod. Callers that explain
// or compare verdicts (the "why" output, disruption) switch on it instead
// of parsing PlacementError.Reason.
type RefusalKind string

const (
	// RefusalInvalidPod: the pod's own spec cannot be interpreted (a node
	// affinity or topology term that does not parse). Detail says why.
	RefusalInvalidPod RefusalKind = "InvalidPod"
	// RefusalRequirementMismatch: the pod's requirement on Key conflicts
	// with the NodePool's or node's (NodeRequirement, PodRequirement).
	RefusalRequirementMismatch RefusalKind = "RequirementMismatch"
	// RefusalUnknownLabel: the pod requires Key, which neither the owner
	// nor its instance types define.
	RefusalUnknownLabel RefusalKind = "UnknownLabel"
	// RefusalTaintNotTolerated: the pod does not tolerate Taint.
	RefusalTaintNotTolerated RefusalKind = "TaintNotTolerated"
	// RefusalLimitExceeded: the NodePool's limit on Resource leaves no room
	// (Limit, Used and Remaining are the pool's figures, Needed what the
	// smallest fitting instance type would add).
	RefusalLimitExceeded RefusalKind = "LimitExceeded"
	// RefusalNoInstanceType: no instance type of the pool matches the
	// combined requirements (Detail lists the pod-side ones).
	RefusalNoInstanceType RefusalKind = "NoInstanceType"
	// RefusalNoOffering: no instance type has an offering that is available
	// (or in a domain the topology allows).
	RefusalNoOffering RefusalKind = "NoOffering"
	// RefusalResources: nothing has room for the pod's Requests (for an
	// existing node, Resource is the first one short).
	RefusalResources RefusalKind = "Resources"
	// RefusalMinValues: the instance types left cannot meet minValues on Key.
	RefusalMinValues RefusalKind = "MinValues"
	// RefusalHostPort: HostPort/Protocol is taken on the node.
	RefusalHostPort RefusalKind = "HostPort"
	// RefusalHostname: the pod requires a hostname a new node cannot have.
	RefusalHostname RefusalKind = "Hostname"
	// RefusalVolume: a volume the pod uses (Volume) or its class cannot be
	// found.
	RefusalVolume RefusalKind = "Volume"
	// RefusalVolumeZone: the zones the pod's Volume allows (PodRequirement)
	// conflict with the NodePool's or node's (NodeRequirement).
	RefusalVolumeZone RefusalKind = "VolumeZone"
	// RefusalVolumeLimit: the node's attach limit for Driver is reached.
	RefusalVolumeLimit RefusalKind = "VolumeLimit"
	// RefusalTopology: a topology spread constraint on Key leaves no domain
	// or would be exceeded.
	RefusalTopology RefusalKind = "Topology"
	// RefusalAffinity: a pod affinity or anti-affinity term on Key cannot be
	// satisfied.
	RefusalAffinity RefusalKind = "Affinity"
	// RefusalNoCapacity: there are neither NodePools nor existing nodes.
	RefusalNoCapacity RefusalKind = "NoCapacity"
)

// refusalError carries a typed refusal through the solver's error returns
// (pod parsing, volumes, topology) to the PlacementError it becomes.
type refusalError struct {
	r PlacementError
}

func (e *refusalError) Error() string { return e.r.Message() }

func refuse(r PlacementError) error { return &refusalError{r: r} }

// refusalOf types an error from the solver's own checks. Errors that are not
// typed refusals are the pod's spec failing to parse. A refusal wrapped with
// more context keeps its kind and fields and shows the whole text.
func refusalOf(err error) PlacementError {
	var re *refusalError
	if errors.As(err, &re) {
		r := re.r
		if msg := err.Error(); msg != r.Message() {
			r.Detail = msg
		}
		return r
	}
	var ie *IncompatibleError
	if errors.As(err, &ie) {
		r := ie.refusal()
		r.Detail = err.Error()
		return r
	}
	return PlacementError{Kind: RefusalInvalidPod, Detail: err.Error()}
}

// refusal types a requirement conflict.
func (e *IncompatibleError) refusal() PlacementError {
	r := PlacementError{Kind: RefusalRequirementMismatch, Key: e.Key, Owner: e.Owner, Detail: e.Msg}
	if e.Undefined {
		r.Kind = RefusalUnknownLabel
	}
	if e.Node != nil {
		n := *e.Node
		r.NodeRequirement = &n
	}
	if e.Pod != nil {
		p := *e.Pod
		r.PodRequirement = &p
	}
	return r
}

// Message renders the refusal from its fields (without the NodePool
// prefix that String adds). Detail, when set, is the full text.
func (e PlacementError) Message() string {
	if e.Detail != "" {
		return e.Detail
	}
	switch e.Kind {
	case RefusalTaintNotTolerated:
		if e.Taint != nil {
			return "did not tolerate taint " + taintString(e.Taint)
		}
	case RefusalLimitExceeded:
		switch e.Resource {
		case ResourceNodes:
			return "nodepool limit on nodes reached" + e.figures()
		case "":
			return "all fitting instance types would exceed the nodepool's limits"
		}
		return "all fitting instance types would exceed the nodepool's limits" + e.figures()
	case RefusalNoOffering:
		return "no instance type with an available offering"
	case RefusalResources:
		if e.Resource != "" {
			return "not enough " + string(e.Resource)
		}
		if e.DaemonSetOverhead {
			return fmt.Sprintf("no instance type has room for requests %s plus daemonset overhead", describeRequests(e.Requests))
		}
		return fmt.Sprintf("no instance type has room for requests %s", describeRequests(e.Requests))
	case RefusalHostPort:
		return fmt.Sprintf("host port %d/%s in use", e.HostPort, e.Protocol)
	case RefusalVolumeLimit:
		return fmt.Sprintf("volume attach limit of %s reached (%d)", e.Driver, e.AttachLimit)
	case RefusalNoCapacity:
		return "no NodePools and no existing nodes"
	}
	return string(e.Kind)
}

// figures renders a limit refusal's numbers, as far as they are known.
func (e PlacementError) figures() string {
	if e.Resource == ResourceNodes {
		if e.Limit != nil {
			return fmt.Sprintf(" (limit %s)", e.Limit.String())
		}
		return ""
	}
	s := " (" + string(e.Resource)
	if e.Needed != nil {
		s += ": needs " + e.Needed.String()
	}
	if e.Remaining != nil {
		s += ", " + e.Remaining.String() + " left"
	}
	if e.Limit != nil {
		s += " of " + e.Limit.String()
	}
	return s + ")"
}

// existingRefusal wraps the first existing node's refusal into the summary
// for all existing nodes: the kind and fields stay the first node's.
func existingRefusal(nodes int, first string, r *PlacementError) PlacementError {
	out := PlacementError{Nodes: nodes, Node: first}
	inner := ""
	if r != nil {
		out = *r
		out.Nodes, out.Node = nodes, first
		inner = first + ": " + r.Message()
	}
	out.Detail = fmt.Sprintf("none of %d fit (first: %s)", nodes, inner)
	return out
}

// quantity returns a copy of q for a refusal's figures.
func quantity(q resource.Quantity) *resource.Quantity { return &q }

// taintCopy keeps a refusal independent of the input's taint slices.
func taintCopy(t *corev1.Taint) *corev1.Taint {
	c := *t
	return &c
}
