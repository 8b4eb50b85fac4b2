package awslocal

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
)

// typeInfo is what the front needs of an instance type: its architectures
// for CreateFleet's AMI check and its size for the Node a boot registers.
type typeInfo struct {
	Name       string
	Archs      []string
	VCPUs      int64
	MemoryMiB  int64
	ENIs       int64
	IPsPerENI  int64
	BareMetal  bool
	Hypervisor string
	// EFAs and NetworkCards bound the interfaces a template may attach
	// (efa.go).
	EFAs         int64
	NetworkCards int64
}

type imageInfo struct {
	ID, Name, Arch, Platform, RootDevice string
}

type subnetInfo struct {
	ID, Zone, ZoneID, VPC string
}

// ec2Info caches moto's instance types, per-zone offerings and images,
// which do not change while the front runs (images only gain releases,
// which have new ids).
type ec2Info struct {
	mu       sync.Mutex
	types    map[string]typeInfo
	offered  map[string]map[string]map[string]bool // region → zone → type
	images   map[string]imageInfo                  // region/id
	subnets  map[string]subnetInfo                 // region/id
	loadOnce sync.Mutex
}

func newEC2Info() *ec2Info {
	return &ec2Info{offered: map[string]map[string]map[string]bool{}, images: map[string]imageInfo{}, subnets: map[string]subnetInfo{}}
}

func ec2Form(action string, kv ...string) url.Values {
	form := url.Values{"Action": {action}, "Version": {"2016-11-15"}}
	for i := 0; i+1 < len(kv); i += 2 {
		form.Set(kv[i], kv[i+1])
	}
	return form
}

func (f *front) motoXML(ctx context.Context, region string, form url.Values) (*xnode, error) {
	body, err := f.motoCall(ctx, "ec2", region, form)
	if err != nil {
		return nil, err
	}
	return parseXML(body)
}

// instanceTypes are moto's instance types (the same in every region).
func (f *front) instanceTypes(ctx context.Context) (map[string]typeInfo, error) {
	info := f.info
	info.loadOnce.Lock()
	defer info.loadOnce.Unlock()
	info.mu.Lock()
	have := info.types
	info.mu.Unlock()
	if have != nil {
		return have, nil
	}
	doc, err := f.motoXML(ctx, DefaultRegion, ec2Form("DescribeInstanceTypes"))
	if err != nil {
		return nil, fmt.Errorf("describing instance types: %w", err)
	}
	types := map[string]typeInfo{}
	for _, it := range doc.items("instanceTypeSet") {
		ti := typeInfo{Name: it.text("instanceType"), Hypervisor: it.text("hypervisor"), BareMetal: it.text("bareMetal") == "true"}
		for _, a := range it.items("processorInfo", "supportedArchitectures") {
			ti.Archs = append(ti.Archs, trimText(a))
		}
		ti.VCPUs, _ = strconv.ParseInt(it.text("vCpuInfo", "defaultVCpus"), 10, 64)
		ti.MemoryMiB, _ = strconv.ParseInt(it.text("memoryInfo", "sizeInMiB"), 10, 64)
		ti.ENIs, _ = strconv.ParseInt(it.text("networkInfo", "maximumNetworkInterfaces"), 10, 64)
		ti.IPsPerENI, _ = strconv.ParseInt(it.text("networkInfo", "ipv4AddressesPerInterface"), 10, 64)
		ti.EFAs, _ = strconv.ParseInt(it.text("networkInfo", "efaInfo", "maximumEfaInterfaces"), 10, 64)
		ti.NetworkCards, _ = strconv.ParseInt(it.text("networkInfo", "maximumNetworkCards"), 10, 64)
		types[ti.Name] = ti
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("moto reported no instance types")
	}
	info.mu.Lock()
	info.types = types
	info.mu.Unlock()
	return types, nil
}

func trimText(n *xnode) string { return n.text() }

// offeredIn reports whether the type is offered in the zone of region.
func (f *front) offeredIn(ctx context.Context, region, zone, instanceType string) (bool, error) {
	info := f.info
	info.mu.Lock()
	zones, ok := info.offered[region]
	info.mu.Unlock()
	if !ok {
		doc, err := f.motoXML(ctx, region, ec2Form("DescribeInstanceTypeOfferings", "LocationType", "availability-zone"))
		if err != nil {
			return false, fmt.Errorf("describing offerings in %s: %w", region, err)
		}
		zones = map[string]map[string]bool{}
		for _, it := range doc.items("instanceTypeOfferingSet") {
			z := it.text("location")
			if zones[z] == nil {
				zones[z] = map[string]bool{}
			}
			zones[z][it.text("instanceType")] = true
		}
		info.mu.Lock()
		info.offered[region] = zones
		info.mu.Unlock()
	}
	return zones[zone][instanceType], nil
}

// image is one of moto's images by id; ok is false when moto has none.
func (f *front) image(ctx context.Context, region, id string) (imageInfo, bool, error) {
	key := region + "/" + id
	f.info.mu.Lock()
	img, ok := f.info.images[key]
	f.info.mu.Unlock()
	if ok {
		return img, true, nil
	}
	doc, err := f.motoXML(ctx, region, ec2Form("DescribeImages", "ImageId.1", id))
	if err != nil {
		if _, notFound := err.(*motoStatusError); notFound {
			return imageInfo{}, false, nil
		}
		return imageInfo{}, false, err
	}
	items := doc.items("imagesSet")
	if len(items) == 0 {
		return imageInfo{}, false, nil
	}
	it := items[0]
	img = imageInfo{ID: id, Name: it.text("name"), Arch: it.text("architecture"), Platform: it.text("platform"), RootDevice: it.text("rootDeviceName")}
	f.info.mu.Lock()
	f.info.images[key] = img
	f.info.mu.Unlock()
	return img, true, nil
}

// subnet is one of moto's subnets by id, or the default subnet of zone
// when id is empty.
func (f *front) subnet(ctx context.Context, region, id, zone string) (subnetInfo, bool, error) {
	key := region + "/" + id
	if id != "" {
		f.info.mu.Lock()
		s, ok := f.info.subnets[key]
		f.info.mu.Unlock()
		if ok {
			return s, true, nil
		}
	}
	form := ec2Form("DescribeSubnets")
	if id != "" {
		form.Set("SubnetId.1", id)
	} else {
		form.Set("Filter.1.Name", "availability-zone")
		form.Set("Filter.1.Value.1", zone)
		form.Set("Filter.2.Name", "default-for-az")
		form.Set("Filter.2.Value.1", "true")
	}
	doc, err := f.motoXML(ctx, region, form)
	if err != nil {
		if _, notFound := err.(*motoStatusError); notFound {
			return subnetInfo{}, false, nil
		}
		return subnetInfo{}, false, err
	}
	items := doc.items("subnetSet")
	if len(items) == 0 {
		return subnetInfo{}, false, nil
	}
	s := subnetInfo{ID: items[0].text("subnetId"), Zone: items[0].text("availabilityZone"), ZoneID: items[0].text("availabilityZoneId"), VPC: items[0].text("vpcId")}
	f.info.mu.Lock()
	f.info.subnets[region+"/"+s.ID] = s
	f.info.mu.Unlock()
	return s, true, nil
}
