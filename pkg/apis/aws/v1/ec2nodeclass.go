package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is the AWS half of a node template: a NodePool says which
// capacity may be bought, the EC2NodeClass it references says how to launch it.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EC2NodeClassSpec   `json:"spec,omitempty"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClass.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is everything the provider needs to turn a NodeClaim into an
// EC2 launch. Cross-field rules live on the type because CEL needs to see the
// AMI terms and amiFamily together.
//
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms find the subnets instances may launch into; terms
	// are ORed, the fields of one term ANDed.
	// The id rule uses all() rather than exists(): it only fires when every
	// term mixes id with tags. Upstream ships it that way and we match it.
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.all(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms" hash:"ignore"`

	// SecurityGroupSelectorTerms find the security groups attached to every
	// instance. Same all() quirk as subnets for the id and name rules.
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms" hash:"ignore"`

	// CapacityReservationSelectorTerms find On-Demand Capacity Reservations
	// and Capacity Blocks this class may launch into. Same all() quirk.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems:=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty" hash:"ignore"`

	// PlacementGroupSelector names one existing placement group (by name or
	// by id) that every instance of this class launches into.
	// +optional
	PlacementGroupSelector *PlacementGroupSelectorTerm `json:"placementGroupSelector,omitempty"`

	// AssociatePublicIPAddress sets whether the primary interface gets a
	// public IPv4 address; unset leaves it to the subnet's setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`

	// IPPrefixCount is how many IP prefixes to attach to each interface
	// Karpenter creates (IPv4, or IPv6 in IPv6 clusters).
	// +kubebuilder:validation:Minimum:=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty" hash:"ignore"`

	// AMISelectorTerms choose the image. Unlike the other selectors these
	// rules use exists(): any single offending term is rejected. An alias
	// term must stand alone.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms" hash:"ignore"`

	// AMIFamily picks the user-data format and default block devices. It can
	// be inferred from an alias term; without one it is required.
	// +kubebuilder:validation:Enum:={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty" hash:"ignore"`

	// UserData is merged with the bootstrap configuration Karpenter
	// generates; its format depends on the AMI family.
	// +optional
	UserData *string `json:"userData,omitempty"`

	// Role is the IAM role for nodes; Karpenter manages an instance profile
	// for it. Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:message="role cannot be empty",rule="self != ''"
	// +optional
	Role string `json:"role,omitempty"`

	// InstanceProfile is a pre-existing instance profile used as is, for
	// clusters where Karpenter may not call IAM.
	// +kubebuilder:validation:XValidation:message="instanceProfile cannot be empty",rule="self != ''"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// Tags go on every EC2 resource launched for this class. Keys Karpenter
	// uses for its own bookkeeping are refused so users cannot spoof them.
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k !='eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster') )"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k !='karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter-go.io/",rule="self.all(k, !k.startsWith('karpenter-go.io/'))"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// Kubelet is kubelet configuration in upstream's field names. It is an
	// open map: the API server keeps any field and the controller validates
	// it, so new kubelet fields need no CRD change.
	// +optional
	Kubelet KubeletConfiguration `json:"kubelet,omitempty" hash:"ignore"`

	// BlockDeviceMappings replace the AMI family's default volumes.
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// InstanceStorePolicy says what to do with local NVMe instance store.
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`

	// NetworkInterfaces lays out the interfaces of each instance, e.g. to add
	// EFA-only interfaces. Empty means one default interface.
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include a primary interface with interfaceType='interface'",rule="self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card",rule="self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))"
	// +kubebuilder:validation:MaxItems:=150
	// +optional
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`

	// ConnectionTracking sets idle timeouts on the interfaces Karpenter
	// creates; only Nitro instance types honour it.
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`

	// CPUOptions toggles CPU features at launch.
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`

	// DetailedMonitoring turns on 1-minute CloudWatch metrics.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// MetadataOptions configure IMDS on launched instances. The defaults
	// (IMDSv2 only, hop limit 1) keep pods from reaching node credentials.
	// +kubebuilder:default={httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// Context is EC2 Fleet's reserved Context field, passed through.
	// +optional
	Context *string `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or by id.
type SubnetSelectorTerm struct {
	// Tags match subnet tags; "*" matches any value of a key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a subnet id.
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	// Tags match security group tags; "*" matches any value of a key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a security group id.
	// +kubebuilder:validation:Pattern="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the group name (GroupName), not the Name tag.
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations.
type CapacityReservationSelectorTerm struct {
	// Tags match reservation tags; "*" matches any value of a key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a capacity reservation id.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the 12-digit account that owns the reservation, for
	// reservations shared from another account.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria selects open or targeted reservations.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// PlacementGroupSelectorTerm names a placement group by name or by id.
//
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['name', 'id']",rule="has(self.name) || has(self.id)"
// +kubebuilder:validation:XValidation:message="'name' and 'id' are mutually exclusive",rule="!(has(self.name) && has(self.id))"
type PlacementGroupSelectorTerm struct {
	// Name is the placement group name.
	// +kubebuilder:validation:MinLength:=1
	// +optional
	Name string `json:"name,omitempty"`
	// ID is the placement group id.
	// +kubebuilder:validation:Pattern:="^pg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
}

// AMISelectorTerm selects images. An alias picks an EKS-optimized image by
// family and version; the other fields search EC2 or SSM.
type AMISelectorTerm struct {
	// Alias is "family@version", e.g. al2023@latest or al2023@v20240625.
	// Windows families only publish "latest".
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags match image tags; "*" matches any value of a key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is an image id.
	// +kubebuilder:validation:Pattern="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the image name (not the Name tag); wildcards allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner restricts a name or tag search to account ids, "self",
	// "amazon" or "aws-marketplace".
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is an SSM parameter name or ARN holding an image id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is kubelet configuration keyed by upstream's
// KubeletConfiguration JSON field names. Kept open (any key, any value) so
// the CRD never lags behind the kubelet; the nodeclass controller checks it.
//
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Type=object
type KubeletConfiguration map[string]apiextensionsv1.JSON

// MetadataOptions mirrors the launch template's instance metadata options.
type MetadataOptions struct {
	// HTTPEndpoint turns the metadata endpoint on or off.
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 turns the IPv6 metadata endpoint on or off.
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit bounds how many hops a metadata token
	// response travels; 1 keeps it on the host.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens "required" enforces IMDSv2 session tokens.
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping is one volume attached at launch.
type BlockDeviceMapping struct {
	// DeviceName is the device path, e.g. /dev/xvda.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume. Its rules sit on this field rather than on
	// the type because gofmt rewrites '' in type doc comments.
	// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
	// +kubebuilder:validation:XValidation:message="snapshotID must be set when volumeInitializationRate is set",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the volume that holds kubelet's root dir; its size
	// becomes the node's ephemeral-storage.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume definition.
type BlockDevice struct {
	// DeleteOnTermination removes the volume with the instance.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS provisioned for gp3, io1 and io2.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID is the KMS key (id, alias or ARN) used for encryption.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID restores the volume from a snapshot.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput in MiB/s for gp3.
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeInitializationRate (MiB/s) speeds up hydrating a volume from
	// its snapshot.
	// +kubebuilder:validation:Minimum:=100
	// +kubebuilder:validation:Maximum:=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
	// VolumeSize in Gi, G, Ti or T. The pattern bounds it to what EBS allows.
	// +kubebuilder:validation:Pattern:="^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type:=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty" hash:"string"`
	// VolumeType is the EBS volume type.
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how local instance-store disks are used.
//
// +kubebuilder:validation:Enum:={RAID0}
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all instance-store disks into one array
// and puts kubelet and container storage on it.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// NetworkInterface places one interface on a network card.
type NetworkInterface struct {
	// NetworkCardIndex is the card the interface attaches to.
	// +kubebuilder:validation:Minimum:=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`
	// DeviceIndex is the attachment slot on that card.
	// +kubebuilder:validation:Minimum:=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`
	// InterfaceType is "interface" (ENA, optionally with EFA) or "efa-only".
	// +kubebuilder:validation:Enum:={interface,efa-only}
	// +required
	InterfaceType InterfaceType `json:"interfaceType"`
}

// InterfaceType is the kind of a network interface.
type InterfaceType string

const (
	// InterfaceTypeInterface is a regular ENA interface.
	InterfaceTypeInterface InterfaceType = "interface"
	// InterfaceTypeEFAOnly is an interface that carries only EFA traffic.
	InterfaceTypeEFAOnly InterfaceType = "efa-only"
)

// ConnectionTracking holds connection-tracking idle timeouts in seconds.
// Ranges are EC2's own limits.
//
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
type ConnectionTracking struct {
	// TCPEstablishedTimeout for idle established TCP connections.
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// UDPStreamTimeout for idle UDP flows that saw more than one exchange.
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// UDPTimeout for idle one-way or single-exchange UDP flows.
	// +kubebuilder:validation:Minimum:=30
	// +kubebuilder:validation:Maximum:=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions are CPU features requested at launch.
type CPUOptions struct {
	// NestedVirtualization, when enabled, limits launches to instance types
	// that support it.
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}
