package overlay

import (
	"errors"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// itype is a two-zone type with spot and on-demand offerings; spot costs
// 40% of on-demand.
func itype(name string, onDemand float64) *scheduling.InstanceType {
	it := &scheduling.InstanceType{
		Name: name,
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
			scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, "zone-a", "zone-b"),
			scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, "spot", "on-demand"),
		),
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}
	for _, z := range []string{"zone-a", "zone-b"} {
		it.Offerings = append(it.Offerings,
			scheduling.Offering{Zone: z, CapacityType: "spot", Price: onDemand * 0.4, Available: true},
			scheduling.Offering{Zone: z, CapacityType: "on-demand", Price: onDemand, Available: true})
	}
	return it
}

type ov struct {
	name   string
	weight int32 // 0: unset
	reqs   []v1alpha1.NodeSelectorRequirement
	price  string // "=x" for price, otherwise priceAdjustment
	cap    corev1.ResourceList
}

func (o ov) build() v1alpha1.NodeOverlay {
	out := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: o.name}}
	out.Spec.Requirements = o.reqs
	if o.weight != 0 {
		w := o.weight
		out.Spec.Weight = &w
	}
	switch {
	case o.price == "":
	case o.price[0] == '=':
		p := o.price[1:]
		out.Spec.Price = &p
	default:
		p := o.price
		out.Spec.PriceAdjustment = &p
	}
	out.Spec.Capacity = o.cap
	return out
}

func in(key string, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func typeIs(names ...string) []v1alpha1.NodeSelectorRequirement {
	return []v1alpha1.NodeSelectorRequirement{in(corev1.LabelInstanceTypeStable, names...)}
}

// price is the instance type's offering price in the pool after the
// overlays ("type/zone/capacity-type").
type price struct {
	pool, it, zone, ct string
	want               float64
}

func TestEvaluate(t *testing.T) {
	device := corev1.ResourceName("example.com/device")
	other := corev1.ResourceName("example.com/other")
	pools := func() []Pool {
		return []Pool{
			{Name: "default", InstanceTypes: []*scheduling.InstanceType{itype("small", 1), itype("large", 2)}},
			{Name: "team", Labels: map[string]string{"team": "a"}, InstanceTypes: []*scheduling.InstanceType{itype("small", 1), itype("large", 2)}},
		}
	}
	for _, tc := range []struct {
		name     string
		overlays []ov
		verdicts map[string]string // overlay -> reason ("" valid)
		prices   []price
		capacity map[string]corev1.ResourceList // "pool/type" -> extended resources expected
	}{
		{
			name:     "price replaces every offering of the selected type",
			overlays: []ov{{name: "a", reqs: typeIs("large"), price: "=0.3"}},
			verdicts: map[string]string{"a": ""},
			prices: []price{{"default", "large", "zone-a", "on-demand", 0.3}, {"team", "large", "zone-b", "spot", 0.3},
				{"default", "small", "zone-a", "on-demand", 1}},
		},
		{
			name:     "percentage halves",
			overlays: []ov{{name: "a", reqs: typeIs("large"), price: "-50%"}},
			verdicts: map[string]string{"a": ""},
			prices:   []price{{"default", "large", "zone-a", "on-demand", 1}, {"default", "large", "zone-a", "spot", 0.4}},
		},
		{
			name:     "percentage raises",
			overlays: []ov{{name: "a", reqs: typeIs("small"), price: "+10%"}},
			verdicts: map[string]string{"a": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 1.1}},
		},
		{
			name:     "absolute adjustment",
			overlays: []ov{{name: "a", reqs: typeIs("small"), price: "+0.25"}},
			prices:   []price{{"default", "small", "zone-b", "on-demand", 1.25}, {"default", "small", "zone-b", "spot", 0.65}},
		},
		{
			name:     "negative result clamps at zero",
			overlays: []ov{{name: "a", reqs: typeIs("small"), price: "-5"}},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0}},
		},
		{
			name:     "-100% is free",
			overlays: []ov{{name: "a", reqs: typeIs("small"), price: "-100%"}},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0}},
		},
		{
			name: "offering requirements select offerings: spot only",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in(scheduling.LabelCapacityType, "spot")},
				price: "=0.01"}},
			prices: []price{{"default", "small", "zone-a", "spot", 0.01}, {"default", "small", "zone-a", "on-demand", 1},
				{"default", "large", "zone-b", "spot", 0.01}},
		},
		{
			name:     "zone selects offerings",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in(corev1.LabelTopologyZone, "zone-b")}, price: "=9"}},
			prices:   []price{{"default", "small", "zone-b", "on-demand", 9}, {"default", "small", "zone-a", "on-demand", 1}},
		},
		{
			name:     "pool template labels select pools",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in("team", "a")}, price: "=0.5"}},
			prices:   []price{{"team", "small", "zone-a", "on-demand", 0.5}, {"default", "small", "zone-a", "on-demand", 1}},
		},
		{
			name:     "nodepool label selects pools",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in("karpenter.sh/nodepool", "default")}, price: "=0.5"}},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.5}, {"team", "small", "zone-a", "on-demand", 1}},
		},
		{
			name:     "a label nobody has selects nothing",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in("example.com/unknown", "x")}, price: "=0.5"}},
			verdicts: map[string]string{"a": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 1}},
		},
		{
			name:     "NotIn on an absent label selects everything",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{{Key: "example.com/unknown", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}}, price: "=0.5"}},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.5}},
		},
		{
			name: "higher weight wins the price",
			overlays: []ov{
				{name: "low", weight: 1, reqs: typeIs("small"), price: "=0.7"},
				{name: "high", weight: 10, reqs: typeIs("small"), price: "=0.2"},
			},
			verdicts: map[string]string{"low": "", "high": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.2}},
		},
		{
			name: "a set weight beats an unset one",
			overlays: []ov{
				{name: "unset", reqs: typeIs("small"), price: "=0.7"},
				{name: "one", weight: 1, reqs: typeIs("small"), price: "=0.2"},
			},
			verdicts: map[string]string{"unset": "", "one": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.2}},
		},
		{
			name: "equal weights on the same offering: the later name applies, the other conflicts",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small"), price: "=0.7"},
				{name: "beta", weight: 5, reqs: typeIs("small"), price: "=0.2"},
			},
			verdicts: map[string]string{"alpha": v1alpha1.ConditionReasonConflict, "beta": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.2}},
		},
		{
			name: "a conflicting overlay is applied nowhere, even where it did not conflict",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small", "large"), price: "=0.7"},
				{name: "beta", weight: 5, reqs: typeIs("small"), price: "=0.2"},
			},
			verdicts: map[string]string{"alpha": v1alpha1.ConditionReasonConflict, "beta": ""},
			prices:   []price{{"default", "large", "zone-a", "on-demand", 2}},
		},
		{
			name: "equal weights on disjoint offerings do not conflict",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small"), price: "=0.7"},
				{name: "beta", weight: 5, reqs: typeIs("large"), price: "=0.2"},
			},
			verdicts: map[string]string{"alpha": "", "beta": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.7}, {"default", "large", "zone-a", "on-demand", 0.2}},
		},
		{
			name: "equal weights below a higher one still conflict with each other",
			overlays: []ov{
				{name: "top", weight: 10, reqs: typeIs("small"), price: "=0.1"},
				{name: "alpha", weight: 5, reqs: typeIs("small"), price: "=0.7"},
				{name: "beta", weight: 5, reqs: typeIs("small"), price: "=0.2"},
			},
			verdicts: map[string]string{"top": "", "beta": "", "alpha": v1alpha1.ConditionReasonConflict},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.1}},
		},
		{
			name: "price and capacity overlays of equal weight do not conflict",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small"), price: "=0.7"},
				{name: "beta", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("4")}},
			},
			verdicts: map[string]string{"alpha": "", "beta": ""},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 0.7}},
			capacity: map[string]corev1.ResourceList{"default/small": {device: resource.MustParse("4")}},
		},
		{
			name:     "capacity adds an extended resource",
			overlays: []ov{{name: "a", reqs: typeIs("large"), cap: corev1.ResourceList{device: resource.MustParse("4")}}},
			capacity: map[string]corev1.ResourceList{"default/large": {device: resource.MustParse("4")}, "default/small": {}},
		},
		{
			name: "capacity of different resources merges at equal weight",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("4")}},
				{name: "beta", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{other: resource.MustParse("1")}},
			},
			verdicts: map[string]string{"alpha": "", "beta": ""},
			capacity: map[string]corev1.ResourceList{"default/small": {device: resource.MustParse("4"), other: resource.MustParse("1")}},
		},
		{
			name: "capacity of the same resource conflicts at equal weight",
			overlays: []ov{
				{name: "alpha", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("4")}},
				{name: "beta", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("8")}},
			},
			verdicts: map[string]string{"alpha": v1alpha1.ConditionReasonConflict, "beta": ""},
			capacity: map[string]corev1.ResourceList{"default/small": {device: resource.MustParse("8")}},
		},
		{
			name: "capacity of the same resource: higher weight wins",
			overlays: []ov{
				{name: "alpha", weight: 9, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("4")}},
				{name: "beta", weight: 5, reqs: typeIs("small"), cap: corev1.ResourceList{device: resource.MustParse("8"), other: resource.MustParse("2")}},
			},
			verdicts: map[string]string{"alpha": "", "beta": ""},
			capacity: map[string]corev1.ResourceList{"default/small": {device: resource.MustParse("4"), other: resource.MustParse("2")}},
		},
		{
			name:     "runtime validation refuses overlaid cpu",
			overlays: []ov{{name: "a", reqs: typeIs("small"), cap: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
			verdicts: map[string]string{"a": v1alpha1.ConditionReasonRuntimeValidation},
			capacity: map[string]corev1.ResourceList{"default/small": {}},
		},
		{
			name:     "runtime validation refuses a restricted key",
			overlays: []ov{{name: "a", reqs: []v1alpha1.NodeSelectorRequirement{in("karpenter.sh/custom", "x")}, price: "=0"}},
			verdicts: map[string]string{"a": v1alpha1.ConditionReasonRuntimeValidation},
			prices:   []price{{"default", "small", "zone-a", "on-demand", 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var overlays []v1alpha1.NodeOverlay
			for _, o := range tc.overlays {
				overlays = append(overlays, o.build())
			}
			in := pools()
			store, verdicts := Evaluate(overlays, in)
			for name, want := range tc.verdicts {
				if got := verdicts[name]; got.Reason != want {
					t.Errorf("verdict of %s = %+v, want reason %q", name, got, want)
				}
			}
			applied := map[string]map[string]*scheduling.InstanceType{}
			for _, p := range in {
				its, err := store.Apply(p.Name, p.InstanceTypes)
				if err != nil {
					t.Fatal(err)
				}
				applied[p.Name] = map[string]*scheduling.InstanceType{}
				for i, it := range its {
					applied[p.Name][it.Name] = it
					// No case sets a price equal to the provider's, so an
					// offering is marked overlaid exactly when its price
					// changed: the AWS launch ranks by the marked ones.
					for j, o := range it.Offerings {
						if changed := o.Price != p.InstanceTypes[i].Offerings[j].Price; o.PriceOverlaid != changed {
							t.Errorf("%s/%s offering %s/%s PriceOverlaid = %v, price changed %v", p.Name, it.Name, o.Zone, o.CapacityType, o.PriceOverlaid, changed)
						}
					}
				}
			}
			for _, want := range tc.prices {
				it := applied[want.pool][want.it]
				found := false
				for _, o := range it.Offerings {
					if o.Zone == want.zone && o.CapacityType == want.ct {
						found = true
						if math.Abs(o.Price-want.want) > 1e-9 {
							t.Errorf("%s/%s/%s/%s price = %v, want %v", want.pool, want.it, want.zone, want.ct, o.Price, want.want)
						}
					}
				}
				if !found {
					t.Errorf("%+v: no such offering", want)
				}
			}
			for key, want := range tc.capacity {
				var pool, name string
				for i := range key {
					if key[i] == '/' {
						pool, name = key[:i], key[i+1:]
					}
				}
				it := applied[pool][name]
				extended := corev1.ResourceList{}
				for k, v := range it.Capacity {
					if k != corev1.ResourceCPU {
						extended[k] = v
					}
				}
				if cpu := it.Capacity[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("2")) != 0 {
					t.Errorf("%s cpu = %s, want 2 (untouched)", key, cpu.String())
				}
				if len(extended) != len(want) {
					t.Errorf("%s extended capacity = %v, want %v", key, extended, want)
				}
				for k, v := range want {
					if got := extended[k]; got.Cmp(v) != 0 {
						t.Errorf("%s %s = %s, want %s", key, k, got.String(), v.String())
					}
				}
			}
			// The provider's instance types are never modified.
			for _, p := range in {
				for _, it := range p.InstanceTypes {
					if len(it.Capacity) != 1 || it.Offerings[1].Price != map[string]float64{"small": 1, "large": 2}[it.Name] {
						t.Errorf("input %s/%s was modified: %+v", p.Name, it.Name, it)
					}
				}
			}
		})
	}
}

func TestApplyUnevaluated(t *testing.T) {
	store, _ := Evaluate(nil, []Pool{{Name: "default"}})
	its := []*scheduling.InstanceType{itype("small", 1)}
	got, err := store.Apply("default", its)
	if err != nil || len(got) != 1 || got[0] != its[0] {
		t.Fatalf("evaluated pool without overlays: got %v, %v; want the input unchanged", got, err)
	}
	if _, err := store.Apply("new", its); !IsUnevaluated(err) {
		t.Fatalf("unevaluated pool: err = %v, want UnevaluatedError", err)
	}
	var empty *Store
	if _, err := empty.Apply("default", its); !errors.As(err, new(*UnevaluatedError)) {
		t.Fatalf("nil store: err = %v, want UnevaluatedError", err)
	}
}

func TestAdjustedPrice(t *testing.T) {
	for _, tc := range []struct {
		price  float64
		change string
		want   float64
	}{
		{1, "", 1},
		{1, "0.25", 0.25},
		{1, "+0.5", 1.5},
		{1, "-0.5", 0.5},
		{1, "-1.5", 0},
		{2, "+10%", 2.2},
		{2, "-15%", 1.7},
		{2, "-100%", 0},
		{2, "+.5", 2.5},
		{2, "bogus", 2},
	} {
		if got := AdjustedPrice(tc.price, tc.change); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("AdjustedPrice(%v, %q) = %v, want %v", tc.price, tc.change, got, tc.want)
		}
	}
}
