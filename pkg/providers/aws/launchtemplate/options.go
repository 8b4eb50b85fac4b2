package launchtemplate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
)

// Options are everything one launch template holds. Its name is their
// hash, so equal options share a template and any change makes a new one.
// Only plain values: hashstructure skips unexported fields, so a
// resource.Quantity would hash the same whatever its size.
type Options struct {
	ClusterName   string
	NodeClassName string
	ImageID       string
	// UserData is base64, as the launch template carries it.
	UserData                 string
	BlockDeviceMappings      []BlockDeviceMapping
	MetadataOptions          MetadataOptions
	InstanceProfile          string
	SecurityGroupIDs         []string
	DetailedMonitoring       bool
	AssociatePublicIPAddress *bool
	Tags                     map[string]string
	// CapacityReservation says which capacity reservations the template's
	// launches may use; part of the name, so a template targeting a
	// reservation never serves another launch.
	CapacityReservation CapacityReservation
	// Interface are the primary interface's address and connection
	// tracking settings.
	Interface InterfaceOptions
	// NestedVirtualization is the class's cpuOptions.nestedVirtualization
	// ("" leaves the template silent).
	NestedVirtualization string
	// EFACount: see Launch.
	EFACount int
	// Layout is the class's spec.networkInterfaces: when set, the
	// instance gets exactly these interfaces, whatever the NodeClaim asks
	// (EFACount is then unused), as upstream.
	Layout []InterfaceLayout
	// Tenancy: see Launch.
	Tenancy string
	// PlacementGroupID and PartitionNumber: see Launch.
	PlacementGroupID string
	PartitionNumber  int32
}

// InterfaceLayout is one interface of the class's layout: its network
// card, its device index on that card and its type (interface or
// efa-only).
type InterfaceLayout struct {
	Card, Device int32
	Type         string
}

// InterfaceOptions are the settings that live on the primary network
// interface: spec.ipPrefixCount as IPv4 prefixes, or IPv6 prefixes in an
// IPv6 cluster (whose primary interface also gets a primary IPv6 address),
// and spec.connectionTracking.
type InterfaceOptions struct {
	IPv4PrefixCount       *int32
	IPv6PrefixCount       *int32
	IPv6                  bool
	TCPEstablishedTimeout *int32
	UDPStreamTimeout      *int32
	UDPTimeout            *int32
}

// needed: the template must describe its primary interface.
func (i InterfaceOptions) needed() bool {
	return i.IPv4PrefixCount != nil || i.IPv6PrefixCount != nil || i.IPv6 || i.connectionTracking()
}

func (i InterfaceOptions) connectionTracking() bool {
	return i.TCPEstablishedTimeout != nil || i.UDPStreamTimeout != nil || i.UDPTimeout != nil
}

// interfaceOptions resolves the class's interface settings for a cluster
// whose kube-dns address is dns: an IPv6 address means an IPv6 cluster.
func interfaceOptions(nodeClass *awsv1.EC2NodeClass, dns string) InterfaceOptions {
	var out InterfaceOptions
	if ip := net.ParseIP(dns); ip != nil && ip.To4() == nil {
		out.IPv6 = true
		out.IPv6PrefixCount = nodeClass.Spec.IPPrefixCount
	} else {
		out.IPv4PrefixCount = nodeClass.Spec.IPPrefixCount
	}
	if ct := nodeClass.Spec.ConnectionTracking; ct != nil {
		out.TCPEstablishedTimeout, out.UDPStreamTimeout, out.UDPTimeout = ct.TCPEstablishedTimeout, ct.UDPStreamTimeout, ct.UDPTimeout
	}
	return out
}

// CapacityReservation is a launch template's capacity reservation
// targeting. With an ID, launches go only into that reservation
// (preference capacity-reservations-only), and a capacity block also needs
// the capacity-block market type. Without one, Preference "none" keeps
// launches out of open reservations the cluster did not select (the
// ReservedCapacity gate on, as upstream), and "" leaves the template silent
// (EC2's default, open).
type CapacityReservation struct {
	ID         string
	Type       string
	Preference string
}

// Capacity reservation preferences a template can carry.
const (
	CapacityReservationPreferenceNone = "none"
	CapacityReservationPreferenceOnly = "capacity-reservations-only"
)

// BlockDeviceMapping is one EBS volume, its size in GiB.
type BlockDeviceMapping struct {
	DeviceName               string
	VolumeSizeGiB            *int32
	VolumeType               *string
	Encrypted                *bool
	DeleteOnTermination      *bool
	IOPS                     *int32
	Throughput               *int32
	KMSKeyID                 *string
	SnapshotID               *string
	VolumeInitializationRate *int32
}

// MetadataOptions are the instance metadata service settings.
type MetadataOptions struct {
	HTTPEndpoint            string
	HTTPProtocolIPv6        string
	HTTPPutResponseHopLimit int32
	HTTPTokens              string
}

// DefaultMetadataOptions are upstream's (and the CRD's) defaults: IMDSv2
// only, one hop, so pods cannot reach the node's credentials.
var DefaultMetadataOptions = MetadataOptions{
	HTTPEndpoint:            "enabled",
	HTTPProtocolIPv6:        "disabled",
	HTTPPutResponseHopLimit: 1,
	HTTPTokens:              "required",
}

// Cluster is what every node of the cluster bootstraps with.
type Cluster struct {
	Name     string
	Endpoint string
	// CABundle is base64 PEM; CIDR is the service CIDR (AL2023 needs it);
	// DNS is kube-dns's ClusterIP, the default clusterDNS.
	CABundle string
	CIDR     string
	DNS      string
}

// Launch is what differs per launch: the image, the node's labels and
// taints, the max-pods of the instance types sharing the template, and the
// tags of the launched resources.
type Launch struct {
	ImageID string
	Labels  map[string]string
	Taints  []corev1.Taint
	// MaxPods is the instance types' pod capacity; the class's
	// kubelet.maxPods, when set, wins.
	MaxPods *int32
	// Tags are the launch's resource tags (§2.5 of the inventory: the
	// class's tags, cluster ownership, NodePool, EKS cluster name, class).
	Tags map[string]string
	// BottlerocketDefaultMountPaths: see bootstrap.Options.
	BottlerocketDefaultMountPaths bool
	// CapacityReservation is the template's reservation targeting.
	CapacityReservation CapacityReservation
	// EFACount is how many EFA interfaces the instance gets, one per
	// network card: the instance types' EFA capacity when the NodeClaim
	// asks for vpc.amazonaws.com/efa, else 0.
	EFACount int
	// Tenancy is the instances' tenancy: "dedicated" when the NodeClaim
	// allows only karpenter.k8s.aws/instance-tenancy=dedicated, else ""
	// (EC2's default, shared).
	Tenancy string
	// PlacementGroupID is the class's placement group ("" for none), and
	// PartitionNumber the partition of a partition group the NodeClaim
	// pins (0 lets EC2 choose).
	PlacementGroupID string
	PartitionNumber  int32
}

// Resolve turns a ready EC2NodeClass and one launch into template options:
// the family's user data, its default block devices unless the class
// names its own, metadata options with defaults, and the profile and
// security groups from the class's status.
func Resolve(ctx context.Context, nodeClass *awsv1.EC2NodeClass, cluster Cluster, launch Launch) (*Options, error) {
	if launch.ImageID == "" {
		return nil, errors.New("resolving launch template: no image id")
	}
	if len(nodeClass.Status.SecurityGroups) == 0 {
		return nil, errors.New("resolving launch template: no security groups are present in the status")
	}
	if nodeClass.Status.InstanceProfile == "" {
		return nil, errors.New("resolving launch template: no instance profile is present in the status")
	}
	family := nodeClass.AMIFamily()
	userData, err := bootstrap.UserData(ctx, bootstrap.Options{
		Family:                        family,
		ClusterName:                   cluster.Name,
		ClusterEndpoint:               cluster.Endpoint,
		CABundle:                      cluster.CABundle,
		ClusterCIDR:                   cluster.CIDR,
		Kubelet:                       bootstrap.ResolveKubelet(nodeClass.Spec.Kubelet, cluster.DNS, launch.MaxPods),
		Labels:                        launch.Labels,
		Taints:                        launch.Taints,
		InstanceStorePolicy:           nodeClass.Spec.InstanceStorePolicy,
		CustomUserData:                nodeClass.Spec.UserData,
		BottlerocketDefaultMountPaths: launch.BottlerocketDefaultMountPaths,
	})
	if err != nil {
		return nil, fmt.Errorf("resolving launch template user data: %w", err)
	}
	bdms, err := blockDeviceMappings(family, nodeClass.Spec.BlockDeviceMappings)
	if err != nil {
		return nil, err
	}
	sgs := make([]string, 0, len(nodeClass.Status.SecurityGroups))
	for _, sg := range nodeClass.Status.SecurityGroups {
		sgs = append(sgs, sg.ID)
	}
	sort.Strings(sgs)
	tags := map[string]string{}
	for k, v := range launch.Tags {
		tags[k] = v
	}
	return &Options{
		ClusterName:              cluster.Name,
		NodeClassName:            nodeClass.Name,
		ImageID:                  launch.ImageID,
		UserData:                 base64.StdEncoding.EncodeToString([]byte(userData)),
		BlockDeviceMappings:      bdms,
		MetadataOptions:          metadataOptions(nodeClass.Spec.MetadataOptions),
		InstanceProfile:          nodeClass.Status.InstanceProfile,
		SecurityGroupIDs:         sgs,
		DetailedMonitoring:       aws.ToBool(nodeClass.Spec.DetailedMonitoring),
		AssociatePublicIPAddress: nodeClass.Spec.AssociatePublicIPAddress,
		Tags:                     tags,
		CapacityReservation:      launch.CapacityReservation,
		Interface:                interfaceOptions(nodeClass, cluster.DNS),
		NestedVirtualization:     nestedVirtualization(nodeClass),
		EFACount:                 launch.EFACount,
		Layout:                   layout(nodeClass.Spec.NetworkInterfaces),
		Tenancy:                  launch.Tenancy,
		PlacementGroupID:         launch.PlacementGroupID,
		PartitionNumber:          launch.PartitionNumber,
	}, nil
}

// layout is the class's interface layout, nil when it sets none.
func layout(nis []*awsv1.NetworkInterface) []InterfaceLayout {
	var out []InterfaceLayout
	for _, ni := range nis {
		if ni != nil {
			out = append(out, InterfaceLayout{Card: ni.NetworkCardIndex, Device: ni.DeviceIndex, Type: string(ni.InterfaceType)})
		}
	}
	return out
}

func nestedVirtualization(nodeClass *awsv1.EC2NodeClass) string {
	if nodeClass.Spec.CPUOptions == nil {
		return ""
	}
	return aws.ToString(nodeClass.Spec.CPUOptions.NestedVirtualization)
}

func metadataOptions(in *awsv1.MetadataOptions) MetadataOptions {
	out := DefaultMetadataOptions
	if in == nil {
		return out
	}
	if in.HTTPEndpoint != nil {
		out.HTTPEndpoint = *in.HTTPEndpoint
	}
	if in.HTTPProtocolIPv6 != nil {
		out.HTTPProtocolIPv6 = *in.HTTPProtocolIPv6
	}
	if in.HTTPPutResponseHopLimit != nil {
		out.HTTPPutResponseHopLimit = int32(*in.HTTPPutResponseHopLimit)
	}
	if in.HTTPTokens != nil {
		out.HTTPTokens = *in.HTTPTokens
	}
	return out
}

// DefaultBlockDeviceMappings are each family's volumes when the class
// names none: a 20Gi encrypted gp3 root for AL2 and AL2023, a 4Gi OS plus
// 20Gi data volume for Bottlerocket, a 50Gi root for Windows, and nothing
// for Custom (the image's own mappings apply).
func DefaultBlockDeviceMappings(family string) []BlockDeviceMapping {
	gp3 := func(device string, gib int32) BlockDeviceMapping {
		return BlockDeviceMapping{DeviceName: device, VolumeSizeGiB: aws.Int32(gib), VolumeType: aws.String("gp3"), Encrypted: aws.Bool(true)}
	}
	switch family {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023:
		return []BlockDeviceMapping{gp3("/dev/xvda", 20)}
	case awsv1.AMIFamilyBottlerocket:
		return []BlockDeviceMapping{gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)}
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return []BlockDeviceMapping{gp3("/dev/sda1", 50)}
	}
	return nil
}

func blockDeviceMappings(family string, in []*awsv1.BlockDeviceMapping) ([]BlockDeviceMapping, error) {
	if len(in) == 0 {
		return DefaultBlockDeviceMappings(family), nil
	}
	out := make([]BlockDeviceMapping, 0, len(in))
	for i, b := range in {
		if b == nil {
			continue
		}
		m := BlockDeviceMapping{DeviceName: aws.ToString(b.DeviceName)}
		if e := b.EBS; e != nil {
			if e.VolumeSize != nil {
				gib, err := GiB(*e.VolumeSize)
				if err != nil {
					return nil, fmt.Errorf("blockDeviceMappings[%d]: %w", i, err)
				}
				m.VolumeSizeGiB = aws.Int32(gib)
			}
			m.VolumeType, m.Encrypted, m.DeleteOnTermination = e.VolumeType, e.Encrypted, e.DeleteOnTermination
			m.KMSKeyID, m.SnapshotID, m.VolumeInitializationRate = e.KMSKeyID, e.SnapshotID, e.VolumeInitializationRate
			if e.IOPS != nil {
				m.IOPS = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				m.Throughput = aws.Int32(int32(*e.Throughput))
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// GiB rounds a volume size up to whole GiB, the unit EBS takes.
func GiB(q resource.Quantity) (int32, error) {
	bytes := q.Value()
	if bytes <= 0 {
		return 0, fmt.Errorf("volume size %s must be positive", q.String())
	}
	gib := math.Ceil(float64(bytes) / (1 << 30))
	if gib > math.MaxInt32 {
		return 0, fmt.Errorf("volume size %s is too large", q.String())
	}
	return int32(gib), nil
}

// hashOptions: security groups and devices are sets (their order changes
// nothing in EC2). It returns fresh options for each call: Hash stores its
// hasher in the options it is given, so options shared between goroutines
// would share one hasher and give concurrent Ensure calls different names
// for one template.
func hashOptions() *hashstructure.HashOptions {
	return &hashstructure.HashOptions{SlicesAsSets: true}
}

// Name is the launch template's name: the prefix and the options' hash.
func Name(o *Options) (string, error) {
	h, err := hashstructure.Hash(o, hashstructure.FormatV2, hashOptions())
	if err != nil {
		return "", fmt.Errorf("hashing launch template options: %w", err)
	}
	return fmt.Sprintf("%s/%d", awsv1.LaunchTemplateNamePrefix, h), nil
}

// requestData is the CreateLaunchTemplate payload for o.
func (o *Options) requestData() *ec2types.RequestLaunchTemplateData {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(o.ImageID),
		UserData:           aws.String(o.UserData),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(o.InstanceProfile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(o.DetailedMonitoring)},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(o.MetadataOptions.HTTPEndpoint),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(o.MetadataOptions.HTTPProtocolIPv6),
			HttpPutResponseHopLimit: aws.Int32(o.MetadataOptions.HTTPPutResponseHopLimit),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(o.MetadataOptions.HTTPTokens),
		},
	}
	for _, b := range o.BlockDeviceMappings {
		data.BlockDeviceMappings = append(data.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMappingRequest{
			DeviceName: aws.String(b.DeviceName),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				VolumeSize:               b.VolumeSizeGiB,
				VolumeType:               ec2types.VolumeType(aws.ToString(b.VolumeType)),
				Encrypted:                b.Encrypted,
				DeleteOnTermination:      b.DeleteOnTermination,
				Iops:                     b.IOPS,
				Throughput:               b.Throughput,
				KmsKeyId:                 b.KMSKeyID,
				SnapshotId:               b.SnapshotID,
				VolumeInitializationRate: b.VolumeInitializationRate,
			},
		})
	}
	switch {
	case len(o.Layout) > 0:
		data.NetworkInterfaces = o.layoutInterfaces()
	case o.EFACount > 0:
		data.NetworkInterfaces = o.efaInterfaces()
	case o.AssociatePublicIPAddress != nil || o.Interface.needed():
		// The public-IP flag, prefixes and connection tracking live on an
		// interface, and EC2 refuses template-level groups next to
		// interfaces: all go on the primary.
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{o.primaryInterface()}
	default:
		data.SecurityGroupIds = o.SecurityGroupIDs
	}
	if o.Tenancy != "" || o.PlacementGroupID != "" {
		data.Placement = &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.Tenancy(o.Tenancy)}
		if o.PlacementGroupID != "" {
			data.Placement.GroupId = aws.String(o.PlacementGroupID)
		}
		if o.PartitionNumber > 0 {
			data.Placement.PartitionNumber = aws.Int32(o.PartitionNumber)
		}
	}
	if o.NestedVirtualization != "" {
		data.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(o.NestedVirtualization)}
	}
	switch cr := o.CapacityReservation; {
	case cr.ID != "":
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr.ID)},
		}
		// EC2 launches into a capacity block only with its market type.
		if cr.Type == string(awsv1.CapacityReservationTypeCapacityBlock) {
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}
	case cr.Preference != "":
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreference(cr.Preference),
		}
	}
	if len(o.Tags) > 0 {
		data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(o.Tags)},
		}
	}
	return data
}

// primaryInterface is card 0's device 0 with the settings that live on
// the primary: the groups, the public-IP flag, prefixes, the IPv6 address
// and connection tracking.
func (o *Options) primaryInterface() ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	primary := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
		DeviceIndex:              aws.Int32(0),
		AssociatePublicIpAddress: o.AssociatePublicIPAddress,
		Groups:                   o.SecurityGroupIDs,
		Ipv4PrefixCount:          o.Interface.IPv4PrefixCount,
		Ipv6PrefixCount:          o.Interface.IPv6PrefixCount,
	}
	if o.Interface.IPv6 {
		primary.PrimaryIpv6 = aws.Bool(true)
		primary.Ipv6AddressCount = aws.Int32(1)
	}
	if o.Interface.connectionTracking() {
		primary.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
			TcpEstablishedTimeout: o.Interface.TCPEstablishedTimeout,
			UdpStreamTimeout:      o.Interface.UDPStreamTimeout,
			UdpTimeout:            o.Interface.UDPTimeout,
		}
	}
	return primary
}

// layoutInterfaces are the class's interfaces in its order: the primary
// (card 0, device 0, which the CEL rules require to be an interface)
// carries the primary's settings; every other one its card, device index
// and type, and the groups (EC2 wants them on each interface, EFA-only
// ones included, since EFA traffic is filtered by them too).
func (o *Options) layoutInterfaces() []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	out := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 0, len(o.Layout))
	for _, l := range o.Layout {
		var ni ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
		if l.Card == 0 && l.Device == 0 {
			ni = o.primaryInterface()
		} else {
			ni = ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{DeviceIndex: aws.Int32(l.Device), Groups: o.SecurityGroupIDs}
		}
		ni.NetworkCardIndex = aws.Int32(l.Card)
		ni.InterfaceType = aws.String(l.Type)
		out = append(out, ni)
	}
	return out
}

// efaInterfaces are one EFA interface per network card, as upstream lays
// them out: card 0 holds the primary (device 0), every other card's
// interface is device 1, so the primary stays the one a public address
// goes to. Each carries the groups; EC2 refuses a public address on more
// than one pre-configured interface, which a class asking for one on a
// multi-card EFA type gets as a launch error.
func (o *Options) efaInterfaces() []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	out := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 0, o.EFACount)
	for i := 0; i < o.EFACount; i++ {
		device := int32(1)
		if i == 0 {
			device = 0
		}
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex:         aws.Int32(int32(i)),
			DeviceIndex:              aws.Int32(device),
			InterfaceType:            aws.String(string(ec2types.NetworkInterfaceTypeEfa)),
			Groups:                   o.SecurityGroupIDs,
			AssociatePublicIpAddress: o.AssociatePublicIPAddress,
		}
		if o.Interface.IPv6 {
			ni.PrimaryIpv6 = aws.Bool(true)
			ni.Ipv6AddressCount = aws.Int32(1)
		}
		out = append(out, ni)
	}
	return out
}

// templateTags are the tags on the template itself: the launch's tags plus
// the cluster and class keys DeleteAll and Hydrate select by.
func (o *Options) templateTags() []ec2types.Tag {
	tags := map[string]string{}
	for k, v := range o.Tags {
		tags[k] = v
	}
	tags[ClusterTagKey] = o.ClusterName
	tags[awsv1.NodeClassTagKey] = o.NodeClassName
	return ec2Tags(tags)
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, len(keys))
	for i, k := range keys {
		out[i] = ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])}
	}
	return out
}
