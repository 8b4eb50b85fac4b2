package v1_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// hashBase is a class with every hashed field set, so that each mutation
// below changes (or leaves) a populated value.
func hashBase() *awsv1.EC2NodeClass {
	size := resource.MustParse("80Gi")
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "hashed", Annotations: map[string]string{"a": "b"}},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:              []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			SecurityGroupSelectorTerms:       []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			CapacityReservationSelectorTerms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123"}},
			PlacementGroupSelector:           &awsv1.PlacementGroupSelectorTerm{Name: "training"},
			AssociatePublicIPAddress:         ptr.To(false),
			IPPrefixCount:                    ptr.To[int32](1),
			AMISelectorTerms:                 []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			UserData:                         ptr.To("#!/bin/bash\necho hi"),
			Role:                             "KarpenterNodeRole",
			Tags:                             map[string]string{"team": "platform", "env": "prod"},
			Kubelet: awsv1.KubeletConfiguration{
				"maxPods":        {Raw: []byte(`110`)},
				"systemReserved": {Raw: []byte(`{"cpu":"100m","memory":"100Mi"}`)},
			},
			BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
				{DeviceName: ptr.To("/dev/xvda"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: &size, VolumeType: ptr.To("gp3"), Encrypted: ptr.To(true)}},
				{DeviceName: ptr.To("/dev/xvdb"), EBS: &awsv1.BlockDevice{SnapshotID: ptr.To("snap-0123")}},
			},
			InstanceStorePolicy: ptr.To(awsv1.InstanceStorePolicyRAID0),
			NetworkInterfaces: []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			},
			ConnectionTracking: &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr.To[int32](3600)},
			CPUOptions:         &awsv1.CPUOptions{NestedVirtualization: ptr.To("disabled")},
			DetailedMonitoring: ptr.To(true),
			MetadataOptions: &awsv1.MetadataOptions{HTTPEndpoint: ptr.To("enabled"), HTTPProtocolIPv6: ptr.To("disabled"),
				HTTPPutResponseHopLimit: ptr.To[int64](1), HTTPTokens: ptr.To("required")},
			Context: ptr.To("ctx-1"),
		},
	}
}

func TestHashIsStable(t *testing.T) {
	a, b := hashBase(), hashBase()
	require.Equal(t, a.Hash(nil), a.Hash(nil), "the same object hashes the same twice")
	require.Equal(t, a.Hash(nil), b.Hash(nil), "equal objects hash the same")
	require.NotEmpty(t, a.Hash(nil))
	require.NotEqual(t, a.Hash(nil), (&awsv1.EC2NodeClass{}).Hash(nil))

	// An empty kubelet map is no kubelet configuration at all.
	empty, absent := hashBase(), hashBase()
	empty.Spec.Kubelet, absent.Spec.Kubelet = awsv1.KubeletConfiguration{}, nil
	require.Equal(t, absent.Hash(nil), empty.Hash(nil))
}

// TestHashIgnores: changes whose drift is judged some other way (through
// the resolved status, or not at all) leave the hash alone.
func TestHashIgnores(t *testing.T) {
	for name, mutate := range map[string]func(*awsv1.EC2NodeClass){
		"subnet selector": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-0123"}}
		},
		"security group selector": func(nc *awsv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms[0].Name = "nodes" },
		"capacity reservation selector": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = nil
		},
		"ami selector":      func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "al2023@v20240625" },
		"ip prefix count":   func(nc *awsv1.EC2NodeClass) { nc.Spec.IPPrefixCount = ptr.To[int32](4) },
		"implied amiFamily": func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023) },
		"metadata":          func(nc *awsv1.EC2NodeClass) { nc.Annotations = nil; nc.Labels = map[string]string{"x": "y"} },
		"status": func(nc *awsv1.EC2NodeClass) {
			nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-0123", Zone: "us-east-1a"}}
			nc.Status.InstanceProfile = "profile"
		},
		"slice order": func(nc *awsv1.EC2NodeClass) {
			bdm := nc.Spec.BlockDeviceMappings
			bdm[0], bdm[1] = bdm[1], bdm[0]
			ni := nc.Spec.NetworkInterfaces
			ni[0], ni[1] = ni[1], ni[0]
		},
		"same quantity": func(nc *awsv1.EC2NodeClass) {
			q := resource.MustParse("80Gi")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
	} {
		t.Run(name, func(t *testing.T) {
			base, changed := hashBase(), hashBase()
			mutate(changed)
			assert.Equal(t, base.Hash(nil), changed.Hash(nil))
		})
	}
}

// TestHashCovers: every statically configured field moves the hash.
func TestHashCovers(t *testing.T) {
	for name, mutate := range map[string]func(*awsv1.EC2NodeClass){
		"userData":           func(nc *awsv1.EC2NodeClass) { nc.Spec.UserData = ptr.To("#!/bin/bash\necho bye") },
		"tags value":         func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags["team"] = "ml" },
		"tags key":           func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags["cost-center"] = "42" },
		"role":               func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "OtherRole" },
		"instanceProfile":    func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = ""; nc.Spec.InstanceProfile = ptr.To("profile") },
		"amiFamily resolved": func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To(awsv1.AMIFamilyCustom) },
		"alias family":       func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "bottlerocket@latest" },
		"kubelet value":      func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet["maxPods"] = apiextensionsv1.JSON{Raw: []byte(`58`)} },
		"kubelet nested value": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Kubelet["systemReserved"] = apiextensionsv1.JSON{Raw: []byte(`{"cpu":"200m","memory":"100Mi"}`)}
		},
		"kubelet digits reordered": func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet["maxPods"] = apiextensionsv1.JSON{Raw: []byte(`101`)} },
		"kubelet removed":          func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet = nil },
		"volume size": func(nc *awsv1.EC2NodeClass) {
			q := resource.MustParse("100Gi")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
		"volume type":         func(nc *awsv1.EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeType = ptr.To("io2") },
		"root volume moved":   func(nc *awsv1.EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].RootVolume = false },
		"instanceStorePolicy": func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = nil },
		"networkInterfaces": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces[1].InterfaceType = awsv1.InterfaceTypeInterface
		},
		"connectionTracking":       func(nc *awsv1.EC2NodeClass) { nc.Spec.ConnectionTracking.UDPTimeout = ptr.To[int32](30) },
		"cpuOptions":               func(nc *awsv1.EC2NodeClass) { nc.Spec.CPUOptions.NestedVirtualization = ptr.To("enabled") },
		"detailedMonitoring":       func(nc *awsv1.EC2NodeClass) { nc.Spec.DetailedMonitoring = ptr.To(false) },
		"associatePublicIPAddress": func(nc *awsv1.EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = ptr.To(true) },
		"metadataOptions":          func(nc *awsv1.EC2NodeClass) { nc.Spec.MetadataOptions.HTTPTokens = ptr.To("optional") },
		"context":                  func(nc *awsv1.EC2NodeClass) { nc.Spec.Context = ptr.To("ctx-2") },
		"placementGroupSelector":   func(nc *awsv1.EC2NodeClass) { nc.Spec.PlacementGroupSelector.Name = "other" },
	} {
		t.Run(name, func(t *testing.T) {
			base, changed := hashBase(), hashBase()
			mutate(changed)
			assert.NotEqual(t, base.Hash(nil), changed.Hash(nil))
		})
	}
}

// TestHashConcurrent hashes from many goroutines at once: options shared
// between calls would share one hasher and give wrong values.
func TestHashConcurrent(t *testing.T) {
	classes := []*awsv1.EC2NodeClass{hashBase(), hashBase()}
	classes[1].Spec.UserData = ptr.To("other")
	want := []string{classes[0].Hash(nil), classes[1].Hash(nil)}
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := classes[i%2].Hash(nil); got != want[i%2] {
				errs <- got
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("a concurrent hash came out as %s", got)
	}
}
