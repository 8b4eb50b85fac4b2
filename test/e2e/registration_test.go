package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestRegistrationTimeout launches the first instance with the
// registration=never fault (set through the NodeClass annotation and taken
// off once that instance launched). Its NodeClaim never registers, is
// deleted once --registration-ttl has passed since it launched, and a
// replacement registers and runs the pod.
func TestRegistrationTimeout(t *testing.T) {
	const ttl = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cluster(t)
	nodeClass := `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
  annotations:
    ` + kwok.FaultsAnnotationKey + `: registration=never
spec:
  nodeRegistrationDelay: 1s
`
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(nodeClass)))
	for _, m := range []string{failurePoolYAML("reg", 0), failureDeploymentYAML("reg-app", "reg", 1, "1", nil)} {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)))
	}
	startController(t, cp, "controller", "--registration-ttl="+ttl.String())

	// The first NodeClaim launches; its instance will never register.
	var first v1.NodeClaim
	require.Eventually(t, func() bool {
		var claims v1.NodeClaimList
		if err := cp.Client.List(ctx, &claims); err != nil {
			return false
		}
		for _, nc := range claims.Items {
			if conditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) {
				first = nc
				return true
			}
		}
		return false
	}, 2*time.Minute, 250*time.Millisecond, "a NodeClaim should launch")
	require.NotEmpty(t, first.Status.ProviderID)
	t.Logf("first nodeclaim %s (%s) launched", first.Name, first.Status.ProviderID)

	// Later launches register normally.
	class := &kwokv1alpha1.KWOKNodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	patch := client.MergeFrom(class.DeepCopy())
	delete(class.Annotations, kwok.FaultsAnnotationKey)
	require.NoError(t, cp.Client.Patch(ctx, class, patch))

	// It stays unregistered, with no Node, until the TTL, then goes.
	var gone time.Time
	registered := false
	require.Eventually(t, func() bool {
		nc := &v1.NodeClaim{}
		err := cp.Client.Get(ctx, client.ObjectKey{Name: first.Name}, nc)
		if apierrors.IsNotFound(err) || (err == nil && nc.UID != first.UID) {
			gone = time.Now()
			return true
		}
		if err == nil && (conditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) || nc.Status.NodeName != "") {
			registered = true
		}
		return false
	}, ttl+90*time.Second, 250*time.Millisecond, "the unregistered NodeClaim should be removed after the TTL")
	require.False(t, registered, "the never-registering NodeClaim registered")
	launchedAt := registeredSince(t, &first)
	t.Logf("removed %s after launch", gone.Sub(launchedAt).Round(time.Second))
	// Condition times have second precision, hence the slack.
	require.GreaterOrEqual(t, gone.Sub(launchedAt), ttl-time.Second, "removed before the registration TTL")
	require.True(t, apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKey{Name: first.Name}, &corev1.Node{})), "the never-registered instance has no Node")

	// A replacement registers and the pod runs on it.
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=reg-app") == 1
	}, 2*time.Minute, time.Second, "the pod should run on a replacement node")
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.Len(t, claims.Items, 1)
	replacement := claims.Items[0]
	require.NotEqual(t, first.UID, replacement.UID)
	require.NotEqual(t, types.UID(""), replacement.UID)
	for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
		require.Truef(t, conditionTrue(replacement.Status.Conditions, cond), "%s %s not True", replacement.Name, cond)
	}
	log := controllerLog(t, cp)
	require.Contains(t, log, `"message":"terminating due to timeout"`)
	require.Contains(t, log, "registration_timeout")
}

// registeredSince is when the NodeClaim's Registered condition was first
// set (Unknown, at launch): the registration TTL runs from there.
func registeredSince(t *testing.T, nc *v1.NodeClaim) time.Time {
	t.Helper()
	for _, c := range nc.Status.Conditions {
		if c.Type == v1.ConditionTypeRegistered {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("nodeclaim %s has no Registered condition", nc.Name)
	return time.Time{}
}
