package launchtemplate_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var cluster = launchtemplate.Cluster{
	Name:     "lt-cluster",
	Endpoint: "https://lt-cluster.example",
	CABundle: base64.StdEncoding.EncodeToString([]byte("ca-bundle\n")),
	CIDR:     "10.100.0.0/16",
	DNS:      "10.100.0.10",
}

// readyNodeClass is a class whose status the nodeclass controller has
// resolved: two security groups and a managed profile.
func readyNodeClass(name, family string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       awsv1.EC2NodeClassSpec{AMIFamily: aws.String(family), Role: "node-role"},
		Status: awsv1.EC2NodeClassStatus{
			SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-0000000000000000b"}, {ID: "sg-0000000000000000a"}},
			InstanceProfile: "lt-cluster_123",
		},
	}
}

func launchFor(nodeClass string, pods int32) launchtemplate.Launch {
	return launchtemplate.Launch{
		ImageID: "ami-0123456789abcdef0",
		Labels:  map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"},
		Taints:  []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		MaxPods: &pods,
		Tags: map[string]string{
			"kubernetes.io/cluster/" + cluster.Name: "owned",
			"eks:eks-cluster-name":                  cluster.Name,
			"karpenter.sh/nodepool":                 "default",
			awsv1.NodeClassTagKey:                   nodeClass,
			"team":                                  "web",
		},
	}
}

func resolve(t *testing.T, nc *awsv1.EC2NodeClass, launch launchtemplate.Launch) *launchtemplate.Options {
	t.Helper()
	o, err := launchtemplate.Resolve(context.Background(), nc, cluster, launch)
	require.NoError(t, err)
	return o
}

func TestResolveBlockDevicesPerFamily(t *testing.T) {
	gp3 := func(dev string, gib int32) launchtemplate.BlockDeviceMapping {
		return launchtemplate.BlockDeviceMapping{DeviceName: dev, VolumeSizeGiB: aws.Int32(gib), VolumeType: aws.String("gp3"), Encrypted: aws.Bool(true)}
	}
	for _, c := range []struct {
		family string
		want   []launchtemplate.BlockDeviceMapping
	}{
		{awsv1.AMIFamilyAL2, []launchtemplate.BlockDeviceMapping{gp3("/dev/xvda", 20)}},
		{awsv1.AMIFamilyAL2023, []launchtemplate.BlockDeviceMapping{gp3("/dev/xvda", 20)}},
		{awsv1.AMIFamilyBottlerocket, []launchtemplate.BlockDeviceMapping{gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)}},
		{awsv1.AMIFamilyWindows2019, []launchtemplate.BlockDeviceMapping{gp3("/dev/sda1", 50)}},
		{awsv1.AMIFamilyWindows2022, []launchtemplate.BlockDeviceMapping{gp3("/dev/sda1", 50)}},
		{awsv1.AMIFamilyWindows2025, []launchtemplate.BlockDeviceMapping{gp3("/dev/sda1", 50)}},
		{awsv1.AMIFamilyCustom, nil},
	} {
		t.Run(c.family, func(t *testing.T) {
			o := resolve(t, readyNodeClass("bdm", c.family), launchFor("bdm", 110))
			require.Equal(t, c.want, o.BlockDeviceMappings)
		})
	}
	t.Run("the class's own devices replace the defaults", func(t *testing.T) {
		nc := readyNodeClass("bdm", awsv1.AMIFamilyBottlerocket)
		size := resource.MustParse("100G")
		nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
			DeviceName: aws.String("/dev/xvdb"),
			EBS: &awsv1.BlockDevice{VolumeSize: &size, VolumeType: aws.String("io2"), IOPS: aws.Int64(4000), Throughput: aws.Int64(125),
				Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(false), KMSKeyID: aws.String("alias/k"), SnapshotID: aws.String("snap-1"),
				VolumeInitializationRate: aws.Int32(200)},
		}}
		o := resolve(t, nc, launchFor("bdm", 110))
		require.Equal(t, []launchtemplate.BlockDeviceMapping{{
			DeviceName: "/dev/xvdb", VolumeSizeGiB: aws.Int32(94), VolumeType: aws.String("io2"), IOPS: aws.Int32(4000), Throughput: aws.Int32(125),
			Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(false), KMSKeyID: aws.String("alias/k"), SnapshotID: aws.String("snap-1"),
			VolumeInitializationRate: aws.Int32(200),
		}}, o.BlockDeviceMappings, "100G is 93.1Gi, rounded up")
	})
}

func TestGiB(t *testing.T) {
	for in, want := range map[string]int32{"20Gi": 20, "20G": 19, "1Ti": 1024, "1T": 932, "1": 1, "1073741825": 2} {
		got, err := launchtemplate.GiB(resource.MustParse(in))
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	_, err := launchtemplate.GiB(resource.MustParse("0"))
	require.Error(t, err)
}

func TestResolveContents(t *testing.T) {
	nc := readyNodeClass("contents", awsv1.AMIFamilyAL2023)
	o := resolve(t, nc, launchFor("contents", 29))
	require.Equal(t, launchtemplate.DefaultMetadataOptions, o.MetadataOptions)
	require.Equal(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, o.SecurityGroupIDs)
	require.Equal(t, "lt-cluster_123", o.InstanceProfile)
	require.False(t, o.DetailedMonitoring)
	require.Nil(t, o.AssociatePublicIPAddress)

	ud, err := base64.StdEncoding.DecodeString(o.UserData)
	require.NoError(t, err)
	want, err := bootstrap.UserData(context.Background(), bootstrap.Options{
		Family: awsv1.AMIFamilyAL2023, ClusterName: cluster.Name, ClusterEndpoint: cluster.Endpoint, CABundle: cluster.CABundle,
		ClusterCIDR: cluster.CIDR, Kubelet: bootstrap.ResolveKubelet(nil, cluster.DNS, aws.Int32(29)),
		Labels: launchFor("", 0).Labels, Taints: launchFor("", 0).Taints,
	})
	require.NoError(t, err)
	require.Equal(t, want, string(ud), "the family's bootstrap with the cluster's DNS and the launch's max-pods")

	nc.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPTokens: aws.String("optional"), HTTPPutResponseHopLimit: aws.Int64(2)}
	nc.Spec.DetailedMonitoring = aws.Bool(true)
	nc.Spec.AssociatePublicIPAddress = aws.Bool(false)
	o = resolve(t, nc, launchFor("contents", 29))
	require.Equal(t, launchtemplate.MetadataOptions{HTTPEndpoint: "enabled", HTTPProtocolIPv6: "disabled", HTTPPutResponseHopLimit: 2, HTTPTokens: "optional"}, o.MetadataOptions)
	require.True(t, o.DetailedMonitoring)
	require.Equal(t, aws.Bool(false), o.AssociatePublicIPAddress)
}

func TestResolveErrors(t *testing.T) {
	for name, c := range map[string]struct {
		mutate  func(*awsv1.EC2NodeClass, *launchtemplate.Launch)
		wantErr string
	}{
		"no security groups": {func(nc *awsv1.EC2NodeClass, _ *launchtemplate.Launch) { nc.Status.SecurityGroups = nil }, "no security groups"},
		"no profile":         {func(nc *awsv1.EC2NodeClass, _ *launchtemplate.Launch) { nc.Status.InstanceProfile = "" }, "no instance profile"},
		"no image":           {func(_ *awsv1.EC2NodeClass, l *launchtemplate.Launch) { l.ImageID = "" }, "no image id"},
		"bad user data": {func(nc *awsv1.EC2NodeClass, _ *launchtemplate.Launch) {
			nc.Spec.UserData = aws.String("Content-Type: text/plain\n\nx")
		}, "user data"},
	} {
		t.Run(name, func(t *testing.T) {
			nc := readyNodeClass("errors", awsv1.AMIFamilyAL2023)
			l := launchFor("errors", 110)
			c.mutate(nc, &l)
			_, err := launchtemplate.Resolve(context.Background(), nc, cluster, l)
			require.ErrorContains(t, err, c.wantErr)
		})
	}
}

func TestName(t *testing.T) {
	nc := readyNodeClass("name", awsv1.AMIFamilyAL2023)
	a := resolve(t, nc, launchFor("name", 110))
	nameA, err := launchtemplate.Name(a)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(nameA, "karpenter.k8s.aws/"), nameA)

	b := resolve(t, nc, launchFor("name", 110))
	b.SecurityGroupIDs = []string{b.SecurityGroupIDs[1], b.SecurityGroupIDs[0]}
	nameB, err := launchtemplate.Name(b)
	require.NoError(t, err)
	require.Equal(t, nameA, nameB, "deterministic, security groups are a set")

	for what, mutate := range map[string]func(*launchtemplate.Options){
		"user data": func(o *launchtemplate.Options) { o.UserData += "x" },
		"image":     func(o *launchtemplate.Options) { o.ImageID = "ami-2" },
		"volume":    func(o *launchtemplate.Options) { o.BlockDeviceMappings[0].VolumeSizeGiB = aws.Int32(21) },
		"metadata":  func(o *launchtemplate.Options) { o.MetadataOptions.HTTPTokens = "optional" },
		"tag":       func(o *launchtemplate.Options) { o.Tags["team"] = "db" },
		"public ip": func(o *launchtemplate.Options) { o.AssociatePublicIPAddress = aws.Bool(true) },
		// Reserved and non-reserved launches must never share a template.
		"reservation": func(o *launchtemplate.Options) { o.CapacityReservation.ID = "cr-0123456789abcdef0" },
		"preference": func(o *launchtemplate.Options) {
			o.CapacityReservation.Preference = launchtemplate.CapacityReservationPreferenceNone
		},
		"block type": func(o *launchtemplate.Options) { o.CapacityReservation.Type = "capacity-block" },
	} {
		c := resolve(t, nc, launchFor("name", 110))
		mutate(c)
		nameC, err := launchtemplate.Name(c)
		require.NoError(t, err)
		require.NotEqual(t, nameA, nameC, what)
	}
}

func describeVersion(t *testing.T, name string) ec2types.ResponseLaunchTemplateData {
	t.Helper()
	out, err := clients.EC2.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: aws.String(name), Versions: []string{"$Latest"},
	})
	require.NoError(t, err)
	require.Len(t, out.LaunchTemplateVersions, 1)
	return *out.LaunchTemplateVersions[0].LaunchTemplateData
}

func templatesNamed(t *testing.T, name string) []ec2types.LaunchTemplate {
	t.Helper()
	out, err := clients.EC2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{name}}},
	})
	require.NoError(t, err)
	return out.LaunchTemplates
}

func TestEnsureCreatesOnceAndReadsBack(t *testing.T) {
	ctx := context.Background()
	nc := readyNodeClass("ensure", awsv1.AMIFamilyAL2023)
	o := resolve(t, nc, launchFor("ensure", 29))
	name, err := launchtemplate.Name(o)
	require.NoError(t, err)

	api := &countingEC2{Client: clients.EC2}
	p := launchtemplate.NewProvider(api, cluster.Name, launchtemplate.ProviderOptions{})
	lt, err := p.Ensure(ctx, o)
	require.NoError(t, err)
	require.Equal(t, name, lt.Name)
	require.NotEmpty(t, lt.ID)
	require.Equal(t, o.ImageID, lt.ImageID)
	require.EqualValues(t, 1, api.create.Load())

	again, err := p.Ensure(ctx, o)
	require.NoError(t, err)
	require.Equal(t, lt, again)
	require.EqualValues(t, 1, api.describe.Load(), "the second Ensure is served from the cache")
	require.EqualValues(t, 1, api.create.Load())

	// A restarted controller finds the template by its name.
	fresh := &countingEC2{Client: clients.EC2}
	found, err := launchtemplate.NewProvider(fresh, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(ctx, o)
	require.NoError(t, err)
	require.Equal(t, lt, found)
	require.EqualValues(t, 0, fresh.create.Load(), "no duplicate")
	require.Len(t, templatesNamed(t, name), 1)

	data := describeVersion(t, name)
	require.Equal(t, o.ImageID, aws.ToString(data.ImageId))
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	require.NoError(t, err)
	parts, err := bootstrap.ParseMIME(string(ud))
	require.NoError(t, err)
	require.Equal(t, bootstrap.ContentTypeNodeConfig, parts[len(parts)-1].ContentType())
	require.Contains(t, parts[len(parts)-1].Content, "maxPods: 29")
	require.Contains(t, parts[len(parts)-1].Content, "name: lt-cluster")
	require.Equal(t, "lt-cluster_123", aws.ToString(data.IamInstanceProfile.Name))
	require.ElementsMatch(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, data.SecurityGroupIds)
	require.Empty(t, data.NetworkInterfaces)
	require.Len(t, data.BlockDeviceMappings, 1)
	bdm := data.BlockDeviceMappings[0]
	require.Equal(t, "/dev/xvda", aws.ToString(bdm.DeviceName))
	require.EqualValues(t, 20, aws.ToInt32(bdm.Ebs.VolumeSize))
	require.Equal(t, ec2types.VolumeTypeGp3, bdm.Ebs.VolumeType)
	require.True(t, aws.ToBool(bdm.Ebs.Encrypted))
	md := data.MetadataOptions
	require.Equal(t, ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled, md.HttpEndpoint)
	require.Equal(t, ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled, md.HttpProtocolIpv6)
	require.EqualValues(t, 1, aws.ToInt32(md.HttpPutResponseHopLimit))
	require.Equal(t, ec2types.LaunchTemplateHttpTokensStateRequired, md.HttpTokens)
	require.False(t, aws.ToBool(data.Monitoring.Enabled))

	tags := map[string]string{}
	for _, tag := range templatesNamed(t, name)[0].Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	require.Equal(t, cluster.Name, tags[launchtemplate.ClusterTagKey])
	require.Equal(t, "ensure", tags[awsv1.NodeClassTagKey])
	require.Equal(t, "web", tags["team"])
	require.Equal(t, "owned", tags["kubernetes.io/cluster/"+cluster.Name])
}

func TestEnsurePublicIPAndMonitoring(t *testing.T) {
	nc := readyNodeClass("public", awsv1.AMIFamilyBottlerocket)
	nc.Spec.AssociatePublicIPAddress = aws.Bool(true)
	nc.Spec.DetailedMonitoring = aws.Bool(true)
	o := resolve(t, nc, launchFor("public", 110))
	lt, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(context.Background(), o)
	require.NoError(t, err)
	data := describeVersion(t, lt.Name)
	require.Empty(t, data.SecurityGroupIds, "groups go on the interface")
	require.Len(t, data.NetworkInterfaces, 1)
	ni := data.NetworkInterfaces[0]
	require.EqualValues(t, 0, aws.ToInt32(ni.DeviceIndex))
	require.True(t, aws.ToBool(ni.AssociatePublicIpAddress))
	require.ElementsMatch(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, ni.Groups)
	require.True(t, aws.ToBool(data.Monitoring.Enabled))
	devices := map[string]int32{}
	for _, b := range data.BlockDeviceMappings {
		devices[aws.ToString(b.DeviceName)] = aws.ToInt32(b.Ebs.VolumeSize)
	}
	require.Equal(t, map[string]int32{"/dev/xvda": 4, "/dev/xvdb": 20}, devices)
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	require.NoError(t, err)
	require.Contains(t, string(ud), "[settings.kubernetes]")
	require.Contains(t, string(ud), "cluster-name = 'lt-cluster'")
}

// TestEnsureCapacityReservationTargeting: a reserved launch's template
// targets its reservation only, a capacity block's adds the capacity-block
// market type, a non-reserved one with the gate on says "none", and with
// the gate off the template says nothing (EC2's default, open).
func TestEnsureCapacityReservationTargeting(t *testing.T) {
	cases := []struct {
		name       string
		cr         launchtemplate.CapacityReservation
		wantPref   ec2types.CapacityReservationPreference
		wantTarget string
		wantMarket ec2types.MarketType
	}{
		{"default reservation", launchtemplate.CapacityReservation{ID: "cr-00000000000000001", Type: "default"},
			ec2types.CapacityReservationPreferenceCapacityReservationsOnly, "cr-00000000000000001", ""},
		{"capacity block", launchtemplate.CapacityReservation{ID: "cr-00000000000000002", Type: "capacity-block"},
			ec2types.CapacityReservationPreferenceCapacityReservationsOnly, "cr-00000000000000002", ec2types.MarketTypeCapacityBlock},
		{"not reserved, gate on", launchtemplate.CapacityReservation{Preference: launchtemplate.CapacityReservationPreferenceNone},
			ec2types.CapacityReservationPreferenceNone, "", ""},
		{"gate off", launchtemplate.CapacityReservation{}, "", "", ""},
	}
	p := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{})
	names := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			launch := launchFor("reserved", 110)
			launch.CapacityReservation = tc.cr
			lt, err := p.Ensure(context.Background(), resolve(t, readyNodeClass("reserved", awsv1.AMIFamilyAL2023), launch))
			require.NoError(t, err)
			require.False(t, names[lt.Name], "each targeting has its own template")
			names[lt.Name] = true
			data := describeVersion(t, lt.Name)
			if tc.wantPref == "" {
				require.Nil(t, data.CapacityReservationSpecification)
			} else {
				require.NotNil(t, data.CapacityReservationSpecification)
				require.Equal(t, tc.wantPref, data.CapacityReservationSpecification.CapacityReservationPreference)
				if tc.wantTarget == "" {
					require.Nil(t, data.CapacityReservationSpecification.CapacityReservationTarget)
				} else {
					require.Equal(t, tc.wantTarget, aws.ToString(data.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId))
				}
			}
			if tc.wantMarket == "" {
				require.Nil(t, data.InstanceMarketOptions)
			} else {
				require.NotNil(t, data.InstanceMarketOptions)
				require.Equal(t, tc.wantMarket, data.InstanceMarketOptions.MarketType)
			}
		})
	}
}

func TestEnsureConcurrentMakesOne(t *testing.T) {
	o := resolve(t, readyNodeClass("concurrent", awsv1.AMIFamilyAL2), launchFor("concurrent", 58))
	api := &countingEC2{Client: clients.EC2}
	p := launchtemplate.NewProvider(api, cluster.Name, launchtemplate.ProviderOptions{})
	var wg sync.WaitGroup
	ids := make([]string, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lt, err := p.Ensure(context.Background(), o)
			ids[i], errs[i] = lt.ID, err
		}()
	}
	wg.Wait()
	for i := range ids {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i])
	}
	require.EqualValues(t, 1, api.create.Load())
	name, _ := launchtemplate.Name(o)
	require.Len(t, templatesNamed(t, name), 1)
}

func TestEnsureAll(t *testing.T) {
	nc := readyNodeClass("all", awsv1.AMIFamilyAL2023)
	var opts []*launchtemplate.Options
	for _, pods := range []int32{17, 29, 17} {
		opts = append(opts, resolve(t, nc, launchFor("all", pods)))
	}
	lts, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).EnsureAll(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, lts, 3)
	require.NotEqual(t, lts[0].Name, lts[1].Name, "different max-pods, different user data, different template")
	require.Equal(t, lts[0], lts[2])
}

func TestDeleteAllRemovesOnlyThatClass(t *testing.T) {
	ctx := context.Background()
	p := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{})
	var doomed, kept []string
	for _, pods := range []int32{10, 20, 30} {
		lt, err := p.Ensure(ctx, resolve(t, readyNodeClass("doomed", awsv1.AMIFamilyAL2023), launchFor("doomed", pods)))
		require.NoError(t, err)
		doomed = append(doomed, lt.Name)
	}
	lt, err := p.Ensure(ctx, resolve(t, readyNodeClass("kept", awsv1.AMIFamilyAL2023), launchFor("kept", 10)))
	require.NoError(t, err)
	kept = append(kept, lt.Name)
	// Same class name in another cluster: not ours to delete.
	other := launchtemplate.NewProvider(clients.EC2, "other-cluster", launchtemplate.ProviderOptions{})
	otherOpts := resolve(t, readyNodeClass("doomed", awsv1.AMIFamilyAL2023), launchFor("doomed", 10))
	otherOpts.ClusterName = "other-cluster"
	lt, err = other.Ensure(ctx, otherOpts)
	require.NoError(t, err)
	kept = append(kept, lt.Name)

	require.NoError(t, p.DeleteAll(ctx, readyNodeClass("doomed", awsv1.AMIFamilyAL2023)))
	for _, n := range doomed {
		require.Empty(t, templatesNamed(t, n), n)
	}
	for _, n := range kept {
		require.Len(t, templatesNamed(t, n), 1, n)
	}
	require.NoError(t, p.DeleteAll(ctx, readyNodeClass("doomed", awsv1.AMIFamilyAL2023)), "idempotent")

	// The cache forgot them: ensuring again recreates rather than handing
	// out a deleted template's id.
	again, err := p.Ensure(ctx, resolve(t, readyNodeClass("doomed", awsv1.AMIFamilyAL2023), launchFor("doomed", 10)))
	require.NoError(t, err)
	require.Len(t, templatesNamed(t, again.Name), 1)
	require.NoError(t, p.DeleteAll(ctx, readyNodeClass("doomed", awsv1.AMIFamilyAL2023)))
}

func TestThrottlingIsRetried(t *testing.T) {
	for _, action := range []string{"DescribeLaunchTemplates", "CreateLaunchTemplate"} {
		t.Run(action, func(t *testing.T) {
			ctx := context.Background()
			t.Cleanup(func() { local.ClearFaults("ec2", action) })
			o := resolve(t, readyNodeClass("throttle-"+strings.ToLower(action), awsv1.AMIFamilyAL2023), launchFor("throttle", 110))

			// A throttle that never ends: the SDK tries three times, then
			// the error (with its code) reaches the caller.
			f, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: action, Kind: awslocal.FaultThrottle})
			require.NoError(t, err)
			_, err = launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(ctx, o)
			require.ErrorContains(t, err, "RequestLimitExceeded")
			require.Equal(t, 3, fault(t, f.ID).Hits, "three attempts")
			local.ClearFaults("ec2", action)

			// A burst of two: the third attempt goes through.
			f, err = local.AddFault(awslocal.Fault{Service: "ec2", Action: action, Kind: awslocal.FaultThrottle, Count: 2})
			require.NoError(t, err)
			lt, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(ctx, o)
			require.NoError(t, err, "the SDK's retryer rides out RequestLimitExceeded")
			require.NotContains(t, faultIDs(), f.ID, "the burst was spent")
			require.Len(t, templatesNamed(t, lt.Name), 1)
		})
	}
}

func fault(t *testing.T, id string) awslocal.Fault {
	t.Helper()
	for _, f := range local.Faults() {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("fault %s not active", id)
	return awslocal.Fault{}
}

func faultIDs() []string {
	var ids []string
	for _, f := range local.Faults() {
		ids = append(ids, f.ID)
	}
	return ids
}

func TestPruneHydrateInvalidate(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1}))
	// logged returns the lines with upstream's message msg.
	logged := func(msg string) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l, `"level"=1 "msg"="`+msg+`"`) {
				out = append(out, l)
			}
		}
		return out
	}
	now := time.Now()
	clock := func() time.Time { return now }
	p := launchtemplate.NewProvider(clients.EC2, "prune-cluster", launchtemplate.ProviderOptions{Now: clock})
	mk := func(pods int32) *launchtemplate.Options {
		o := resolve(t, readyNodeClass("prune", awsv1.AMIFamilyAL2), launchFor("prune", pods))
		o.ClusterName = "prune-cluster"
		return o
	}
	used, err := p.Ensure(ctx, mk(11))
	require.NoError(t, err)
	unused, err := p.Ensure(ctx, mk(12))
	require.NoError(t, err)

	now = now.Add(40 * time.Second)
	_, err = p.Ensure(ctx, mk(11)) // a use slides its expiry
	require.NoError(t, err)
	now = now.Add(30 * time.Second)
	n, err := p.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, templatesNamed(t, unused.Name), "unused past the TTL: deleted")
	require.Len(t, templatesNamed(t, used.Name), 1, "used within the TTL: kept")
	// Upstream's log lines: a constant message, the template in fields.
	require.Len(t, logged("created launch template"), 2)
	require.Contains(t, logged("created launch template")[0], `"id"="`+used.ID+`"`)
	require.Equal(t, []string{`"level"=1 "msg"="deleted launch template" "id"="` + unused.ID + `" "name"="` + unused.Name + `"`}, logged("deleted launch template"))

	// A restarted controller hydrates the cluster's templates and prunes
	// them if nothing claims them.
	restarted := launchtemplate.NewProvider(clients.EC2, "prune-cluster", launchtemplate.ProviderOptions{Now: clock})
	require.NoError(t, restarted.Hydrate(ctx))
	require.Equal(t, []string{`"level"=1 "msg"="hydrated launch template cache" "tag-key"="karpenter.k8s.aws/cluster" "tag-value"="prune-cluster" "count"=1`}, logged("hydrated launch template cache"))
	now = now.Add(2 * time.Minute)
	n, err = restarted.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, templatesNamed(t, used.Name))

	// The first provider still caches the deleted template; CreateFleet
	// would answer not-found and the launch path invalidates.
	p.Invalidate(used.Name)
	now = now.Add(-3 * time.Minute)
	again, err := p.Ensure(ctx, mk(11))
	require.NoError(t, err)
	require.Equal(t, used.Name, again.Name)
	require.NotEqual(t, used.ID, again.ID, "recreated")
	require.Len(t, templatesNamed(t, again.Name), 1)
	require.NoError(t, p.DeleteAll(ctx, readyNodeClass("prune", awsv1.AMIFamilyAL2)))
	require.Equal(t, []string{`"level"=1 "msg"="deleted launch templates" "launchTemplates"="` + again.Name + `"`}, logged("deleted launch templates"))
	require.Empty(t, templatesNamed(t, again.Name), fmt.Sprint("DeleteAll in prune-cluster"))
}

// blindEC2 answers the first DescribeLaunchTemplates as if the template
// did not exist, like a replica that looked just before another created it.
type blindEC2 struct {
	countingEC2
	blinded bool
}

func (b *blindEC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	if !b.blinded {
		b.blinded = true
		b.describe.Add(1)
		return &ec2.DescribeLaunchTemplatesOutput{}, nil
	}
	return b.countingEC2.DescribeLaunchTemplates(ctx, in, opts...)
}

func TestEnsureLosesTheCreateRace(t *testing.T) {
	ctx := context.Background()
	o := resolve(t, readyNodeClass("race", awsv1.AMIFamilyAL2023), launchFor("race", 110))
	first, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(ctx, o)
	require.NoError(t, err)

	api := &blindEC2{countingEC2: countingEC2{Client: clients.EC2}}
	second, err := launchtemplate.NewProvider(api, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(ctx, o)
	require.NoError(t, err, "AlreadyExists means someone made the same template: use it")
	require.Equal(t, first, second)
	require.EqualValues(t, 1, api.create.Load())
	require.EqualValues(t, 2, api.describe.Load())
	require.Len(t, templatesNamed(t, first.Name), 1)
}

// TestPropagating: a template the provider just created is reported as
// propagating for PropagationDelay, so the first launch from it waits
// instead of being refused as unknown; one it found (created by another
// replica or before a restart) is not.
func TestPropagating(t *testing.T) {
	ctx := context.Background()
	o := resolve(t, readyNodeClass("propagating", awsv1.AMIFamilyAL2023), launchFor("propagating", 29))
	now := time.Now()
	p := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{Now: func() time.Time { return now }})
	lt, err := p.Ensure(ctx, o)
	require.NoError(t, err)
	require.Equal(t, launchtemplate.PropagationDelay, p.Propagating(lt.Name))
	require.Zero(t, p.Propagating("karpenter.k8s.aws/unknown"))
	now = now.Add(launchtemplate.PropagationDelay / 2)
	require.Equal(t, launchtemplate.PropagationDelay/2, p.Propagating("karpenter.k8s.aws/unknown", lt.Name))
	now = now.Add(launchtemplate.PropagationDelay)
	require.Zero(t, p.Propagating(lt.Name))

	found := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{})
	again, err := found.Ensure(ctx, o)
	require.NoError(t, err)
	require.Equal(t, lt.ID, again.ID)
	require.Zero(t, found.Propagating(lt.Name), "a template found by name has had time to propagate")
}
