package v1

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/aws/v1/nodeclasshash"
)

// Hash is the static-drift hash of the class, as a decimal string (the form
// of the karpenter.k8s.aws/ec2nodeclass-hash annotation), numerically equal
// to upstream's under hash version EC2NodeClassHashVersion. A NodeClaim
// launched from the class carries the value it was launched with; when the
// class's value moves on, the NodeClaim has drifted (NodeClassDrift).
//
// caBundle is the cluster CA the controller gives nodes when the settings
// name one, else the CA of its own connection to the API server (base64);
// upstream hashes it too, so a CA rotation drifts every node. Callers that
// compare with stamped values must pass the same one the stamps used.
//
// What goes in follows upstream: the spec without the fields whose drift is
// judged through what they resolved to (subnet, security group, capacity
// reservation and AMI selectors) or not at all (ipPrefixCount), the AMI
// family as resolved (spelling out the family an alias implies is not
// drift), and the kubelet map as JSON text. Hash the object as read from
// the API server: the CRD's metadataOptions default is part of the value.
func (in *EC2NodeClass) Hash(caBundle *string) string {
	return nodeclasshash.Hash(hashedSpec(&in.Spec), in.AMIFamily(), caBundle, kubeletText(in.Spec.Kubelet))
}

func hashedSpec(s *EC2NodeClassSpec) nodeclasshash.EC2NodeClassSpec {
	out := nodeclasshash.EC2NodeClassSpec{
		AssociatePublicIPAddress: s.AssociatePublicIPAddress,
		UserData:                 s.UserData,
		Role:                     s.Role,
		InstanceProfile:          s.InstanceProfile,
		Tags:                     s.Tags,
		DetailedMonitoring:       s.DetailedMonitoring,
		Context:                  s.Context,
	}
	if p := s.PlacementGroupSelector; p != nil {
		out.PlacementGroupSelector = &nodeclasshash.PlacementGroupSelector{Name: nonEmpty(p.Name), ID: nonEmpty(p.ID)}
	}
	if s.BlockDeviceMappings != nil {
		out.BlockDeviceMappings = make([]*nodeclasshash.BlockDeviceMapping, len(s.BlockDeviceMappings))
		for i, b := range s.BlockDeviceMappings {
			if b == nil {
				continue
			}
			m := &nodeclasshash.BlockDeviceMapping{DeviceName: b.DeviceName, RootVolume: b.RootVolume}
			if e := b.EBS; e != nil {
				m.EBS = &nodeclasshash.BlockDevice{
					DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
					KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
					VolumeInitializationRate: e.VolumeInitializationRate, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
				}
			}
			out.BlockDeviceMappings[i] = m
		}
	}
	if s.InstanceStorePolicy != nil {
		p := string(*s.InstanceStorePolicy)
		out.InstanceStorePolicy = &p
	}
	if s.NetworkInterfaces != nil {
		out.NetworkInterfaces = make([]*nodeclasshash.NetworkInterface, len(s.NetworkInterfaces))
		for i, n := range s.NetworkInterfaces {
			if n != nil {
				out.NetworkInterfaces[i] = &nodeclasshash.NetworkInterface{
					NetworkCardIndex: n.NetworkCardIndex, DeviceIndex: n.DeviceIndex, InterfaceType: string(n.InterfaceType)}
			}
		}
	}
	if m := s.MetadataOptions; m != nil {
		out.MetadataOptions = &nodeclasshash.MetadataOptions{HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens}
	}
	if c := s.ConnectionTracking; c != nil {
		out.ConnectionTracking = &nodeclasshash.ConnectionTracking{TCPEstablishedTimeout: c.TCPEstablishedTimeout,
			UDPStreamTimeout: c.UDPStreamTimeout, UDPTimeout: c.UDPTimeout}
	}
	if c := s.CPUOptions; c != nil {
		out.CPUOptions = &nodeclasshash.CPUOptions{NestedVirtualization: c.NestedVirtualization}
	}
	return out
}

// nonEmpty is s as the pointer upstream's selector would hold: the API
// field is omitempty, so "" means absent.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// kubeletText is the kubelet map as upstream prints it for the hash:
// encoding/json of the map (keys sorted, each raw value compacted, HTML
// characters escaped), or "null" when there is no entry. The API server
// stores the map with sorted keys at every level, so two spellings of one
// configuration read back from it hash alike.
func kubeletText(k KubeletConfiguration) string {
	if len(k) == 0 {
		return "null"
	}
	out, err := json.Marshal(map[string]apiextensionsv1.JSON(k))
	if err != nil {
		// A value that is not JSON (the API server never stores one) still
		// counts, by its raw text.
		return fmt.Sprint(map[string]apiextensionsv1.JSON(k))
	}
	return string(out)
}
