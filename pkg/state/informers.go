package state

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Informer is one of the controllers that feed the cache from watches: it
// reads the object from the cache and records it, or forgets it when gone.
type Informer struct {
	name    string
	kube    client.Client
	obj     func() client.Object
	update  func(client.Object)
	forget  func(req reconcile.Request)
	workers int
}

// Informers returns the Node, NodeClaim, Pod, DaemonSet and NodePool
// controllers for cluster.
func Informers(kube client.Client, cluster *Cluster) []*Informer {
	return []*Informer{
		{
			name: "state.node", kube: kube, workers: 10,
			obj:    func() client.Object { return &corev1.Node{} },
			update: func(o client.Object) { cluster.UpdateNode(o.(*corev1.Node)) },
			forget: func(req reconcile.Request) { cluster.DeleteNode(req.Name) },
		},
		{
			name: "state.nodeclaim", kube: kube, workers: 10,
			obj:    func() client.Object { return &v1.NodeClaim{} },
			update: func(o client.Object) { cluster.UpdateNodeClaim(o.(*v1.NodeClaim)) },
			forget: func(req reconcile.Request) { cluster.DeleteNodeClaim(req.Name) },
		},
		{
			name: "state.pod", kube: kube, workers: 20,
			obj:    func() client.Object { return &corev1.Pod{} },
			update: func(o client.Object) { cluster.UpdatePod(o.(*corev1.Pod)) },
			forget: func(req reconcile.Request) { cluster.DeletePod(req.NamespacedName) },
		},
		{
			name: "state.daemonset", kube: kube, workers: 2,
			obj:    func() client.Object { return &appsv1.DaemonSet{} },
			update: func(o client.Object) { cluster.UpdateDaemonSet(o.(*appsv1.DaemonSet)) },
			forget: func(req reconcile.Request) { cluster.DeleteDaemonSet(req.NamespacedName) },
		},
		{
			name: "state.nodepool", kube: kube, workers: 2,
			obj:    func() client.Object { return &v1.NodePool{} },
			update: func(o client.Object) { setLimitMetrics(o.(*v1.NodePool)) },
			forget: func(req reconcile.Request) {
				metrics.NodePoolLimit.DeletePartialMatch(map[string]string{metrics.NodePoolLabel: req.Name})
			},
		},
	}
}

// Register adds every informer controller of cluster to mgr.
func Register(ctx context.Context, mgr manager.Manager, cluster *Cluster) error {
	for _, i := range Informers(mgr.GetClient(), cluster) {
		if err := i.Register(ctx, mgr); err != nil {
			return err
		}
	}
	return nil
}

// Name is the controller's name.
func (i *Informer) Name() string { return i.name }

// Reconcile records the object's current state. It keeps the informer
// cache's object rather than a copy (the cluster state's readers must not
// modify what it hands out): a copy would hold every pod, Node and
// NodeClaim twice for as long as they exist.
func (i *Informer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := i.obj()
	if err := i.kube.Get(ctx, req.NamespacedName, obj, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			i.forget(req)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting %s: %w", req.NamespacedName, err)
	}
	i.update(obj)
	return reconcile.Result{}, nil
}

// Register adds the controller to mgr.
func (i *Informer) Register(_ context.Context, mgr manager.Manager) error {
	err := builder.ControllerManagedBy(mgr).
		Named(i.name).
		For(i.obj()).
		WithOptions(controller.Options{MaxConcurrentReconciles: i.workers}).
		Complete(i)
	if err != nil {
		return fmt.Errorf("registering %s controller: %w", i.name, err)
	}
	return nil
}

func setLimitMetrics(np *v1.NodePool) {
	metrics.NodePoolLimit.DeletePartialMatch(map[string]string{metrics.NodePoolLabel: np.Name})
	for name, q := range np.Spec.Limits {
		metrics.NodePoolLimit.WithLabelValues(np.Name, string(name)).Set(quantityValue(q))
	}
}
