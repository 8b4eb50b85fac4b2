package v1alpha1

import "k8s.io/apimachinery/pkg/util/sets"

// Labels the simulated provider puts on its Nodes. The instance-* keys make
// fake instance types selectable like real ones; the kwok.x-k8s.io/node
// label and annotation hand the Node to the KWOK controller, which plays
// kubelet for it.
const (
	LabelInstanceSize   = Group + "/instance-size"
	LabelInstanceFamily = Group + "/instance-family"
	LabelInstanceCPU    = Group + "/instance-cpu"
	LabelInstanceMemory = Group + "/instance-memory"

	// LabelNodeClass carries the KWOKNodeClass name on NodeClaims and Nodes.
	LabelNodeClass = Group + "/kwoknodeclass"

	// KWOKNodeLabelKey / KWOKNodeLabelValue mark a Node as fake for KWOK.
	KWOKNodeLabelKey   = "kwok.x-k8s.io/node"
	KWOKNodeLabelValue = "fake"
	// KWOKPartitionLabelKey spreads fake Nodes over KWOK controller
	// partitions so one controller is not the bottleneck.
	KWOKPartitionLabelKey = "kwok-partition"
	// NodeViewerPriceLabelKey exposes the offering price to eks-node-viewer.
	NodeViewerPriceLabelKey = "eks-node-viewer/instance-price"
)

var (
	// WellKnownLabels are the kwok label keys users may select on although
	// their domain is restricted.
	WellKnownLabels = sets.New(
		LabelInstanceSize,
		LabelInstanceFamily,
		LabelInstanceCPU,
		LabelInstanceMemory,
	)

	// RestrictedLabelDomains are label domains only the provider may set.
	RestrictedLabelDomains = sets.New(Group)
)
