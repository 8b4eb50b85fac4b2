package e2e_test

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const iceZone = "test-zone-a"

// offeringPrices lists, cheapest first, the on-demand price in iceZone of
// every type in the default kwok catalog that is amd64/linux, has no
// accelerator and whose allocatable fits requests. It mirrors what the
// provider would launch for the ICE test's pool.
func offeringPrices(t *testing.T, requests corev1.ResourceList) (names []string, prices map[string]float64) {
	t.Helper()
	its, err := kwok.LoadCatalog(kwok.CatalogDefault)
	require.NoError(t, err)
	reqs, err := scheduling.RequirementsFromNodeSelector([]corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{iceZone}},
		{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	})
	require.NoError(t, err)
	prices = map[string]float64{}
	for _, it := range its {
		if reqs.Intersects(it.Requirements) != nil || !fitsIn(requests, cloudprovider.Allocatable(it)) {
			continue
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && o.Zone == iceZone && o.CapacityType == v1.CapacityTypeOnDemand {
				prices[it.Name] = o.Price
				names = append(names, it.Name)
			}
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return prices[names[i]] < prices[names[j]] })
	return names, prices
}

func fitsIn(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		a, ok := allocatable[name]
		if !ok || a.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// TestInsufficientCapacity injects ICE for the cheapest offering the pool
// can use (every type at the lowest price, in the pool's one zone, on
// demand). The NodeClaim that hits it is deleted with an
// InsufficientCapacityError event, the next-cheapest offering launches, and
// the pod runs there.
func TestInsufficientCapacity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// One pod of 1 CPU: the NodeClaim asks for it plus one pod slot.
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
		corev1.ResourcePods:   resource.MustParse("1"),
	}
	names, prices := offeringPrices(t, requests)
	require.NotEmpty(t, names)
	cheapest := prices[names[0]]
	iced := sets.New[string]()
	var iceSpec []string
	next := math.Inf(1)
	for _, n := range names {
		if prices[n] == cheapest {
			iced.Insert(n)
			iceSpec = append(iceSpec, n+"/"+iceZone+"/"+v1.CapacityTypeOnDemand)
		} else if prices[n] < next {
			next = prices[n]
		}
	}
	require.False(t, math.IsInf(next, 1), "the catalog needs a second price tier")
	t.Logf("ICE for %v at $%.4f/h; next offering at $%.4f/h", sets.List(iced), cheapest, next)

	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	pool := failurePoolYAML("ice", 0,
		requirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, iceZone),
		requirement("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"))
	for _, m := range []string{pool, failureDeploymentYAML("ice-app", "ice", 1, "1", nil)} {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)))
	}
	startController(t, cp, "controller", "--kwok-faults=ice="+strings.Join(iceSpec, ","))

	// The launch on the cheapest offering fails and that NodeClaim goes.
	var icedClaim, message string
	require.Eventually(t, func() bool {
		var events corev1.EventList
		if err := cp.Client.List(ctx, &events); err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "NodeClaim" && e.Reason == "InsufficientCapacityError" {
				icedClaim, message = e.InvolvedObject.Name, e.Message
				return true
			}
		}
		return false
	}, 2*time.Minute, 250*time.Millisecond, "an InsufficientCapacityError event should be recorded on a NodeClaim")
	t.Logf("event on %s: %s", icedClaim, message)
	require.Contains(t, message, iceZone+"/"+v1.CapacityTypeOnDemand)
	found := false
	for n := range iced {
		found = found || strings.Contains(message, n+"/")
	}
	require.True(t, found, "the event should name an iced instance type")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKey{Name: icedClaim}, &v1.NodeClaim{}))
	}, time.Minute, 250*time.Millisecond, "the iced NodeClaim should be deleted")

	// The next offering launches and the pod runs on it.
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=ice-app") == 1
	}, 2*time.Minute, time.Second, "the pod should run on the next offering")
	var pods corev1.PodList
	require.NoError(t, cp.Client.List(ctx, &pods, client.MatchingLabels{"app": "ice-app"}))
	node := &corev1.Node{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node))
		}
	}
	it := node.Labels[corev1.LabelInstanceTypeStable]
	t.Logf("pod runs on %s (%s)", node.Name, it)
	require.False(t, iced.Has(it), "no node of an iced type should launch")
	require.Equal(t, iceZone, node.Labels[corev1.LabelTopologyZone])
	require.Equal(t, v1.CapacityTypeOnDemand, node.Labels[v1.CapacityTypeLabelKey])
	require.InDelta(t, next, prices[it], 1e-9, "the next-cheapest offering should launch, got %s", it)

	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	for _, nc := range claims.Items {
		require.False(t, iced.Has(nc.Labels[corev1.LabelInstanceTypeStable]), "nodeclaim %s launched an iced type", nc.Name)
	}
	log := controllerLog(t, cp)
	require.Contains(t, log, `"message":"failed launching nodeclaim"`)
	require.Contains(t, log, "has no capacity")
}
