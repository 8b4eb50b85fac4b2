// Package nodeclasshash owns the arithmetic of the EC2NodeClass static-drift
// hash (the karpenter.k8s.aws/ec2nodeclass-hash annotation): the shapes that
// are hashed and the hashstructure options. The value must equal upstream's,
// so that NodeClaims launched by upstream Karpenter are not read as drifted
// after a switch to this controller, and the other way round.
//
// hashstructure mixes every struct's Go type name and every field's Go name
// into the hash, hashes integers by width and, in FormatV2, re-mixes the
// running value after each field it does not skip, so field order counts.
// The API types of pkg/apis/aws/v1 differ from upstream's in names and order
// (PlacementGroupSelectorTerm, string selector fields, the place of
// connectionTracking and cpuOptions), so the spec is copied into the mirror
// types below first. Their type names, field names, field types, field order
// and hash tags are upstream's; do not rename or reorder anything. Fields
// upstream tags hash:"ignore" are left out: an ignored field contributes
// nothing wherever it sits.
//
// This package imports nothing of the API package so that the API package
// can build the mirror.
package nodeclasshash

import (
	"strconv"

	"github.com/mitchellh/hashstructure/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// EC2NodeClassSpec mirrors the hashed fields of upstream's EC2NodeClassSpec.
type EC2NodeClassSpec struct {
	PlacementGroupSelector   *PlacementGroupSelector
	AssociatePublicIPAddress *bool
	UserData                 *string
	Role                     string
	InstanceProfile          *string
	Tags                     map[string]string
	BlockDeviceMappings      []*BlockDeviceMapping
	InstanceStorePolicy      *string
	NetworkInterfaces        []*NetworkInterface
	DetailedMonitoring       *bool
	MetadataOptions          *MetadataOptions
	ConnectionTracking       *ConnectionTracking
	Context                  *string
	CPUOptions               *CPUOptions
}

// PlacementGroupSelector mirrors upstream's PlacementGroupSelector, whose
// fields are pointers (an empty name is absent, not "").
type PlacementGroupSelector struct {
	Name *string
	ID   *string
}

// BlockDeviceMapping mirrors upstream's BlockDeviceMapping.
type BlockDeviceMapping struct {
	DeviceName *string
	EBS        *BlockDevice
	RootVolume bool
}

// BlockDevice mirrors upstream's BlockDevice. VolumeSize is hashed as the
// quantity's canonical text, so 1Ti and 1024Gi hash alike.
type BlockDevice struct {
	DeleteOnTermination      *bool
	Encrypted                *bool
	IOPS                     *int64
	KMSKeyID                 *string
	SnapshotID               *string
	Throughput               *int64
	VolumeInitializationRate *int32
	VolumeSize               *resource.Quantity `hash:"string"`
	VolumeType               *string
}

// NetworkInterface mirrors upstream's NetworkInterface. The indexes are
// plain int32, so an index of 0 is skipped like an absent field.
type NetworkInterface struct {
	NetworkCardIndex int32
	DeviceIndex      int32
	InterfaceType    string
}

// MetadataOptions mirrors upstream's MetadataOptions.
type MetadataOptions struct {
	HTTPEndpoint            *string
	HTTPProtocolIPv6        *string
	HTTPPutResponseHopLimit *int64
	HTTPTokens              *string
}

// ConnectionTracking mirrors upstream's ConnectionTracking.
type ConnectionTracking struct {
	TCPEstablishedTimeout *int32
	UDPStreamTimeout      *int32
	UDPTimeout            *int32
}

// CPUOptions mirrors upstream's CPUOptions.
type CPUOptions struct {
	NestedVirtualization *string
}

// Hash is the decimal hash of a class: its spec, the resolved AMI family,
// the cluster CA bundle the controller hands to nodes (nil hashes as "")
// and the kubelet configuration as JSON text (see Kubelet). The four values
// form a list hashed as a set, as upstream does.
func Hash(spec EC2NodeClassSpec, amiFamily string, caBundle *string, kubelet string) string {
	h, err := hashstructure.Hash([]any{spec, amiFamily, caBundle, kubelet}, hashstructure.FormatV2,
		// Fresh options for each call: hashstructure keeps its hasher in the
		// options it is given, so shared options would mix concurrent hashes.
		&hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		// The mirror holds only strings, numbers, bools, maps, slices,
		// pointers and Quantities (hashed through String), which
		// hashstructure always accepts.
		panic(err)
	}
	return strconv.FormatUint(h, 10)
}
