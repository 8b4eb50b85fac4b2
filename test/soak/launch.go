package soak

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// nodeClass is the KWOKNodeClass every pool of the soak and the traces
// names: ours and upstream's kwok controller both read it.
const nodeClass = `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}`

// nodeClassRef names nodeClass from a NodePool.
var nodeClassRef = v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}

// launched is a fresh control plane with the controller under test
// running on it.
type launched struct {
	cp        *controlplane.ControlPlane
	pid, port int
	name      string
	ctrlStop  func()
}

// launch starts a control plane (kube-controller-manager, kube-scheduler,
// kwok, the API server auditing User), lets setup create the workload,
// starts ctrl as User and waits (a minute at most) for pools to be Ready.
// policy is the audit policy (auditPolicy or auditBodiesPolicy). stop kills
// the controller and the control plane and returns the controller's log.
func launch(ctx context.Context, ctrl Controller, pools []string, policy string, setup func(context.Context, *controlplane.ControlPlane) error) (*launched, error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
		Users: []controlplane.User{{Name: User, Groups: []string{"system:masters"}}}, AuditPolicy: policy,
	})
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	if err := setup(ctx, cp); err != nil {
		cp.Stop()
		return nil, fmt.Errorf("creating the workload: %w", err)
	}
	kubeconfig, err := cp.KubeconfigFor(User)
	if err != nil {
		cp.Stop()
		return nil, err
	}
	pid, port, err := ctrl.Start(cp, kubeconfig)
	if err != nil {
		cp.Stop()
		return nil, fmt.Errorf("starting %s: %w", ctrl.Name, err)
	}
	// Ours says Ready; upstream's kwok controller too.
	waitFor(ctx, time.Minute, func() bool {
		for _, name := range pools {
			np := &v1.NodePool{}
			if cp.Client.Get(ctx, client.ObjectKey{Name: name}, np) != nil || !np.IsReady() {
				return false
			}
		}
		return true
	})
	return &launched{cp: cp, pid: pid, port: port, name: ctrl.Name, ctrlStop: ctrl.Stop}, nil
}

// exited is an error when the controller's process is gone (a panic, lost
// leadership) with what its log says last: the soak cannot go on, as its
// figures would be the cluster's without a controller.
func (l *launched) exited() error {
	if controlplane.Alive(l.pid) {
		return nil
	}
	raw, _ := os.ReadFile(l.cp.LogPath(l.name))
	log := string(raw)
	why := Panics(log)
	if len(why) == 0 {
		lines := strings.Split(strings.TrimSpace(log), "\n")
		why = lines[max(0, len(lines)-3):]
	}
	return fmt.Errorf("%s exited during the soak: %s", l.name, strings.Join(why, " | "))
}

// stop kills the controller, then the control plane, and returns the
// controller's log.
func (l *launched) stop() string {
	if l.ctrlStop != nil {
		l.ctrlStop()
	}
	l.cp.Kill(l.pid)
	raw, _ := os.ReadFile(l.cp.LogPath(l.name))
	l.cp.Stop()
	return string(raw)
}
