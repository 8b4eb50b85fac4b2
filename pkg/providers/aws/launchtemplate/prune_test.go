package launchtemplate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
)

// TestPrunerDeletesUnusedTemplates runs the leader's prune loop against the
// local AWS: a template of the cluster left by a previous leader and no
// longer used is deleted; one a launch keeps using, and one of another
// cluster, are kept.
func TestPrunerDeletesUnusedTemplates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name, otherName = "pruner-cluster", "pruner-other"
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	mk := func(clusterName string, pods int32) *launchtemplate.Options {
		o := resolve(t, readyNodeClass("pruner", awsv1.AMIFamilyAL2023), launchFor("pruner", pods))
		o.ClusterName = clusterName
		return o
	}

	// Made before this leader started: by a previous leader of the
	// cluster, and by another cluster's controller.
	stale, err := launchtemplate.NewProvider(clients.EC2, name, launchtemplate.ProviderOptions{}).Ensure(ctx, mk(name, 31))
	require.NoError(t, err)
	other, err := launchtemplate.NewProvider(clients.EC2, otherName, launchtemplate.ProviderOptions{}).Ensure(ctx, mk(otherName, 31))
	require.NoError(t, err)

	p := launchtemplate.NewProvider(clients.EC2, name, launchtemplate.ProviderOptions{Now: clock})
	used, err := p.Ensure(ctx, mk(name, 32))
	require.NoError(t, err)

	pruner := launchtemplate.NewPruner(p, 20*time.Millisecond, logr.Discard())
	done := make(chan error, 1)
	go func() { done <- pruner.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	// Passes within the TTL delete nothing.
	time.Sleep(200 * time.Millisecond)
	for _, lt := range []launchtemplate.LaunchTemplate{stale, other, used} {
		require.Len(t, templatesNamed(t, lt.Name), 1, lt.Name)
	}

	// The launch keeps using its template; the stale one goes unused
	// past the TTL.
	advance(40 * time.Second)
	_, err = p.Ensure(ctx, mk(name, 32))
	require.NoError(t, err)
	advance(30 * time.Second)
	require.Eventually(t, func() bool { return len(templatesNamed(t, stale.Name)) == 0 }, 30*time.Second, 50*time.Millisecond,
		"the cluster's unused template is pruned")
	time.Sleep(200 * time.Millisecond) // more passes
	require.Len(t, templatesNamed(t, used.Name), 1, "a template in use is kept")
	require.Len(t, templatesNamed(t, other.Name), 1, "another cluster's template is kept")

	require.NoError(t, p.DeleteAll(ctx, readyNodeClass("pruner", awsv1.AMIFamilyAL2023)))
	require.NoError(t, launchtemplate.NewProvider(clients.EC2, otherName, launchtemplate.ProviderOptions{}).DeleteAll(ctx, readyNodeClass("pruner", awsv1.AMIFamilyAL2023)))
}
