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
)

// watch prints the cluster as a user of `make run` wants to see it: the
// NodeClaims with their lifecycle conditions, the nodes, pending and running
// pods and what the capacity costs per hour. It prints only when something
// changed, so the terminal reads as a history of the scale-up.
func watch(ctx context.Context, c client.Client, out io.Writer, every time.Duration) {
	last := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if view, err := render(ctx, c); err == nil && view != last {
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

func render(ctx context.Context, c client.Client) (string, error) {
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
		if price, err := strconv.ParseFloat(n.Labels[kwokv1alpha1.NodeViewerPriceLabelKey], 64); err == nil {
			cost += price
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
