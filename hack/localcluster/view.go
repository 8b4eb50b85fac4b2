package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// watch prints the cluster as a user of `make run` wants to see it: the
// NodeClaims with their lifecycle conditions, the nodes, pending and running
// pods and what the capacity costs per hour. It prints only when something
// changed, so the terminal reads as a history of the scale-up.
func watch(ctx context.Context, c client.Client, out io.Writer, every time.Duration, price priceFunc) {
	last := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if view, err := render(ctx, c, price); err == nil && view != last {
			fmt.Fprintf(out, "\n── %s ──\n%s", time.Now().Format("15:04:05"), view)
			last = view
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// priceFunc is a node's price per hour, when known.
type priceFunc func(corev1.Node) (float64, bool)

// nodePrice prices nodes from what the provider put on them: for the local
// AWS, its price table for the node's type, zone and capacity type (the
// prices the controller reads through the Pricing and spot-price APIs);
// for kwok, the price label kwok nodes carry.
func nodePrice(local *awslocal.Local) priceFunc {
	if local == nil {
		return func(n corev1.Node) (float64, bool) {
			p, err := strconv.ParseFloat(n.Labels[kwokv1alpha1.NodeViewerPriceLabelKey], 64)
			return p, err == nil
		}
	}
	return func(n corev1.Node) (float64, bool) {
		it := n.Labels[corev1.LabelInstanceTypeStable]
		if n.Labels[v1.CapacityTypeLabelKey] == "spot" {
			return local.SpotPrice(awslocal.DefaultRegion, n.Labels[corev1.LabelTopologyZone], it)
		}
		return local.OnDemandPrice(it, awslocal.DefaultRegion)
	}
}

func render(ctx context.Context, c client.Client, price priceFunc) (string, error) {
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return "", err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return "", err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return "", err
	}
	pending, running := 0, 0
	for _, p := range pods.Items {
		switch p.Status.Phase {
		case corev1.PodPending:
			pending++
		case corev1.PodRunning:
			running++
		}
	}
	cost, ready := 0.0, 0
	for _, n := range nodes.Items {
		if p, ok := price(n); ok {
			cost += p
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "nodeclaims %d | nodes %d (%d ready) | pods %d pending, %d running | $%.4f/h\n",
		len(claims.Items), len(nodes.Items), ready, pending, running, cost)
	if len(claims.Items) == 0 {
		return b.String(), nil
	}
	sort.Slice(claims.Items, func(i, j int) bool { return claims.Items[i].Name < claims.Items[j].Name })
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  NODECLAIM\tTYPE\tZONE\tCAPACITY\tNODE\tLAUNCHED\tREGISTERED\tINITIALIZED\tREADY")
	for _, nc := range claims.Items {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", nc.Name,
			dash(nc.Labels[corev1.LabelInstanceTypeStable]), dash(nc.Labels[corev1.LabelTopologyZone]),
			dash(nc.Labels[v1.CapacityTypeLabelKey]), dash(nc.Status.NodeName),
			status(nc, v1.ConditionTypeLaunched), status(nc, v1.ConditionTypeRegistered),
			status(nc, v1.ConditionTypeInitialized), status(nc, v1.ConditionTypeReady))
	}
	w.Flush()
	return b.String(), nil
}

func status(nc v1.NodeClaim, condType string) string {
	for _, c := range nc.Status.Conditions {
		if c.Type == condType {
			return string(c.Status)
		}
	}
	return "-"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
