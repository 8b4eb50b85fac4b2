package version_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	k8sversion "k8s.io/apimachinery/pkg/version"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/version"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// serverVersion answers discovery's ServerVersion with a fixed version.
type serverVersion struct {
	info *k8sversion.Info
	err  error
}

func (s serverVersion) ServerVersion() (*k8sversion.Info, error) { return s.info, s.err }

// TestVersionFromEKSFollowsAnUpgrade: with EKS_CONTROL_PLANE the version is
// the EKS record's, not the API server's; after UpdateClusterVersion the
// refresher reads the new version and calls back once.
func TestVersionFromEKSFollowsAnUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local, err := awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{"1.34"}})
	require.NoError(t, err)
	defer local.Stop()
	_, err = local.SeedCluster(ctx, awslocal.ClusterOptions{Name: "v", KubernetesVersion: "1.34"})
	require.NoError(t, err)

	apiServer := serverVersion{info: &k8sversion.Info{Major: "1", Minor: "31+"}}
	p := version.New(eks.NewFromConfig(local.Config(ctx)), apiServer, "v", true)
	v, err := p.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "1.34", v, "EKS's version, not the API server's")

	var calls atomic.Int32
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- p.Refresher(50*time.Millisecond, func(context.Context) error { calls.Add(1); return nil }, logr.Discard()).Start(runCtx)
	}()
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, calls.Load(), "no change, no callback")
	require.NoError(t, local.SetClusterVersion(ctx, "v", "1.35"))
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, 20*time.Millisecond)
	v, err = p.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "1.35", v)
	time.Sleep(200 * time.Millisecond)
	require.EqualValues(t, 1, calls.Load(), "one callback per change")
	stop()
	require.NoError(t, <-done)
}

// TestVersionFromTheAPIServer: without EKS_CONTROL_PLANE the API server's
// minor version, with a distribution's suffix dropped; a failed read keeps
// the version known before.
func TestVersionFromTheAPIServer(t *testing.T) {
	ctx := context.Background()
	p := version.New(nil, serverVersion{info: &k8sversion.Info{Major: "1", Minor: "34+"}}, "c", false)
	v, err := p.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "1.34", v)

	failing := version.New(nil, serverVersion{err: errors.New("unreachable")}, "c", false)
	_, err = failing.Get(ctx)
	require.ErrorContains(t, err, "unreachable")
	require.True(t, version.Supported("1.34"))
	require.False(t, version.Supported("1.25"))
	require.False(t, version.Supported("1.37"))
}
