package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

// Objects are the API objects every answer is computed from. They are also
// the snapshot file format (`karpenter snapshot`), so that an answer can be
// reproduced offline from a file attached to a bug report.
type Objects struct {
	// Time is when the objects were listed; offline answers judge budget
	// schedules and do-not-disrupt durations against it.
	Time                   metav1.Time                    `json:"time"`
	NodePools              []v1.NodePool                  `json:"nodePools,omitempty"`
	NodeClaims             []v1.NodeClaim                 `json:"nodeClaims,omitempty"`
	Nodes                  []corev1.Node                  `json:"nodes,omitempty"`
	Pods                   []corev1.Pod                   `json:"pods,omitempty"`
	DaemonSets             []appsv1.DaemonSet             `json:"daemonSets,omitempty"`
	Namespaces             []corev1.Namespace             `json:"namespaces,omitempty"`
	PodDisruptionBudgets   []policyv1.PodDisruptionBudget `json:"podDisruptionBudgets,omitempty"`
	PersistentVolumeClaims []corev1.PersistentVolumeClaim `json:"persistentVolumeClaims,omitempty"`
	PersistentVolumes      []corev1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses         []storagev1.StorageClass       `json:"storageClasses,omitempty"`
	// EC2NodeClasses are listed when the cluster serves them (the AWS
	// provider), for `simulate` of class edits.
	EC2NodeClasses []awsv1.EC2NodeClass `json:"ec2NodeClasses,omitempty"`
	// NodeOverlays are listed when the cluster serves them. The answers
	// apply those the controller marked Ready, which it does only with the
	// NodeOverlay gate on: prices and capacity are then the controller's.
	NodeOverlays []v1alpha1.NodeOverlay `json:"nodeOverlays,omitempty"`
	// CapacityBuffers are listed when the cluster serves them, and
	// BufferTemplates are the pod templates they resolve to (one per
	// buffer, named as the buffer). The answers plan for the virtual pods
	// of those the controller resolved, as its provisioning rounds do.
	CapacityBuffers []v1beta1.CapacityBuffer `json:"capacityBuffers,omitempty"`
	BufferTemplates []corev1.PodTemplate     `json:"bufferTemplates,omitempty"`
	// NominationEvents are the provisioner's Nominated events on pods
	// ("Pod should schedule on: nodeclaim/…"): which pods each NodeClaim was
	// launched for, while the API server keeps them (an hour by default).
	NominationEvents []corev1.Event `json:"nominationEvents,omitempty"`
}

// Load lists every object the answers need. It only lists: the CLI never
// writes to the cluster.
func Load(ctx context.Context, kube client.Reader, now time.Time) (*Objects, error) {
	o := &Objects{Time: metav1.NewTime(now)}
	lists := []struct {
		what string
		list client.ObjectList
		take func(client.ObjectList)
	}{
		{"nodepools", &v1.NodePoolList{}, func(l client.ObjectList) { o.NodePools = l.(*v1.NodePoolList).Items }},
		{"nodeclaims", &v1.NodeClaimList{}, func(l client.ObjectList) { o.NodeClaims = l.(*v1.NodeClaimList).Items }},
		{"nodes", &corev1.NodeList{}, func(l client.ObjectList) { o.Nodes = l.(*corev1.NodeList).Items }},
		{"pods", &corev1.PodList{}, func(l client.ObjectList) { o.Pods = l.(*corev1.PodList).Items }},
		{"daemonsets", &appsv1.DaemonSetList{}, func(l client.ObjectList) { o.DaemonSets = l.(*appsv1.DaemonSetList).Items }},
		{"namespaces", &corev1.NamespaceList{}, func(l client.ObjectList) { o.Namespaces = l.(*corev1.NamespaceList).Items }},
		{"poddisruptionbudgets", &policyv1.PodDisruptionBudgetList{}, func(l client.ObjectList) {
			o.PodDisruptionBudgets = l.(*policyv1.PodDisruptionBudgetList).Items
		}},
		{"persistentvolumeclaims", &corev1.PersistentVolumeClaimList{}, func(l client.ObjectList) {
			o.PersistentVolumeClaims = l.(*corev1.PersistentVolumeClaimList).Items
		}},
		{"persistentvolumes", &corev1.PersistentVolumeList{}, func(l client.ObjectList) { o.PersistentVolumes = l.(*corev1.PersistentVolumeList).Items }},
		{"storageclasses", &storagev1.StorageClassList{}, func(l client.ObjectList) { o.StorageClasses = l.(*storagev1.StorageClassList).Items }},
	}
	for _, l := range lists {
		if err := kube.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
		l.take(l.list)
	}
	// A cluster without the AWS provider's CRD serves no EC2NodeClasses,
	// and a user may not be allowed to list them; only `simulate` of a
	// class edit needs them, and it says so when they are missing.
	classes := &awsv1.EC2NodeClassList{}
	if err := kube.List(ctx, classes); err == nil {
		o.EC2NodeClasses = classes.Items
	}
	overlays := &v1alpha1.NodeOverlayList{}
	if err := kube.List(ctx, overlays); err == nil {
		o.NodeOverlays = overlays.Items
	}
	o.loadBuffers(ctx, kube)
	// Only "why node" reads these, to say which pods a node was launched
	// for; a user who may not list events still gets every other answer.
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.MatchingFields{"reason": nominatedReason}); err == nil {
		o.NominationEvents = events.Items
	}
	o.stripManagedFields()
	return o, nil
}

// stripManagedFields drops server-side-apply bookkeeping, which is most of
// a snapshot file's size and none of its meaning.
func (o *Objects) stripManagedFields() {
	for i := range o.NodePools {
		o.NodePools[i].ManagedFields = nil
	}
	for i := range o.EC2NodeClasses {
		o.EC2NodeClasses[i].ManagedFields = nil
	}
	for i := range o.NodeOverlays {
		o.NodeOverlays[i].ManagedFields = nil
	}
	for i := range o.CapacityBuffers {
		o.CapacityBuffers[i].ManagedFields = nil
	}
	for i := range o.NodeClaims {
		o.NodeClaims[i].ManagedFields = nil
	}
	for i := range o.Nodes {
		o.Nodes[i].ManagedFields = nil
	}
	for i := range o.Pods {
		o.Pods[i].ManagedFields = nil
	}
	for i := range o.DaemonSets {
		o.DaemonSets[i].ManagedFields = nil
	}
	for i := range o.NominationEvents {
		o.NominationEvents[i].ManagedFields = nil
	}
}

// nominatedReason is the provisioner's event reason on a pod it planned
// capacity for (upstream's).
const nominatedReason = "Nominated"

// launchedFor lists the pods (namespace/name) whose Nominated events name
// the NodeClaim, sorted.
func (o *Objects) launchedFor(nodeClaim string) []string {
	if nodeClaim == "" {
		return nil
	}
	target := "nodeclaim/" + nodeClaim
	seen := map[string]bool{}
	for _, e := range o.NominationEvents {
		if e.Reason != nominatedReason || e.InvolvedObject.Kind != "Pod" {
			continue
		}
		_, targets, ok := strings.Cut(e.Message, ": ")
		if !ok {
			continue
		}
		for _, t := range strings.Split(targets, ", ") {
			if strings.TrimSpace(t) == target {
				seen[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Write saves the objects as JSON, or YAML when asYAML.
func (o *Objects) Write(w io.Writer, asYAML bool) error {
	var raw []byte
	var err error
	if asYAML {
		raw, err = yaml.Marshal(o)
	} else {
		raw, err = jsonIndent(o)
	}
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	_, err = w.Write(raw)
	return err
}

// ReadObjects reads a snapshot file written by Write (JSON or YAML).
func ReadObjects(raw []byte) (*Objects, error) {
	o := &Objects{}
	if err := yaml.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("decoding snapshot: %w", err)
	}
	return o, nil
}

// reader serves List from Objects, so the snapshot builder reads a saved
// file exactly as it reads the API server. Only the label-selector list
// option is honoured, the only one snapshot.Live uses.
type reader struct{ o *Objects }

var _ client.Reader = reader{}

// Get serves EC2NodeClasses (the AWS provider resolves a pool's class by
// name); anything else is not in a snapshot.
func (r reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if nc, ok := obj.(*awsv1.EC2NodeClass); ok {
		for i := range r.o.EC2NodeClasses {
			if r.o.EC2NodeClasses[i].Name == key.Name {
				r.o.EC2NodeClasses[i].DeepCopyInto(nc)
				return nil
			}
		}
		return apierrors.NewNotFound(awsv1.GroupVersion.WithResource("ec2nodeclasses").GroupResource(), key.Name)
	}
	return fmt.Errorf("get %T %s: not served from a snapshot", obj, key)
}

func (r reader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	sel := lo.LabelSelector
	if sel == nil {
		sel = labels.Everything()
	}
	match := func(m metav1.Object) bool {
		return sel.Matches(labels.Set(m.GetLabels())) && (lo.Namespace == "" || m.GetNamespace() == lo.Namespace)
	}
	switch l := list.(type) {
	case *v1.NodePoolList:
		l.Items = filter(r.o.NodePools, match)
	case *v1.NodeClaimList:
		l.Items = filter(r.o.NodeClaims, match)
	case *corev1.NodeList:
		l.Items = filter(r.o.Nodes, match)
	case *corev1.PodList:
		l.Items = filter(r.o.Pods, match)
	case *appsv1.DaemonSetList:
		l.Items = filter(r.o.DaemonSets, match)
	case *corev1.NamespaceList:
		l.Items = filter(r.o.Namespaces, match)
	case *policyv1.PodDisruptionBudgetList:
		l.Items = filter(r.o.PodDisruptionBudgets, match)
	case *corev1.PersistentVolumeClaimList:
		l.Items = filter(r.o.PersistentVolumeClaims, match)
	case *corev1.PersistentVolumeList:
		l.Items = filter(r.o.PersistentVolumes, match)
	case *storagev1.StorageClassList:
		l.Items = filter(r.o.StorageClasses, match)
	case *appsv1.ReplicaSetList:
		l.Items = nil // not snapshotted: expected pods are not anticipated
	default:
		return fmt.Errorf("list %T: not served from a snapshot", list)
	}
	return nil
}

// filter returns the items that match, sharing the backing array when every
// item does (the common case: no selector), so a 50,000-pod list costs no copy.
func filter[T any, PT interface {
	*T
	metav1.Object
}](items []T, match func(metav1.Object) bool) []T {
	all := true
	for i := range items {
		if !match(PT(&items[i])) {
			all = false
			break
		}
	}
	if all {
		return items
	}
	var out []T
	for i := range items {
		if match(PT(&items[i])) {
			out = append(out, items[i])
		}
	}
	return out
}

// podByName finds a pod.
func (o *Objects) podByName(nn types.NamespacedName) *corev1.Pod {
	for i := range o.Pods {
		if o.Pods[i].Namespace == nn.Namespace && o.Pods[i].Name == nn.Name {
			return &o.Pods[i]
		}
	}
	return nil
}
