package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-go/karpenter/pkg/apis"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// Changes are the edits `simulate` applies to the listed objects: NodePools
// and EC2NodeClasses replace the one of the same name (or are added), and
// Deployments set how many of their pods run (pods matching the
// Deployment's selector in its namespace), adding pending pods from its
// template or removing pods.
type Changes struct {
	NodePools      []v1.NodePool
	EC2NodeClasses []awsv1.EC2NodeClass
	Deployments    []appsv1.Deployment
}

// ReadChanges parses a multi-document YAML (or JSON) file of NodePools,
// EC2NodeClasses and Deployments. Any other kind is refused by name, so that an edit the
// simulation would silently ignore is never taken for a prediction.
func ReadChanges(raw []byte) (*Changes, error) {
	c := &Changes{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for i := 1; ; i++ {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "null" {
			continue
		}
		var meta metav1.TypeMeta
		if err := json.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		switch {
		case meta.Kind == "NodePool" && meta.APIVersion == v1.GroupVersion.String():
			np := v1.NodePool{}
			if err := yaml.UnmarshalStrict(doc, &np); err != nil {
				return nil, fmt.Errorf("document %d (NodePool): %w", i, err)
			}
			c.NodePools = append(c.NodePools, np)
		case meta.Kind == "EC2NodeClass" && meta.APIVersion == awsv1.GroupVersion.String():
			nc := awsv1.EC2NodeClass{}
			if err := yaml.UnmarshalStrict(doc, &nc); err != nil {
				return nil, fmt.Errorf("document %d (EC2NodeClass): %w", i, err)
			}
			c.EC2NodeClasses = append(c.EC2NodeClasses, nc)
		case meta.Kind == "Deployment" && meta.APIVersion == "apps/v1":
			d := appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(doc, &d); err != nil {
				return nil, fmt.Errorf("document %d (Deployment): %w", i, err)
			}
			if d.Namespace == "" {
				d.Namespace = metav1.NamespaceDefault
			}
			c.Deployments = append(c.Deployments, d)
		default:
			return nil, fmt.Errorf("document %d: %s %s cannot be simulated (NodePool karpenter.sh/v1, EC2NodeClass karpenter.k8s.aws/v1 and Deployment apps/v1 can)", i, meta.APIVersion, meta.Kind)
		}
	}
	if len(c.NodePools) == 0 && len(c.EC2NodeClasses) == 0 && len(c.Deployments) == 0 {
		return nil, fmt.Errorf("no NodePool, EC2NodeClass or Deployment to simulate")
	}
	return c, nil
}

// SimulateAnswer is `simulate`.
type SimulateAnswer struct {
	// NodeClaims are what provisioning would create for the pending pods
	// after the changes.
	NodeClaims []SimulatedNodeClaim `json:"nodeClaims,omitempty"`
	// Unschedulable counts pending pods no NodePool could take.
	Unschedulable int `json:"unschedulable,omitempty"`
	// BufferPods counts the CapacityBuffers' virtual pods the plan keeps
	// room for (its NodeClaims' pods include those placed on them).
	BufferPods int `json:"bufferPods,omitempty"`
	// Drifted are the nodes the changed NodePools and EC2NodeClasses
	// would mark Drifted.
	Drifted []SimulatedDrift `json:"drifted,omitempty"`
	// Unresolved are class edits whose effect needs the cloud: selectors
	// the controller resolves through AWS, which the CLI does not call.
	Unresolved []SimulatedUnresolved `json:"unresolved,omitempty"`
	// Disruptions are the commands the next disruption pass would start
	// (the first method that finds any, as the controller acts).
	Disruptions []SimulatedDisruption `json:"disruptions,omitempty"`
	// Evictions counts the pods those commands evict.
	Evictions int `json:"evictions"`
	// CostBefore is the $/h of today's nodes; CostAfter adds the new
	// NodeClaims and the disruptions' replacements and takes away their
	// candidates.
	CostBefore float64 `json:"costBefore"`
	CostAfter  float64 `json:"costAfter"`
	// PodsAdded and PodsRemoved are the Deployment edits' pod changes.
	PodsAdded   int `json:"podsAdded,omitempty"`
	PodsRemoved int `json:"podsRemoved,omitempty"`
}

// SimulatedNodeClaim is one NodeClaim provisioning would create.
type SimulatedNodeClaim struct {
	NodePool string `json:"nodePool"`
	// InstanceType is the cheapest type it may launch as; InstanceTypes
	// counts those it may.
	InstanceType  string  `json:"instanceType"`
	InstanceTypes int     `json:"instanceTypes"`
	Price         float64 `json:"price"`
	Pods          int     `json:"pods"`
}

// SimulatedDrift is a node a changed NodePool would drift.
type SimulatedDrift struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim"`
	NodePool  string `json:"nodePool"`
	Reason    string `json:"reason"`
}

// SimulatedUnresolved is an EC2NodeClass edit the simulation cannot follow
// to its end: its changed selectors resolve through AWS (subnets, security
// groups, AMIs, capacity reservations), so its NodeClaims may still drift
// (SubnetDrift, SecurityGroupDrift, AMIDrift, CapacityReservationDrift)
// once the controller has resolved them.
type SimulatedUnresolved struct {
	NodeClass string `json:"nodeClass"`
	// Fields are the changed selectors; all of them when the class was not
	// listed (nothing to compare with).
	Fields     []string `json:"fields"`
	NodeClaims []string `json:"nodeClaims,omitempty"`
}

// SimulatedDisruption is one disruption command.
type SimulatedDisruption struct {
	Reason       string   `json:"reason"`
	Decision     string   `json:"decision"`
	Nodes        []string `json:"nodes"`
	Replacements int      `json:"replacements"`
	Evictions    int      `json:"evictions"`
}

// Simulate applies changes to a copy of the session's objects and answers
// what the controller would do next: the NodeClaims provisioning would
// create, the nodes that would drift, the next disruption pass's commands,
// and the $/h before and after. Nothing is written anywhere.
func (s *Session) Simulate(ctx context.Context, changes *Changes) (*SimulateAnswer, error) {
	before := s.Status(ctx)
	ans := &SimulateAnswer{}
	for _, p := range before.NodePools {
		ans.CostBefore += p.CostPerHour
	}
	o, err := s.Objects.copy()
	if err != nil {
		return nil, err
	}
	changed := map[string]bool{}
	for i := range changes.NodePools {
		dp, err := defaulted(&changes.NodePools[i])
		if err != nil {
			return nil, err
		}
		np := *dp
		// As the hash controller would stamp it, so that a template edit
		// is seen as NodePoolDrifted.
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[v1.NodePoolHashAnnotationKey] = np.Hash()
		np.Annotations[v1.NodePoolHashVersionAnnotationKey] = v1.NodePoolHashVersion
		np.Status = v1.NodePoolStatus{}
		replaced := false
		for j := range o.NodePools {
			if o.NodePools[j].Name == np.Name {
				// The proposed spec on the pool as it is: its status
				// (readiness) is the cluster's, not the file's.
				np.Status = o.NodePools[j].Status
				o.NodePools[j] = np
				replaced = true
			}
		}
		if !replaced {
			// A new pool is taken as the readiness controller would
			// leave it once validated with a ready NodeClass; a class
			// that cannot be resolved still keeps it out of planning.
			np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Simulated", LastTransitionTime: o.Time}}
			o.NodePools = append(o.NodePools, np)
		}
		changed[np.Name] = true
	}
	classDrift, err := o.applyNodeClasses(changes.EC2NodeClasses, ans, s.types.classDrifter(awsv1.GroupVersion.WithKind("EC2NodeClass").GroupKind()))
	if err != nil {
		return nil, err
	}
	for i := range changes.Deployments {
		added, removed, err := o.scale(&changes.Deployments[i])
		if err != nil {
			return nil, err
		}
		ans.PodsAdded += added
		ans.PodsRemoved += removed
	}
	// Mark what the changed pools drift, as the drift controller would,
	// so that the disruption pass sees it.
	pools := map[string]*v1.NodePool{}
	for i := range o.NodePools {
		pools[o.NodePools[i].Name] = &o.NodePools[i]
	}
	for i := range o.NodeClaims {
		nc := &o.NodeClaims[i]
		pool := nc.Labels[v1.NodePoolLabelKey]
		if !nc.DeletionTimestamp.IsZero() {
			continue
		}
		reason := ""
		if changed[pool] {
			reason = disruption.TemplateDrift(pools[pool], nc)
		}
		if reason == "" {
			// The core's template checks come first, as in the drift
			// controller; then the provider's.
			reason = classDrift[nc.Name]
		}
		if reason == "" {
			continue
		}
		ans.Drifted = append(ans.Drifted, SimulatedDrift{Node: nc.Status.NodeName, NodeClaim: nc.Name, NodePool: pool, Reason: reason})
		nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
			Reason: reason, LastTransitionTime: o.Time})
	}

	after, err := NewSession(o, s.opts)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot.Build(ctx, after.view, after.provision)
	if err != nil {
		return nil, fmt.Errorf("building snapshot: %w", err)
	}
	added := 0.0
	if snap.Input != nil {
		res := scheduling.Solve(snap.Input)
		for _, nc := range res.NewNodeClaims {
			sim := SimulatedNodeClaim{NodePool: nc.NodePool, InstanceType: firstName(nc.InstanceTypes), InstanceTypes: len(nc.InstanceTypes),
				Price: nc.Price, Pods: len(nc.Pods)}
			ans.NodeClaims = append(ans.NodeClaims, sim)
			added += nc.Price
		}
		for _, pl := range res.Placements {
			switch {
			case snapshot.IsVirtual(pl.Pod):
				if pl.Scheduled() {
					ans.BufferPods++
				}
			case pl.Node == "" && pl.NodeClaim < 0:
				ans.Unschedulable++
			}
		}
	}
	sort.SliceStable(ans.NodeClaims, func(i, j int) bool {
		a, b := ans.NodeClaims[i], ans.NodeClaims[j]
		if a.NodePool != b.NodePool {
			return a.NodePool < b.NodePool
		}
		return a.InstanceType < b.InstanceType
	})

	dsnap := after.disruptionSnapshot(ctx)
	prices := poolPrices(dsnap)
	d, err := after.disruptionPass(dsnap)
	if d == nil {
		return nil, fmt.Errorf("running the disruption pass: %w", err)
	}
	for _, cmd := range d.Commands {
		sd := SimulatedDisruption{Reason: string(cmd.Method.Reason()), Decision: cmd.Decision(), Replacements: len(cmd.Replacements)}
		for _, c := range cmd.Candidates {
			sd.Nodes = append(sd.Nodes, c.Name())
			sd.Evictions += len(c.Reschedulable)
			if c.Node.Node != nil {
				if price, ok := prices[c.Node.NodePool][scheduling.OfferingKeyOf(c.Node.Node.Labels)]; ok {
					added -= price
				}
			}
		}
		for _, r := range cmd.Replacements {
			added += r.Price
		}
		ans.Evictions += sd.Evictions
		ans.Disruptions = append(ans.Disruptions, sd)
	}
	ans.CostAfter = ans.CostBefore + added
	return ans, nil
}

// applyNodeClasses puts the proposed EC2NodeClasses in place of the listed
// ones (defaulted as the API server stores them and stamped with their hash
// as the hash controller would) and returns the static drift each changed
// class causes, by NodeClaim name, with the provider's own check
// (cloudprovider.ClassDrifter; none when drifter is nil). Changed
// selectors, which only AWS can resolve, are reported in ans.Unresolved.
func (o *Objects) applyNodeClasses(classes []awsv1.EC2NodeClass, ans *SimulateAnswer, drifter cloudprovider.ClassDrifter) (map[string]string, error) {
	drift := map[string]string{}
	for i := range classes {
		nc, err := defaultedClass(&classes[i])
		if err != nil {
			return nil, err
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[awsv1.AnnotationEC2NodeClassHash] = simulatedHash(o.EC2NodeClasses, nc)
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
		var old *awsv1.EC2NodeClass
		for j := range o.EC2NodeClasses {
			if o.EC2NodeClasses[j].Name == nc.Name {
				old = o.EC2NodeClasses[j].DeepCopy()
				nc.Status = o.EC2NodeClasses[j].Status
				o.EC2NodeClasses[j] = *nc
			}
		}
		if old == nil {
			nc.Status = awsv1.EC2NodeClassStatus{}
			o.EC2NodeClasses = append(o.EC2NodeClasses, *nc)
		}
		fields := changedSelectors(old, nc)
		var unresolved []string
		for j := range o.NodeClaims {
			claim := &o.NodeClaims[j]
			ref := claim.Spec.NodeClassRef
			if ref == nil || ref.Group != awsv1.Group || ref.Name != nc.Name || claim.Status.ProviderID == "" {
				continue
			}
			var reason cloudprovider.DriftReason
			if drifter != nil {
				reason = drifter.StaticDrift(claim, nc)
			}
			if reason != "" {
				drift[claim.Name] = string(reason)
			} else if len(fields) > 0 {
				unresolved = append(unresolved, claim.Name)
			}
		}
		if len(fields) > 0 {
			sort.Strings(unresolved)
			ans.Unresolved = append(ans.Unresolved, SimulatedUnresolved{NodeClass: nc.Name, Fields: fields, NodeClaims: unresolved})
		}
	}
	return drift, nil
}

// simulatedHash is the hash annotation the controller would stamp on next.
// The hash includes the controller's cluster CA bundle, which a CLI does
// not know, so a class whose hashed fields are those of the listed class
// keeps the listed class's stamp, and any other gets a hash without the CA
// (which no stamp made with one equals, so its NodeClaims read as drifted).
func simulatedHash(listed []awsv1.EC2NodeClass, next *awsv1.EC2NodeClass) string {
	h := next.Hash(nil)
	for i := range listed {
		old := &listed[i]
		if old.Name == next.Name && old.Annotations[awsv1.AnnotationEC2NodeClassHash] != "" &&
			old.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion && old.Hash(nil) == h {
			return old.Annotations[awsv1.AnnotationEC2NodeClassHash]
		}
	}
	return h
}

// changedSelectors names the selectors of next that differ from old's (all
// of them when old is nil: the class was not listed).
func changedSelectors(old, next *awsv1.EC2NodeClass) []string {
	type selector struct {
		name      string
		old, next any
	}
	var o awsv1.EC2NodeClassSpec
	if old != nil {
		o = old.Spec
	}
	var out []string
	for _, s := range []selector{
		{"amiSelectorTerms", o.AMISelectorTerms, next.Spec.AMISelectorTerms},
		{"subnetSelectorTerms", o.SubnetSelectorTerms, next.Spec.SubnetSelectorTerms},
		{"securityGroupSelectorTerms", o.SecurityGroupSelectorTerms, next.Spec.SecurityGroupSelectorTerms},
		{"capacityReservationSelectorTerms", o.CapacityReservationSelectorTerms, next.Spec.CapacityReservationSelectorTerms},
	} {
		a, _ := json.Marshal(s.old)
		b, _ := json.Marshal(s.next)
		if old == nil || !bytes.Equal(a, b) {
			out = append(out, s.name)
		}
	}
	return out
}

// copy is a deep copy of the objects, through their JSON form (the
// snapshot file format).
func (o *Objects) copy() (*Objects, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("copying objects: %w", err)
	}
	out := &Objects{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("copying objects: %w", err)
	}
	return out, nil
}

// scale makes the Deployment's pods number its spec.replicas (default 1):
// new pods are pending copies of its template; surplus pods go as a
// ReplicaSet scales down, pending ones first, then the newest.
func (o *Objects) scale(d *appsv1.Deployment) (added, removed int, err error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil {
		return 0, 0, fmt.Errorf("deployment %s/%s: invalid selector: %v", d.Namespace, d.Name, err)
	}
	if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		return 0, 0, fmt.Errorf("deployment %s/%s: the selector does not match the template's labels", d.Namespace, d.Name)
	}
	want := 1
	if d.Spec.Replicas != nil {
		want = int(*d.Spec.Replicas)
	}
	var mine []int
	for i := range o.Pods {
		p := &o.Pods[i]
		if p.Namespace == d.Namespace && p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded &&
			p.Status.Phase != corev1.PodFailed && selector.Matches(labels.Set(p.Labels)) {
			mine = append(mine, i)
		}
	}
	switch {
	case want > len(mine):
		for n := len(mine); n < want; n++ {
			name := fmt.Sprintf("%s-simulated-%d", d.Name, n)
			pod := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: d.Spec.Template.Labels,
					Annotations: d.Spec.Template.Annotations, UID: types.UID("simulated-" + d.Namespace + "-" + name),
					CreationTimestamp: o.Time},
				Spec:   *d.Spec.Template.Spec.DeepCopy(),
				Status: corev1.PodStatus{Phase: corev1.PodPending},
			}
			o.Pods = append(o.Pods, pod)
			added++
		}
	case want < len(mine):
		sort.SliceStable(mine, func(a, b int) bool {
			pa, pb := &o.Pods[mine[a]], &o.Pods[mine[b]]
			if (pa.Spec.NodeName == "") != (pb.Spec.NodeName == "") {
				return pa.Spec.NodeName == ""
			}
			return pb.CreationTimestamp.Before(&pa.CreationTimestamp)
		})
		drop := map[int]bool{}
		for _, i := range mine[:len(mine)-want] {
			drop[i] = true
		}
		kept := o.Pods[:0]
		for i := range o.Pods {
			if !drop[i] {
				kept = append(kept, o.Pods[i])
			}
		}
		o.Pods = kept
		removed = len(drop)
	}
	return added, removed, nil
}

// defaulted applies the NodePool CRD's schema defaults to np, as the API
// server does on create, so that a proposed pool written the way a user
// writes one (without consolidationPolicy, budgets or expireAfter) is
// simulated as it would be stored.
func defaulted(np *v1.NodePool) (*v1.NodePool, error) {
	out := &v1.NodePool{}
	return out, withDefaults(np, out, nodePoolSchema, "nodepool "+np.Name)
}

// defaultedClass is defaulted for an EC2NodeClass: its schema defaults
// (metadataOptions among them) are part of the class hash, so a class
// written without them must be hashed as it would be stored.
func defaultedClass(nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	out := &awsv1.EC2NodeClass{}
	return out, withDefaults(nc, out, ec2NodeClassSchema, "ec2nodeclass "+nc.Name)
}

// withDefaults round-trips in through JSON into out with the schema's
// defaults applied.
func withDefaults(in, out any, schemaOf func() (*apiextensionsv1.JSONSchemaProps, error), what string) error {
	schema, err := schemaOf()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	var obj any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	applyDefaults(obj, schema)
	if raw, err = json.Marshal(obj); err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding defaulted %s: %w", what, err)
	}
	return nil
}

// applyDefaults sets, in every object present in x, the properties the
// schema defaults and x lacks (or holds as null), then descends; as the API
// server's structural defaulting, a default applies only inside an object
// that exists.
func applyDefaults(x any, s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for name, prop := range s.Properties {
			if v, ok := x[name]; (!ok || v == nil) && prop.Default != nil {
				var d any
				if err := json.Unmarshal(prop.Default.Raw, &d); err == nil {
					x[name] = d
				}
			}
			if v, ok := x[name]; ok {
				applyDefaults(v, &prop)
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, v := range x {
				applyDefaults(v, s.Items.Schema)
			}
		}
	}
}

// The schemas of the embedded NodePool and EC2NodeClass CRDs.
var (
	nodePoolSchema = sync.OnceValues(func() (*apiextensionsv1.JSONSchemaProps, error) {
		return crdSchema(v1.Group, "NodePool", v1.GroupVersion.Version)
	})
	ec2NodeClassSchema = sync.OnceValues(func() (*apiextensionsv1.JSONSchemaProps, error) {
		return crdSchema(awsv1.Group, "EC2NodeClass", awsv1.GroupVersion.Version)
	})
)

func crdSchema(group, kind, version string) (*apiextensionsv1.JSONSchemaProps, error) {
	crds, err := apis.CRDs()
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Spec.Group != group || crd.Spec.Names.Kind != kind {
			continue
		}
		for _, ver := range crd.Spec.Versions {
			if ver.Name == version && ver.Schema != nil && ver.Schema.OpenAPIV3Schema != nil {
				return ver.Schema.OpenAPIV3Schema, nil
			}
		}
	}
	return nil, fmt.Errorf("no %s %s schema among the embedded CRDs", kind, version)
}
