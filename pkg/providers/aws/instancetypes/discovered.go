package instancetypes

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// DiscoveredCapacityTTL is how long a memory capacity seen on a real node
// stands in for the estimate (upstream's discovered-capacity cache TTL).
const DiscoveredCapacityTTL = 60 * 24 * time.Hour

// discovered is the memory capacity real nodes reported, by instance type
// and the set of AMIs of the class that launched them: the hypervisor's
// and the image's share of memory is what VM_MEMORY_OVERHEAD_PERCENT only
// estimates, and it differs between images.
type discovered struct {
	memory  resource.Quantity
	expires time.Time
}

// RecordCapacity takes a registered node's memory capacity as the real
// capacity of its instance type for nodeClass, as upstream's capacity
// controller does: only when the node runs an image the class still maps to
// its type (a node of an older image says nothing about new launches), and
// only when it is no larger than what is known (seeing the same value again
// renews it). It reports whether the stored value changed.
func (p *Provider) RecordCapacity(ctx context.Context, node *corev1.Node, imageID string, nodeClass *awsv1.EC2NodeClass) bool {
	instanceType := node.Labels[corev1.LabelInstanceTypeStable]
	memory, ok := node.Status.Capacity[corev1.ResourceMemory]
	if instanceType == "" || !ok || memory.IsZero() || !currentImage(node.Labels, imageID, nodeClass) {
		return false
	}
	key := discoveredKey(instanceType, nodeClass)
	now := p.opts.Clock.Now()
	p.discoveredMu.Lock()
	defer p.discoveredMu.Unlock()
	old, known := p.discovered[key]
	if known && now.Before(old.expires) && memory.Cmp(old.memory) > 0 {
		return false
	}
	p.discovered[key] = discovered{memory: memory.DeepCopy(), expires: now.Add(DiscoveredCapacityTTL)}
	changed := !known || !now.Before(old.expires) || memory.Cmp(old.memory) != 0
	if changed {
		p.discoveredSeq++
		log.FromContext(ctx).V(1).Info("updating discovered capacity cache", "instance-type", instanceType, "memory-capacity", memory.String())
	}
	return changed
}

// discoveredFor returns the memory capacities known for nodeClass's AMIs,
// by instance type, and the store's version for the overlay fingerprint.
func (p *Provider) discoveredFor(nodeClass *awsv1.EC2NodeClass) (map[string]resource.Quantity, uint64) {
	p.discoveredMu.Lock()
	defer p.discoveredMu.Unlock()
	if len(p.discovered) == 0 {
		return nil, p.discoveredSeq
	}
	suffix := "/" + amiHash(nodeClass)
	now := p.opts.Clock.Now()
	var out map[string]resource.Quantity
	for key, d := range p.discovered {
		if !now.Before(d.expires) {
			delete(p.discovered, key)
			p.discoveredSeq++
			continue
		}
		if len(key) > len(suffix) && key[len(key)-len(suffix):] == suffix {
			if out == nil {
				out = map[string]resource.Quantity{}
			}
			out[key[:len(key)-len(suffix)]] = d.memory
		}
	}
	return out, p.discoveredSeq
}

func discoveredKey(instanceType string, nodeClass *awsv1.EC2NodeClass) string {
	return instanceType + "/" + amiHash(nodeClass)
}

// amiHash identifies the class's resolved AMIs, whatever their order.
func amiHash(nodeClass *awsv1.EC2NodeClass) string {
	ids := make([]string, 0, len(nodeClass.Status.AMIs))
	for _, a := range nodeClass.Status.AMIs {
		ids = append(ids, a.ID)
	}
	sort.Strings(ids)
	raw, _ := json.Marshal(ids)
	h := fnv.New64a()
	h.Write(raw)
	return fmt.Sprintf("%016x", h.Sum64())
}

// currentImage says whether imageID is an AMI of the class whose
// requirements the node's labels meet, i.e. what the class would launch
// the node's type with now.
func currentImage(labels map[string]string, imageID string, nodeClass *awsv1.EC2NodeClass) bool {
	for _, ami := range nodeClass.Status.AMIs {
		if ami.ID != imageID {
			continue
		}
		reqs, err := scheduling.RequirementsFromNodeSelector(ami.Requirements)
		if err != nil {
			continue
		}
		if labelsMeet(reqs, labels) {
			return true
		}
	}
	return false
}

// labelsMeet says whether a node with labels satisfies every requirement:
// a present label's value is allowed, an absent label is allowed only by
// NotIn and DoesNotExist.
func labelsMeet(reqs scheduling.Requirements, labels map[string]string) bool {
	for _, key := range reqs.Keys() {
		req := reqs.Get(key)
		if v, ok := labels[key]; ok {
			if !req.Has(v) {
				return false
			}
			continue
		}
		if op := req.Operator(); op != scheduling.OpNotIn && op != scheduling.OpDoesNotExist {
			return false
		}
	}
	return true
}
