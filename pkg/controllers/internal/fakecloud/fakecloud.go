// Package fakecloud is an in-memory CloudProvider for controller tests: it
// counts calls, lets tests inject Create errors, and terminates instances
// in two steps (the first Delete starts termination, the next reports
// not-found), which is the contract the controllers must cope with.
package fakecloud

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// ProviderIDPrefix starts every provider ID; the NodeClaim name follows.
const ProviderIDPrefix = "fake:///"

// Provider is the fake. Set fields before use or under Lock.
type Provider struct {
	sync.Mutex
	Clock clock.PassiveClock
	// CreateErr, when set, is returned by Create (and cleared if
	// CreateErrOnce).
	CreateErr     error
	CreateErrOnce bool
	// DeleteErr, when set, is returned by Delete (a cloud refusing to
	// terminate, e.g. unauthorized).
	DeleteErr error
	// CreateLabels are added to every launched NodeClaim.
	CreateLabels map[string]string
	// BeforeList, when set, runs at the start of every List call (outside
	// the lock), so tests can inject faults such as a panic.
	BeforeList func()
	ListCalls  int
	// Catalog is what GetInstanceTypes returns for every NodePool.
	Catalog []*cloudprovider.InstanceType

	Instances   map[string]*v1.NodeClaim // by provider ID
	terminating map[string]bool
	CreateCalls int
	DeleteCalls int
	DeletedIDs  []string
	GetCalls    int
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns an empty provider.
func New(clk clock.PassiveClock) *Provider {
	return &Provider{Clock: clk, Instances: map[string]*v1.NodeClaim{}, terminating: map[string]bool{}}
}

// Create implements cloudprovider.CloudProvider.
func (p *Provider) Create(_ context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	p.Lock()
	defer p.Unlock()
	p.CreateCalls++
	if p.CreateErr != nil {
		err := p.CreateErr
		if p.CreateErrOnce {
			p.CreateErr = nil
		}
		return nil, err
	}
	out := nc.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[corev1.LabelInstanceTypeStable] = "fake.large"
	out.Labels[corev1.LabelTopologyZone] = "test-zone-a"
	out.Labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeOnDemand
	for k, v := range p.CreateLabels {
		out.Labels[k] = v
	}
	out.Status.ProviderID = ProviderIDPrefix + nc.Name
	out.Status.ImageID = "fake-image-1"
	out.Status.Capacity = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	out.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3900m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	inst := out.DeepCopy()
	inst.CreationTimestamp = metav1.NewTime(p.Clock.Now())
	p.Instances[out.Status.ProviderID] = inst
	return out, nil
}

// AddInstance registers an instance that no Create made (a leak).
func (p *Provider) AddInstance(name string, created metav1.Time) string {
	p.Lock()
	defer p.Unlock()
	id := ProviderIDPrefix + name
	p.Instances[id] = &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Status: v1.NodeClaimStatus{ProviderID: id}}
	return id
}

// Delete implements cloudprovider.CloudProvider: the first call on a live
// instance starts termination and returns nil; once terminating the
// instance is gone and calls return NodeClaimNotFoundError.
func (p *Provider) Delete(_ context.Context, nc *v1.NodeClaim) error {
	p.Lock()
	defer p.Unlock()
	p.DeleteCalls++
	if p.DeleteErr != nil {
		return p.DeleteErr
	}
	id := nc.Status.ProviderID
	if _, ok := p.Instances[id]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %q not found", id))
	}
	if p.terminating[id] {
		delete(p.Instances, id)
		delete(p.terminating, id)
		p.DeletedIDs = append(p.DeletedIDs, id)
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %q terminated", id))
	}
	p.terminating[id] = true
	return nil
}

// Has reports whether the instance still exists.
func (p *Provider) Has(id string) bool {
	p.Lock()
	defer p.Unlock()
	_, ok := p.Instances[id]
	return ok
}

// Get implements cloudprovider.CloudProvider.
func (p *Provider) Get(_ context.Context, id string) (*v1.NodeClaim, error) {
	p.Lock()
	defer p.Unlock()
	p.GetCalls++
	if inst, ok := p.Instances[id]; ok {
		return inst.DeepCopy(), nil
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %q not found", id))
}

// List implements cloudprovider.CloudProvider.
func (p *Provider) List(context.Context) ([]*v1.NodeClaim, error) {
	p.Lock()
	hook := p.BeforeList
	p.ListCalls++
	p.Unlock()
	if hook != nil {
		hook()
	}
	p.Lock()
	defer p.Unlock()
	out := make([]*v1.NodeClaim, 0, len(p.Instances))
	for _, inst := range p.Instances {
		out = append(out, inst.DeepCopy())
	}
	return out, nil
}

// GetInstanceTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	p.Lock()
	defer p.Unlock()
	return p.Catalog, nil
}

// IsDrifted implements cloudprovider.CloudProvider.
func (p *Provider) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// RepairPolicies implements cloudprovider.CloudProvider.
func (p *Provider) RepairPolicies() []cloudprovider.RepairPolicy { return nil }

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return "fake" }

// GetSupportedNodeClasses implements cloudprovider.CloudProvider: none, so
// every NodeClaim counts as managed.
func (p *Provider) GetSupportedNodeClasses() []cloudprovider.NodeClass { return nil }
