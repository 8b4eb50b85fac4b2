// Package version keeps the cluster's Kubernetes minor version ("1.34"),
// which the AMI aliases resolve their SSM parameters for, as upstream's
// version provider does: from EKS DescribeCluster with EKS_CONTROL_PLANE,
// else from the API server's discovery endpoint, refreshed every five
// minutes so that al2023@latest follows a control-plane upgrade and AMI
// drift rolls the nodes onto the new version's images.
package version

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// RefreshInterval is upstream's period.
const RefreshInterval = 5 * time.Minute

// Supported range, upstream's: outside it the version is used but an
// error is logged.
const (
	MinVersion = "1.26"
	MaxVersion = "1.36"
)

// EKSAPI reads the cluster record.
type EKSAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// Provider knows the cluster's version. It is safe for concurrent use.
type Provider struct {
	eks         EKSAPI
	discovery   discovery.ServerVersionInterface
	clusterName string
	useEKS      bool

	mu      sync.Mutex
	version string
}

// New returns a provider reading EKS when useEKS (EKS_CONTROL_PLANE), else
// the API server.
func New(eksAPI EKSAPI, d discovery.ServerVersionInterface, clusterName string, useEKS bool) *Provider {
	return &Provider{eks: eksAPI, discovery: d, clusterName: clusterName, useEKS: useEKS}
}

// Get is the version last read; the first call reads it.
func (p *Provider) Get(ctx context.Context) (string, error) {
	p.mu.Lock()
	v := p.version
	p.mu.Unlock()
	if v != "" {
		return v, nil
	}
	if _, err := p.Update(ctx); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version, nil
}

// Update reads the version now and reports whether it changed. A failure
// keeps the previous version.
func (p *Provider) Update(ctx context.Context) (bool, error) {
	v, err := p.read(ctx)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := p.version != "" && p.version != v
	p.version = v
	return changed, nil
}

func (p *Provider) read(ctx context.Context) (string, error) {
	if p.useEKS {
		if p.eks == nil {
			return "", errors.New("no EKS client to read the Kubernetes version from")
		}
		out, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(p.clusterName)})
		if err != nil {
			return "", fmt.Errorf("reading the Kubernetes version of %s from EKS: %w", p.clusterName, err)
		}
		if out.Cluster == nil || aws.ToString(out.Cluster.Version) == "" {
			return "", fmt.Errorf("EKS reports no Kubernetes version for %s", p.clusterName)
		}
		return aws.ToString(out.Cluster.Version), nil
	}
	if p.discovery == nil {
		return "", errors.New("no API server configuration to read the Kubernetes version from")
	}
	v, err := p.discovery.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading the Kubernetes version: %w", err)
	}
	return v.Major + "." + trimMinor(v.Minor), nil
}

// trimMinor drops what some distributions append to the minor version
// ("34+" on EKS).
func trimMinor(m string) string {
	for i, r := range m {
		if r < '0' || r > '9' {
			return m[:i]
		}
	}
	return m
}

// Supported says whether v is within the supported range.
func Supported(v string) bool {
	return compare(v, MinVersion) >= 0 && compare(v, MaxVersion) <= 0
}

func compare(a, b string) int {
	am, an := split(a)
	bm, bn := split(b)
	if am != bm {
		return am - bm
	}
	return an - bn
}

func split(v string) (int, int) {
	maj, min, _ := strings.Cut(v, ".")
	a, _ := strconv.Atoi(maj)
	b, _ := strconv.Atoi(min)
	return a, b
}

// Refresher re-reads the version every interval (RefreshInterval when 0)
// and calls changed after a change, so that EC2NodeClasses resolve their
// aliases for the new version at once instead of at their next requeue.
func (p *Provider) Refresher(interval time.Duration, changed func(context.Context) error, log logr.Logger) manager.Runnable {
	if interval <= 0 {
		interval = RefreshInterval
	}
	return manager.RunnableFunc(periodic.Loop{
		Interval: interval, Immediately: true, Log: log, Failure: "refreshing the kubernetes version",
		Pass: func(ctx context.Context) error {
			before, _ := p.peek()
			moved, err := p.Update(ctx)
			if err != nil {
				return err
			}
			v, _ := p.peek()
			if before == "" || moved {
				log.Info("discovered kubernetes version", "version", v)
				if !Supported(v) {
					log.Error(fmt.Errorf("karpenter is not compatible with kubernetes version %s", v), "validating kubernetes version", "min", MinVersion, "max", MaxVersion)
				}
			}
			if moved && changed != nil {
				return changed(ctx)
			}
			return nil
		},
	}.Run)
}

func (p *Provider) peek() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version, p.version != ""
}
