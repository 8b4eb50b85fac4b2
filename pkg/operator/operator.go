// Package operator owns the controller process's runtime: the
// controller-runtime manager (client rate limits, leader election on a
// Lease, health probes, metrics server, field indexes), the JSON logger,
// the event recorder and the build-info metric. Controllers are registered
// on the Operator's Manager by their own packages; main starts it.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/karpenter-go/karpenter/pkg/apis"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
)

// Field index names registered on the manager's cache, for
// client.MatchingFields lookups.
const (
	IndexPodNodeName                   = "spec.nodeName"
	IndexNodeProviderID                = "spec.providerID"
	IndexNodeClaimProviderID           = "status.providerID"
	IndexVolumeAttachmentNodeName      = "spec.nodeName"
	IndexNodeClaimNodeClassRefGroup    = "spec.nodeClassRef.group"
	IndexNodeClaimNodeClassRefKind     = "spec.nodeClassRef.kind"
	IndexNodeClaimNodeClassRefName     = "spec.nodeClassRef.name"
	IndexNodePoolNodeClassRefGroupName = "spec.template.spec.nodeClassRef.group"
	IndexNodePoolNodeClassRefKindName  = "spec.template.spec.nodeClassRef.kind"
	IndexNodePoolNodeClassRefNameName  = "spec.template.spec.nodeClassRef.name"
)

// Component is the event source and user-agent name.
const Component = "karpenter"

// nodeLeaseNamespace is the only namespace whose Leases are cached: node
// heartbeats live there and nothing else needs Leases from the cache.
const nodeLeaseNamespace = "kube-node-lease"

// Scheme knows client-go's types and every API group of this project.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apis.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// Operator is the running process's shared machinery.
type Operator struct {
	Manager manager.Manager
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// KubeClient talks to the API server directly (eviction subresource).
	KubeClient    kubernetes.Interface
	Clock         clock.Clock
	EventRecorder record.EventRecorder
	Options       *options.Options
	Logger        logr.Logger

	// gate holds the campaign for the lease (HoldLeadership); nil with
	// leader election disabled.
	gate *leadershipGate
}

// New builds the manager from cfg and opts (nil means defaults). Nothing
// runs until Start.
func New(ctx context.Context, cfg *rest.Config, opts *options.Options) (*Operator, error) {
	if opts == nil {
		opts = options.New()
	}
	logger, err := NewLogger(opts)
	if err != nil {
		return nil, err
	}
	// controller-runtime and client-go (leader election) log through these.
	log.SetLogger(logger)
	klog.SetLogger(logger)
	// The first line says which build runs (the commit is a field of every
	// line): a values file that pins another image shows here.
	logger.Info("karpenter-go", "version", Version, "go", goruntime.Version(), "platform", goruntime.GOOS+"/"+goruntime.GOARCH)

	if limit := opts.GoMemLimit(); limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}

	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	cfg.UserAgent = Component + "/" + Version

	leNamespace := opts.LeaderElectionNamespace
	if leNamespace == "" {
		leNamespace = systemNamespace()
	}
	// Our own Lease lock, so the campaign can wait for HoldLeadership.
	var gate *leadershipGate
	var lock resourcelock.Interface
	lockEvents := &lateRecorder{}
	if !opts.DisableLeaderElection {
		gate = &leadershipGate{max: MaxLeadershipHold}
		if lock, _, err = newLeaseLock(cfg, leNamespace, opts.LeaderElectionName, opts.LeaderElectionRenewDeadline, gate, lockEvents); err != nil {
			return nil, err
		}
	}
	mgrOpts := manager.Options{
		Scheme: Scheme,
		Logger: logger,
		Cache: cache.Options{
			// Nothing reads managedFields; on a pod they are often a third
			// of the object, and the cache holds every pod.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{nodeLeaseNamespace: {}}},
			},
		},
		LeaderElection:             !opts.DisableLeaderElection,
		LeaderElectionID:           opts.LeaderElectionName,
		LeaderElectionNamespace:    leNamespace,
		LeaderElectionResourceLock: "leases",
		// Nil with leader election disabled: the manager then builds none.
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       durationOrNil(opts.LeaderElectionLeaseDuration),
		RenewDeadline:                       durationOrNil(opts.LeaderElectionRenewDeadline),
		RetryPeriod:                         durationOrNil(opts.LeaderElectionRetryPeriod),
		Metrics: metricsserver.Options{
			BindAddress:   ":" + strconv.Itoa(opts.MetricsPort),
			ExtraHandlers: profilingHandlers(opts.EnableProfiling),
		},
		HealthProbeBindAddress: ":" + strconv.Itoa(opts.HealthProbePort),
		BaseContext:            func() context.Context { return options.ToContext(log.IntoContext(context.Background(), logger), opts) },
		Controller: config.Controller{
			RecoverPanic: ptr.To(true),
			// Warm-up starts watches before leadership so a new leader acts
			// on a full cache at once.
			EnableWarmup: ptr.To(!opts.DisableControllerWarmup && !opts.DisableLeaderElection),
			// Tests run several operators in one process; names are still
			// unique within each manager.
			SkipNameValidation: ptr.To(true),
		},
	}
	mgr, err := manager.New(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := registerIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding healthz check: %w", err)
	}
	for name, check := range map[string]healthz.Checker{
		"ping":         healthz.Ping,
		"cache-synced": cacheSynced(mgr.GetCache()),
		"crds":         crdsResolvable(mgr),
	} {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return nil, fmt.Errorf("adding readyz check %s: %w", name, err)
		}
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	metrics.SetBuildInfo(Version, Commit)
	if lock != nil {
		lockEvents.set(mgr.GetEventRecorderFor(lock.Identity())) //nolint:staticcheck // the events controller-runtime's own lock records
	}
	// core/v1 events show in kubectl describe as upstream's do; they are
	// deduplicated as upstream's are.
	events := newDedupeRecorder(mgr.GetEventRecorderFor(Component), clock.RealClock{}, opts.EventDedupeWindow) //nolint:staticcheck // core/v1 events, as upstream shows them
	return &Operator{
		gate:          gate,
		Manager:       mgr,
		Client:        mgr.GetClient(),
		KubeClient:    kube,
		Clock:         clock.RealClock{},
		EventRecorder: events,
		Options:       opts,
		Logger:        logger,
	}, nil
}

// Context returns ctx carrying the operator's logger and options, for work
// done outside reconcilers (reconcilers get both from the manager).
func (o *Operator) Context(ctx context.Context) context.Context {
	return options.ToContext(log.IntoContext(ctx, o.Logger), o.Options)
}

// Start runs the manager until ctx ends. On the way out it releases the
// leader Lease so a standby takes over at once.
func (o *Operator) Start(ctx context.Context) error {
	if err := o.Manager.Start(o.Context(ctx)); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// Elected is closed once this replica leads (at once when leader election is
// disabled).
func (o *Operator) Elected() <-chan struct{} { return o.Manager.Elected() }

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// systemNamespace is where the leader Lease goes when no namespace is
// configured: $SYSTEM_NAMESPACE, the pod's own namespace, or kube-system
// when running outside a cluster (make run).
func systemNamespace() string {
	if ns := os.Getenv("SYSTEM_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "kube-system"
}

func profilingHandlers(enabled bool) map[string]http.Handler {
	if !enabled {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

func registerIndexes(ctx context.Context, idx client.FieldIndexer) error {
	single := func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	nodeClaimRef := func(get func(*v1.NodeClassReference) string) client.IndexerFunc {
		return func(o client.Object) []string {
			if ref := o.(*v1.NodeClaim).Spec.NodeClassRef; ref != nil {
				return single(get(ref))
			}
			return nil
		}
	}
	nodePoolRef := func(get func(*v1.NodeClassReference) string) client.IndexerFunc {
		return func(o client.Object) []string {
			if ref := o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef; ref != nil {
				return single(get(ref))
			}
			return nil
		}
	}
	group := func(r *v1.NodeClassReference) string { return r.Group }
	kind := func(r *v1.NodeClassReference) string { return r.Kind }
	name := func(r *v1.NodeClassReference) string { return r.Name }
	for _, i := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&corev1.Pod{}, IndexPodNodeName, func(o client.Object) []string { return single(o.(*corev1.Pod).Spec.NodeName) }},
		{&corev1.Node{}, IndexNodeProviderID, func(o client.Object) []string { return single(o.(*corev1.Node).Spec.ProviderID) }},
		{&storagev1.VolumeAttachment{}, IndexVolumeAttachmentNodeName, func(o client.Object) []string {
			return single(o.(*storagev1.VolumeAttachment).Spec.NodeName)
		}},
		{&v1.NodeClaim{}, IndexNodeClaimProviderID, func(o client.Object) []string { return single(o.(*v1.NodeClaim).Status.ProviderID) }},
		{&v1.NodeClaim{}, IndexNodeClaimNodeClassRefGroup, nodeClaimRef(group)},
		{&v1.NodeClaim{}, IndexNodeClaimNodeClassRefKind, nodeClaimRef(kind)},
		{&v1.NodeClaim{}, IndexNodeClaimNodeClassRefName, nodeClaimRef(name)},
		{&v1.NodePool{}, IndexNodePoolNodeClassRefGroupName, nodePoolRef(group)},
		{&v1.NodePool{}, IndexNodePoolNodeClassRefKindName, nodePoolRef(kind)},
		{&v1.NodePool{}, IndexNodePoolNodeClassRefNameName, nodePoolRef(name)},
	} {
		if err := idx.IndexField(ctx, i.obj, i.field, i.fn); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", i.obj, i.field, err)
		}
	}
	return nil
}

// cacheSynced fails until every informer has synced, so the pod only turns
// ready once it can act on a complete view.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches not synced")
		}
		return nil
	}
}

// crdsResolvable fails while Karpenter's CRDs are not served, which would
// leave every controller erroring.
func crdsResolvable(mgr manager.Manager) healthz.Checker {
	return func(*http.Request) error {
		for _, kind := range []string{"NodePool", "NodeClaim"} {
			gk := schema.GroupKind{Group: v1.Group, Kind: kind}
			if _, err := mgr.GetRESTMapper().RESTMapping(gk, v1.GroupVersion.Version); err != nil {
				return fmt.Errorf("resolving %s: %w", gk, err)
			}
		}
		return nil
	}
}
