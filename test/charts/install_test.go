package charts_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestCRDChart drives the karpenter-crd chart through install, upgrade and
// uninstall on a control plane of its own: a CRD's removal waits for the
// API server's instance clean-up, which under load can lag for minutes, and
// the karpenter chart's test must not start on CRDs still terminating.
func TestCRDChart(t *testing.T) {
	ctx, cp, kube, crds := chartCluster(t)
	helm(t, kube, "install", "karpenter-crd", chartDir(t, "karpenter-crd"), "--namespace", "kube-system")
	for _, crd := range crds {
		got := establishedCRD(ctx, t, cp, crd.Name)
		if len(got.Spec.Versions) != len(crd.Spec.Versions) {
			t.Errorf("%s: %d versions served, want %d", crd.Name, len(got.Spec.Versions), len(crd.Spec.Versions))
		}
	}
	helm(t, kube, "upgrade", "karpenter-crd", chartDir(t, "karpenter-crd"), "--namespace", "kube-system", "--set", "additionalAnnotations.team=infra")
	for _, crd := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations["team"] != "infra" || got.Annotations["meta.helm.sh/release-name"] != "karpenter-crd" {
			t.Errorf("%s after upgrade: annotations %v", crd.Name, got.Annotations)
		}
	}
	helm(t, kube, "uninstall", "karpenter-crd", "--namespace", "kube-system")
	for _, crd := range crds {
		waitDeleted(ctx, t, cp, crd.Name)
	}
	if out, err := helmErr(t, kube, "status", "karpenter-crd", "--namespace", "kube-system"); err == nil {
		t.Errorf("release still known after uninstall:\n%s", out)
	}
}

// TestInstall drives the karpenter chart through install, upgrade and
// uninstall on a real kube-apiserver (RBAC on, so the ClusterRoles are
// checked for escalation and the API validates every object), then runs the
// controller as the chart's ServiceAccount.
func TestInstall(t *testing.T) {
	ctx, cp, kube, crds := chartCluster(t)

	const ns = "karpenter"
	// The controller run below serves the kwok provider (the AWS provider
	// needs the local AWS: TestServiceAccountCycleAWS), so the release is
	// installed for kwok; the upgrade to the seed install switches it to
	// the default AWS provider.
	kwokValues := []string{"--set", "kwok.enabled=true"}
	var manifest []*unstructured.Unstructured
	t.Run("install with the kwok provider", func(t *testing.T) {
		helm(t, kube, append([]string{"install", "karpenter", chartDir(t, "karpenter"), "--namespace", ns, "--create-namespace"}, kwokValues...)...)
		// Helm installs crds/ before the templates.
		for _, crd := range crds {
			establishedCRD(ctx, t, cp, crd.Name)
		}
		manifest = documents(t, helm(t, kube, "get", "manifest", "karpenter", "--namespace", ns))
		want := documents(t, helm(t, nil, append([]string{"template", "karpenter", chartDir(t, "karpenter"), "--namespace", ns}, kwokValues...)...))
		if names(manifest) != names(want) {
			t.Errorf("installed %s, the chart renders %s", names(manifest), names(want))
		}
		inCluster(ctx, t, cp, manifest)
		status := helm(t, kube, "status", "karpenter", "--namespace", ns)
		if !strings.Contains(status, "STATUS: deployed") {
			t.Errorf("helm status:\n%s", status)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("controller runs as the chart's service account", func(t *testing.T) {
		runAsServiceAccount(ctx, t, cp, ns, kwokValues)
	})

	t.Run("upgrade to the seed install", func(t *testing.T) {
		helm(t, kube, append([]string{"upgrade", "karpenter", chartDir(t, "karpenter"), "--namespace", ns}, seedArgs...)...)
		sa := &corev1.ServiceAccount{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "karpenter"}, sa); err != nil {
			t.Fatal(err)
		}
		if sa.Annotations["eks.amazonaws.com/role-arn"] != roleARN {
			t.Errorf("service account annotations after upgrade: %v", sa.Annotations)
		}
		d := &unstructured.Unstructured{}
		d.SetAPIVersion("apps/v1")
		d.SetKind("Deployment")
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "karpenter"}, d); err != nil {
			t.Fatal(err)
		}
		env, _ := controllerEnv(t, deploymentOf(t, d))
		if env["CLUSTER_NAME"] != "lab-cluster" || env["INTERRUPTION_QUEUE"] != "lab-cluster" || env["LOG_LEVEL"] != "debug" || env["CLOUD_PROVIDER"] != "aws" {
			t.Errorf("deployment env after upgrade: %v", env)
		}
		// The seed install leaves kwok.enabled at its default: the
		// upgrade moves the release to the AWS provider's RBAC.
		upgraded := documents(t, helm(t, kube, "get", "manifest", "karpenter", "--namespace", ns))
		inCluster(ctx, t, cp, upgraded)
		for _, o := range manifest {
			if strings.HasSuffix(o.GetName(), "-kwok") {
				gone := &unstructured.Unstructured{}
				gone.SetGroupVersionKind(o.GroupVersionKind())
				waitGone(ctx, t, cp, gone, client.ObjectKeyFromObject(o))
			}
		}
		role := &rbacv1.ClusterRole{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "karpenter"}, role); err != nil {
			t.Fatal(err)
		}
		if !grants(role.Rules, "karpenter.k8s.aws", "ec2nodeclasses", "patch") || !grants(role.Rules, "karpenter.k8s.aws", "ec2nodeclasses/status", "patch") {
			t.Errorf("ClusterRole karpenter after the upgrade to the AWS provider: %+v", role.Rules)
		}
		manifest = append(manifest, upgraded...)
		history := helm(t, kube, "history", "karpenter", "--namespace", ns)
		if !strings.Contains(history, "superseded") || !strings.Contains(history, "deployed") {
			t.Errorf("helm history:\n%s", history)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		helm(t, kube, "uninstall", "karpenter", "--namespace", ns, "--wait")
		for _, o := range manifest {
			gone := &unstructured.Unstructured{}
			gone.SetGroupVersionKind(o.GroupVersionKind())
			waitGone(ctx, t, cp, gone, client.ObjectKeyFromObject(o))
		}
		// Helm never deletes what crds/ installed: NodePools and NodeClaims
		// outlive the controller's release.
		for _, crd := range crds {
			establishedCRD(ctx, t, cp, crd.Name)
		}
		if out, err := helmErr(t, kube, "status", "karpenter", "--namespace", ns); err == nil {
			t.Errorf("release still known after uninstall:\n%s", out)
		}
	})
}

// inCluster checks that every object of a release's manifest exists.
func inCluster(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, manifest []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range manifest {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s/%s not in the cluster: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// grants reports whether one of rules allows verb on resource of group by
// name (no resourceNames), as the rules in the chart are written.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// runAsServiceAccount starts the controller as the chart's ServiceAccount
// (the release installed with values) and checks that nothing it did in its
// first seconds was forbidden.
func runAsServiceAccount(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string, values []string) {
	logPath := startAsServiceAccount(ctx, t, cp, ns, values, nil)
	// Give the elected controllers a moment to make their first calls.
	time.Sleep(3 * time.Second)
	noForbidden(t, logPath)
}

// startAsServiceAccount starts the controller with the environment the
// chart renders for values (which must be the installed release's, so the
// provider it picks is the one its RBAC is for) plus extraEnv
// ("NAME=value", what a pod would get from elsewhere: AWS credentials),
// authenticated as the chart's ServiceAccount, and waits until it is ready
// (every informer synced, which needs list and watch on every kind it
// watches from the start) and leads (the Role's Lease rules). It returns
// the log's path; the controller stops when the test ends.
func startAsServiceAccount(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string, values, extraEnv []string) string {
	t.Helper()
	return startController(ctx, t, cp, ns, values, extraEnv, nil)
}

// startController is startAsServiceAccount with the controller built from
// the work tree (image nil) or taken from an unpacked image and run as the
// rendered securityContext says.
func startController(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string, values, extraEnv []string, image *imageRun) string {
	t.Helper()
	// A bearer token of the ServiceAccount's name and groups, as a pod's
	// projected token gives (the control plane must list the user).
	kubeconfig, err := cp.KubeconfigFor(chartServiceAccount(ns).Name)
	if err != nil {
		t.Fatal(err)
	}

	_, objs := render(t, values...)
	d := deployment(t, objs, "karpenter")
	env, _ := controllerEnv(t, d)
	metricsPort, probePort := freePort(t), freePort(t)
	env["METRICS_PORT"] = strconv.Itoa(metricsPort)
	env["HEALTH_PROBE_PORT"] = strconv.Itoa(probePort)
	env["SYSTEM_NAMESPACE"] = ns

	logPath := filepath.Join(t.TempDir(), "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range extraEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var cmd *exec.Cmd
	if image == nil {
		bin := filepath.Join(t.TempDir(), "controller")
		build := exec.Command("go", "build", "-o", bin, "./cmd/controller")
		build.Dir = repoRoot(t)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building controller: %v\n%s", err, out)
		}
		cmd = exec.Command(bin, "--kubeconfig="+kubeconfig)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	} else {
		cmd = image.command(t, d.Spec.Template.Spec.Containers[0], env, kubeconfig)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("controller log:\n%s", tail(string(b), 8000))
		}
	})

	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("controller exited: %v", err)
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("controller never ready as the chart's service account: %v", err)
	}
	lease := &coordinationv1.Lease{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "karpenter-leader-election"}, lease); err != nil {
			return false, nil
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatalf("controller never took the leader Lease in %s: %v", ns, err)
	}
	if image != nil {
		want := strconv.FormatInt(*d.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser, 10)
		if os.Geteuid() != 0 {
			want = strconv.Itoa(os.Geteuid())
		}
		if uids, err := processUser(cmd.Process.Pid); err != nil || strings.Fields(uids)[0] != want || strings.Fields(uids)[1] != want {
			t.Errorf("the image's controller runs as uids %q (%v), want %s", uids, err, want)
		}
	}
	return logPath
}

func noForbidden(t *testing.T, logPath string) {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(b)), "forbidden") {
		t.Errorf("the controller was refused something as the chart's service account:\n%s", grepLines(string(b), "forbidden"))
	}
}

func establishedCRD(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	got := &apiextensionsv1.CustomResourceDefinition{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
	return got
}

func waitGone(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, obj client.Object, key client.ObjectKey) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = cp.Client.Get(ctx, key, obj)
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		t.Errorf("%T %s still there: %v (last get: %v)", obj, key, err, last)
	}
}

// chartCluster starts a control plane without CRDs (the charts install
// them) for one test, and returns a context bounding the test, the helm
// environment that points at it, and the CRDs the charts must install.
func chartCluster(t *testing.T) (context.Context, *controlplane.ControlPlane, []string, []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Options{SkipCRDs: true, Users: []controlplane.User{chartServiceAccount("karpenter")}})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	crds, err := apis.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cp, []string{"KUBECONFIG=" + cp.KubeconfigPath}, crds
}

// waitDeleted checks that helm's uninstall deleted the CRD: it is gone, or
// the API server has accepted its deletion and is still removing instances
// under the customresourcecleanup finalizer. That clean-up is the API
// server's, not the chart's, and on a loaded machine its retries back off for
// minutes, so it is logged rather than waited out.
func waitDeleted(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string) {
	t.Helper()
	got := &apiextensionsv1.CustomResourceDefinition{}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = cp.Client.Get(ctx, client.ObjectKey{Name: name}, got)
		return apierrors.IsNotFound(last), nil
	})
	if err == nil {
		return
	}
	// The poll's last Get may have failed on the poll's own deadline (its
	// client rate limiter refuses to wait past it); look once more with the
	// test's context before judging.
	if last = cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); apierrors.IsNotFound(last) {
		return
	}
	if last != nil {
		t.Errorf("CRD %s after uninstall: %v", name, last)
		return
	}
	if got.DeletionTimestamp.IsZero() {
		t.Errorf("CRD %s not deleted by helm uninstall (no deletionTimestamp)", name)
		return
	}
	for _, c := range got.Status.Conditions {
		if c.Type == apiextensionsv1.Terminating {
			t.Logf("CRD %s deleted and still terminating: %s %s: %s", name, c.Status, c.Reason, c.Message)
		}
	}
}

func deploymentOf(t *testing.T, u *unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	typed(t, u, d)
	return d
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
