package awslocal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The label and annotation kwok manages Nodes by (the kwok provider sets
// the same, see pkg/apis/kwok/v1alpha1): kwok then keeps a booted Node
// Ready as a kubelet would.
const (
	kwokNodeKey   = "kwok.x-k8s.io/node"
	kwokNodeValue = "fake"
)

// BootOptions configure Boot. The zero value is usable.
type BootOptions struct {
	// Region whose instances boot; empty means us-east-1.
	Region string
	// ClusterName, when set, keeps instances whose user data names another
	// cluster from joining, as their kubelet would fail to reach it.
	ClusterName string
	// Interval between scans of moto's instances; zero means 250ms.
	Interval time.Duration
	// Delay is how long an instance runs before its kubelet registers.
	// Zero registers an instance CreateFleet launched as soon as the
	// launch returns, as the kwok provider's Node appears with its launch
	// (a benchmark comparing the two then measures the controllers, not
	// a boot time only one of them has), and any other instance (moto's
	// RunInstances) one Interval after it was first seen running: moto
	// lists such an instance a moment before its volumes are attached.
	Delay time.Duration
	// VMMemoryOverheadPercent is the share of the instance type's memory
	// the kubelet does not see (the hypervisor's and the kernel's); zero
	// means 0.075, upstream Karpenter's default estimate.
	VMMemoryOverheadPercent float64
}

// BootResult is what became of an instance the booter saw running.
type BootResult struct {
	InstanceID string `json:"instanceId"`
	// Node is the registered Node's name; empty when it did not join.
	Node   string `json:"node,omitempty"`
	Family string `json:"family,omitempty"`
	// Error says why the instance did not join (its user data, mostly).
	Error string `json:"error,omitempty"`
	// Gone is set once the instance terminated and its Node was deleted.
	Gone bool `json:"gone,omitempty"`
}

// Booter plays the kubelet of every running instance: it registers a Node
// from the instance and its user data, and deletes it when the instance
// terminates.
type Booter struct {
	front  *front
	kube   client.Client
	opts   BootOptions
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	results map[string]*BootResult
	// running is when each instance was first seen running.
	running map[string]time.Time
}

// Boot starts registering Nodes in kube for the running instances of the
// local AWS (those already running too). Stop it with Booter.Stop or by
// cancelling ctx.
func (l *Local) Boot(ctx context.Context, kube client.Client, opts BootOptions) *Booter {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.Interval == 0 {
		opts.Interval = 250 * time.Millisecond
	}
	if opts.VMMemoryOverheadPercent == 0 {
		opts.VMMemoryOverheadPercent = 0.075
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &Booter{front: l.front, kube: kube, opts: opts, cancel: cancel, done: make(chan struct{}), results: map[string]*BootResult{}, running: map[string]time.Time{}}
	go b.run(ctx)
	return b
}

// Stop ends the booter and waits for its loop; Nodes stay.
func (b *Booter) Stop() {
	b.cancel()
	<-b.done
}

// Result is what became of an instance, once the booter saw it running.
func (b *Booter) Result(instanceID string) (BootResult, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.results[instanceID]
	if !ok {
		return BootResult{}, false
	}
	return *r, true
}

func (b *Booter) run(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		// Taken before the pass, so a launch during it is not missed.
		launched := b.front.ec2.nextLaunch()
		b.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-launched:
		}
	}
}

// pass is one scan; a panic is logged and the next scan goes on.
func (b *Booter) pass(ctx context.Context) {
	defer func() {
		if p := recover(); p != nil {
			log.Printf("awslocal: boot pass panicked: %v", p)
		}
	}()
	if err := b.scan(ctx); err != nil && ctx.Err() == nil {
		log.Printf("awslocal: boot pass: %v", err)
	}
}

type bootInstance struct {
	ID, State, Type, Zone, DNS, IP, Image, Arch, Platform string
	Volumes                                               map[string]string // device → volume id
}

func (b *Booter) scan(ctx context.Context) error {
	// Not while CreateFleet is launching: moto builds an instance in steps.
	b.front.ec2.motoMu.Lock()
	doc, err := b.front.motoXML(ctx, b.opts.Region, ec2Form("DescribeInstances"))
	b.front.ec2.motoMu.Unlock()
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	seen := map[string]bootInstance{}
	for _, r := range doc.items("reservationSet") {
		for _, it := range r.items("instancesSet") {
			inst := bootInstance{ID: it.text("instanceId"), State: it.text("instanceState", "name"), Type: it.text("instanceType"),
				Zone: it.text("placement", "availabilityZone"), DNS: it.text("privateDnsName"), IP: it.text("privateIpAddress"),
				Image: it.text("imageId"), Arch: it.text("architecture"), Platform: it.text("platform"), Volumes: map[string]string{}}
			for _, bd := range it.items("blockDeviceMapping") {
				inst.Volumes[bd.text("deviceName")] = bd.text("ebs", "volumeId")
			}
			seen[inst.ID] = inst
		}
	}
	b.mu.Lock()
	var gone []*BootResult
	for id, r := range b.results {
		inst, ok := seen[id]
		if r.Node != "" && !r.Gone && (!ok || inst.State == "shutting-down" || inst.State == "terminated") {
			gone = append(gone, r)
		}
	}
	b.mu.Unlock()
	for _, r := range gone {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.Node}}
		if err := b.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting node %s of terminated %s: %w", r.Node, r.InstanceID, err)
		}
		b.mu.Lock()
		r.Gone = true
		b.mu.Unlock()
	}
	var due []bootInstance
	for id, inst := range seen {
		b.mu.Lock()
		_, done := b.results[id]
		b.mu.Unlock()
		if done || inst.State != "running" {
			continue
		}
		first, ok := b.running[id]
		if !ok {
			first = time.Now()
			b.running[id] = first
		}
		if time.Since(first) < b.delay(id) {
			continue
		}
		due = append(due, inst)
	}
	return b.bootAll(ctx, due)
}

// delay is how long the instance must have been seen running before it
// registers (BootOptions.Delay).
func (b *Booter) delay(id string) time.Duration {
	switch {
	case b.opts.Delay > 0:
		return b.opts.Delay
	case b.front.ec2.fleetLaunched(id):
		return 0
	}
	return b.opts.Interval
}

// bootConcurrency bounds the boots of one pass in flight: each is a few
// calls to moto and the API server, and one after the other a fleet's
// last instance would register a second or more after its first, where
// every kubelet of the fleet boots at the same time.
const bootConcurrency = 16

// bootAll boots the instances concurrently and records their results; an
// instance whose boot failed transiently (moto or the API server) has no
// result and is booted again next pass.
func (b *Booter) bootAll(ctx context.Context, insts []bootInstance) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, bootConcurrency)
	for _, inst := range insts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() {
				// As in pass: a panic is logged, and the instance booted again.
				if p := recover(); p != nil {
					log.Printf("awslocal: booting %s panicked: %v", inst.ID, p)
				}
				<-sem
				wg.Done()
			}()
			res, err := b.boot(ctx, inst)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			b.mu.Lock()
			b.results[inst.ID] = res
			b.mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// boot registers the instance's Node, or returns a result with the reason
// it cannot join. An error is transient and retried.
func (b *Booter) boot(ctx context.Context, inst bootInstance) (*BootResult, error) {
	res := &BootResult{InstanceID: inst.ID}
	attr, err := b.front.motoXML(ctx, b.opts.Region, ec2Form("DescribeInstanceAttribute", "InstanceId", inst.ID, "Attribute", "userData"))
	if err != nil {
		return nil, fmt.Errorf("reading user data of %s: %w", inst.ID, err)
	}
	img, _, err := b.front.image(ctx, b.opts.Region, inst.Image)
	if err != nil {
		return nil, err
	}
	res.Family = familyOfImage(img.Name)
	if inst.Platform == "windows" || res.Family == "windows" {
		res.Error = "the local AWS does not boot Windows nodes"
		return res, nil
	}
	userData, err := base64.StdEncoding.DecodeString(attr.text("userData", "value"))
	if err != nil {
		res.Error = fmt.Sprintf("user data is not base64: %v", err)
		return res, nil
	}
	cfg, err := parseUserData(res.Family, userData)
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	res.Family = cfg.Family
	if b.opts.ClusterName != "" && cfg.ClusterName != "" && cfg.ClusterName != b.opts.ClusterName {
		res.Error = fmt.Sprintf("the user data joins cluster %q, not %q", cfg.ClusterName, b.opts.ClusterName)
		return res, nil
	}
	types, err := b.front.instanceTypes(ctx)
	if err != nil {
		return nil, err
	}
	ti, ok := types[inst.Type]
	if !ok {
		res.Error = fmt.Sprintf("unknown instance type %s", inst.Type)
		return res, nil
	}
	storageGiB, err := b.ephemeralGiB(ctx, inst, cfg.Family, img.RootDevice)
	if err != nil {
		return nil, err
	}
	node, err := b.node(inst, ti, cfg, storageGiB)
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	if err := b.register(ctx, node); err != nil {
		return nil, err
	}
	res.Node = node.Name
	return res, nil
}

// ephemeralGiB is the size of the volume the kubelet's filesystem lives on:
// Bottlerocket's data volume, else the image's root device.
func (b *Booter) ephemeralGiB(ctx context.Context, inst bootInstance, family, root string) (int64, error) {
	dev := root
	if family == FamilyBottlerocket {
		if _, ok := inst.Volumes["/dev/xvdb"]; ok {
			dev = "/dev/xvdb"
		}
	}
	vol, ok := inst.Volumes[dev]
	if !ok {
		return 20, nil // EC2's usual root volume when the template maps none
	}
	doc, err := b.front.motoXML(ctx, b.opts.Region, ec2Form("DescribeVolumes", "VolumeId.1", vol))
	if err != nil {
		return 0, fmt.Errorf("describing volume %s: %w", vol, err)
	}
	items := doc.items("volumeSet")
	if len(items) == 0 {
		return 20, nil
	}
	return strconv.ParseInt(items[0].text("size"), 10, 64)
}

func kubeArch(ec2Arch string) string {
	switch ec2Arch {
	case "x86_64":
		return "amd64"
	case "arm64":
		return "arm64"
	}
	return ec2Arch
}

// node is the Node the kubelet registers: its own labels over the user
// data's, the user data's taints, capacity from the instance type and
// allocatable after the reservations and eviction threshold.
func (b *Booter) node(inst bootInstance, ti typeInfo, cfg *kubeletConfig, storageGiB int64) (*corev1.Node, error) {
	name := inst.DNS
	if name == "" {
		return nil, fmt.Errorf("instance %s has no private DNS name", inst.ID)
	}
	arch := kubeArch(inst.Arch)
	if arch == "" && len(ti.Archs) > 0 {
		arch = kubeArch(ti.Archs[0])
	}
	labels := map[string]string{}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	for k, v := range map[string]string{
		corev1.LabelArchStable: arch, corev1.LabelOSStable: "linux", corev1.LabelHostname: name,
		"beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": "linux",
		corev1.LabelInstanceTypeStable: inst.Type, corev1.LabelTopologyZone: inst.Zone, corev1.LabelTopologyRegion: b.opts.Region,
		kwokNodeKey: kwokNodeValue,
	} {
		labels[k] = v
	}
	pods := ti.ENIs*(ti.IPsPerENI-1) + 2
	if cfg.MaxPods != nil {
		pods = *cfg.MaxPods
	}
	memMiB := ti.MemoryMiB - int64(math.Ceil(float64(ti.MemoryMiB)*b.opts.VMMemoryOverheadPercent))
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(ti.VCPUs, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(storageGiB*1024*1024*1024, resource.BinarySI),
	}
	allocatable := capacity.DeepCopy()
	kubeReserved := cfg.KubeReserved
	if len(kubeReserved) == 0 {
		kubeReserved = amiKubeReserved(ti.VCPUs, pods)
	}
	for _, reserved := range []map[string]string{kubeReserved, cfg.SystemReserved} {
		for k, v := range reserved {
			if err := subtract(allocatable, corev1.ResourceName(k), v); err != nil {
				return nil, err
			}
		}
	}
	eviction := cfg.EvictionHard
	if eviction == nil {
		// The kubelet's defaults.
		eviction = map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}
	}
	for signal, res := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		v, ok := eviction[signal]
		if !ok {
			continue
		}
		if pct, isPct := strings.CutSuffix(v, "%"); isPct {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil {
				return nil, fmt.Errorf("eviction-hard %s=%s: %w", signal, v, err)
			}
			c := capacity[res]
			v = strconv.FormatInt(int64(math.Ceil(float64(c.Value())*f/100)), 10)
		}
		if err := subtract(allocatable, res, v); err != nil {
			return nil, err
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			kwokNodeKey: kwokNodeValue, "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", inst.Zone, inst.ID), Taints: cfg.Taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable, Phase: corev1.NodePending,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.IP}, {Type: corev1.NodeInternalDNS, Address: name}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: "linux", KubeletVersion: "v1.33.0-eks", ContainerRuntimeVersion: "containerd://1.7.27"},
		},
	}, nil
}

func subtract(list corev1.ResourceList, name corev1.ResourceName, value string) error {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return fmt.Errorf("reserved %s=%s: %w", name, value, err)
	}
	have, ok := list[name]
	if !ok {
		return nil
	}
	have.Sub(q)
	if have.Sign() < 0 {
		have = resource.MustParse("0")
	}
	list[name] = have
	return nil
}

// register creates the Node and its status, tolerating a Node that
// exists already (a booter restarted over the same cluster).
func (b *Booter) register(ctx context.Context, node *corev1.Node) error {
	created := node.DeepCopy()
	if err := b.kube.Create(ctx, created); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	if len(created.Status.Capacity) == 0 {
		created.Status = node.Status
		if err := b.kube.Status().Update(ctx, created); err != nil {
			return fmt.Errorf("setting status of node %s: %w", node.Name, err)
		}
	}
	return nil
}

// amiKubeReserved is what the EKS-optimized images' bootstrap (nodeadm,
// bootstrap.sh, Bottlerocket's settings) reserves for the kubelet when the
// user data does not say: cpu 6% of the first core, 1% of the second, 0.5%
// of the third and fourth, 0.25% of each core above four; memory
// 11 MiB per pod plus 255 MiB. A real node of the type shows this much less
// allocatable, and so must a booted one.
func amiKubeReserved(vcpus, maxPods int64) map[string]string {
	var milli int64
	if vcpus >= 1 {
		milli += 60
	}
	if vcpus >= 2 {
		milli += 10
	}
	milli += 5 * min(2, max(0, vcpus-2))
	if vcpus > 4 {
		milli += (vcpus - 4) * 25 / 10
	}
	return map[string]string{
		string(corev1.ResourceCPU):    fmt.Sprintf("%dm", milli),
		string(corev1.ResourceMemory): fmt.Sprintf("%dMi", 11*maxPods+255),
	}
}
