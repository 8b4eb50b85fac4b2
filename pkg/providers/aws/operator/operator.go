// Package operator assembles the AWS provider for the controller binary:
// from the AWS settings, an aws.Config and the cluster's API server it builds
// the SDK clients, the resolvers (prices, instance types, subnets, security
// groups, AMIs, instance profiles, launch templates, instances), the cloud
// provider the core controllers consume, and the AWS controllers (EC2NodeClass
// status and finalization, the periodic refresh of prices and instance
// types). It owns no behaviour of its own beyond discovering the cluster
// details nodes bootstrap with.
package operator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	karpv1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/amifamily"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/capacity"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/capacityreservation/capacitytype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/capacityreservation/expiration"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/instanceprofilegc"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/launchtemplates"
	awsmetrics "github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclaim/partition"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclaim/tagging"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	nodeclasshash "github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass/hash"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/ssminvalidation"
	zonalshiftcontroller "github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/zonalshift"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/securitygroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/version"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/zonalshift"
)

// RefreshPeriod is how often the refresher ticks the price and instance-type
// providers; each refreshes only when its own interval has passed.
const RefreshPeriod = time.Minute

// Options are what New needs besides the AWS settings.
type Options struct {
	// Kube is the manager's client.
	Kube client.Client
	// RestConfig reaches the API server: its version picks the AMI alias
	// parameters, and its CA is the nodes' CA when none is configured.
	RestConfig *rest.Config
	// AWS is the SDK configuration (region, credentials, endpoint).
	AWS aws.Config
	// Settings are the AWS provider's flags and environment.
	Settings *options.Options
	// Unavailable is the insufficient-capacity cache shared with the core
	// controllers.
	Unavailable *cloudprovider.UnavailableOfferings
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger reports refresh failures; logr.Discard when zero.
	Logger logr.Logger
	// ReservedCapacity is the ReservedCapacity feature gate: capacity
	// reservations are resolved into EC2NodeClass status (and Ready waits
	// for them), and the capacity-type and expiration controllers run.
	ReservedCapacity bool
	// LaunchTemplateTTL and LaunchTemplatePruneInterval tune the pruning
	// of unused launch templates (tests); zero is the default (1m each).
	LaunchTemplateTTL           time.Duration
	LaunchTemplatePruneInterval time.Duration
}

// Provider is the assembled AWS provider.
type Provider struct {
	// CloudProvider is what the core controllers consume.
	CloudProvider *awscloudprovider.CloudProvider
	// Cluster is what nodes bootstrap with, as discovered.
	Cluster launchtemplate.Cluster

	clients   *sdk.Clients
	instances *instance.Provider
	templates *launchtemplate.Provider
	// recorder records the instance provider's NodeClaim events once
	// Register has the manager's recorder.
	recorder  atomic.Pointer[record.EventRecorder]
	prices    *pricing.Provider
	types     *instancetypes.Provider
	nodeClass *nodeclass.Controller
	amis      *amifamily.Provider
	opts      Options
	log       logr.Logger
	// hashCA is the CA bundle the EC2NodeClass hash includes.
	hashCA *string

	// reservations resolves capacity reservations and tracks their
	// remaining instances.
	reservations *capacityreservation.Provider
	// placementGroups resolves the classes' placement groups for launches
	// and the partition labels.
	placementGroups *placementgroup.Provider
	// shifts are the cluster's ARC zonal shifts; nil unless
	// ENABLE_ZONAL_SHIFT.
	shifts *zonalshift.Provider
	// versions is the cluster's Kubernetes version, refreshed every five
	// minutes.
	versions *version.Provider
	// profiles manages the classes' instance profiles; the EC2NodeClass
	// controller protects a replaced profile from the garbage collector.
	profiles *instanceprofile.Provider
	// warm is closed once instance types and offerings are loaded and
	// every class's list computed (Warm).
	warm     chan struct{}
	warmOnce sync.Once
}

// WellKnownLabels are the label keys the AWS provider's instance types
// carry, which the solver treats as well known.
func WellKnownLabels() []string { return sets.List(awsv1.WellKnownLabels) }

// ReservationIDLabel is the key a reserved NodeClaim's spec.requirements
// name its reservation under, as upstream's AWS provider sets
// cloudprovider.ReservationIDLabel; the cloud provider reads it back.
func ReservationIDLabel() string { return awsv1.LabelCapacityReservationID }

// New builds the provider. It calls AWS once, to discover what the settings
// leave out of the cluster's details (EKS DescribeCluster).
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.Settings == nil {
		return nil, errors.New("aws provider: no settings")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	s := o.Settings
	clients := sdk.New(o.AWS, 0)
	eksAPI := eks.NewFromConfig(o.AWS)
	cluster, err := discoverCluster(ctx, o, eksAPI)
	if err != nil {
		return nil, err
	}
	// With ENABLE_ZONAL_SHIFT the cluster must be registered with ARC, or
	// the setting could not act: refuse to start, as upstream.
	var shifts *zonalshift.Provider
	var typeShifts instancetypes.ZonalShifts
	if s.EnableZonalShift {
		if shifts, err = zonalshift.Discover(ctx, eksAPI, arczonalshift.NewFromConfig(o.AWS), s.ClusterName, o.Clock); err != nil {
			return nil, err
		}
		typeShifts = shifts
		o.Logger.Info("zonal shift awareness enabled", "cluster", shifts.ClusterARN(), "shifted", shifts.ShiftedZoneIDs())
	}
	var pricingAPI pricing.API
	if !s.IsolatedVPC {
		pricingAPI = pricing.NewAPI(o.AWS)
	}
	prices := pricing.NewProvider(pricingAPI, clients.EC2, pricing.Options{Region: clients.Region, IsolatedVPC: s.IsolatedVPC, Clock: o.Clock})
	reservations := capacityreservation.NewProvider(clients.EC2, o.Clock)
	types := instancetypes.NewProvider(clients.EC2, prices, instancetypes.Options{
		Region:       clients.Region,
		Settings:     instancetype.Settings{VMMemoryOverheadPercent: s.VMMemoryOverheadPercent, ReservedENIs: s.ReservedENIs},
		Unavailable:  o.Unavailable,
		Reservations: reservations,
		ZonalShifts:  typeShifts,
		Clock:        o.Clock,
	})
	launchTemplates := launchtemplate.NewProvider(clients.EC2, s.ClusterName, launchtemplate.ProviderOptions{TTL: o.LaunchTemplateTTL})
	var serverVersion discovery.ServerVersionInterface
	if o.RestConfig != nil {
		if serverVersion, err = discovery.NewDiscoveryClientForConfig(o.RestConfig); err != nil {
			return nil, fmt.Errorf("building a discovery client: %w", err)
		}
	}
	versions := version.New(eksAPI, serverVersion, s.ClusterName, s.EKSControlPlane)
	amis := amifamily.NewProvider(clients.EC2, clients.SSM, amifamily.Options{KubernetesVersion: versions.Get, ImageTTL: s.AMIRefreshInterval})
	// One subnet provider for status and launches: launches' address
	// tracking rides on the same DescribeSubnets cache.
	subnets := subnet.NewProvider(clients.EC2, s.SubnetRefreshInterval)
	var nodeClassReservations *capacityreservation.Provider
	// Launches into reservations decrement the same tracker the reserved
	// offerings read. Set only with the gate on: a nil pointer inside the
	// interface would not read as "none".
	var launchReservations awscloudprovider.Reservations
	if o.ReservedCapacity {
		nodeClassReservations = reservations
		launchReservations = reservations
	}
	hashCA, err := hashCABundle(o)
	if err != nil {
		return nil, err
	}
	profiles := instanceprofile.NewProvider(clients.IAM, clients.Region, s.ClusterName)
	p := &Provider{
		hashCA:    hashCA,
		Cluster:   cluster,
		clients:   clients,
		templates: launchTemplates,
		prices:    prices,
		types:     types,
		amis:      amis,
		opts:      o,
		log:       o.Logger,
		nodeClass: nodeclass.NewController(o.Kube, nodeclass.Options{
			Subnets:          subnets,
			SecurityGroups:   securitygroup.NewProvider(clients.EC2, 0),
			AMIs:             amis,
			InstanceProfiles: profiles,
			PlacementGroups:  clients.EC2,
			LaunchTemplates:  launchTemplates,
			ClusterName:      s.ClusterName,
			DisableDryRun:    s.DisableDryRun,
			// Nil with the ReservedCapacity gate off.
			CapacityReservations: nodeClassReservations,
			Clock:                o.Clock,
			InstanceTypes:        types,
		}),
	}
	placementGroups := placementgroup.NewProviderWithClock(clients.EC2, 0, o.Clock.Now)
	p.placementGroups = placementGroups
	p.instances = instance.NewProvider(clients.EC2, s.ClusterName, o.Unavailable, instance.WithSubnets(subnets), instance.WithEvents(p.nodeClaimEvent),
		instance.WithPlacementGroupZones(placementGroups))
	p.CloudProvider = awscloudprovider.New(awscloudprovider.Options{
		Kube:            o.Kube,
		InstanceTypes:   types,
		LaunchTemplates: launchTemplates,
		Instances:       p.instances,
		Subnets:         subnets,
		Cluster:         cluster,
		Reservations:    launchReservations,
		HashCABundle:    hashCA,
		PlacementGroups: placementGroups,
	})
	p.warm = make(chan struct{})
	p.reservations = reservations
	p.shifts = shifts
	p.versions = versions
	p.profiles = profiles
	return p, nil
}

// nodeClaimEvent records an event of the launch path on a NodeClaim.
func (p *Provider) nodeClaimEvent(name, eventType, reason, message string) {
	if r := p.recorder.Load(); r != nil {
		(*r).Event(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, eventType, reason, message)
	}
}

// Register adds the AWS controllers to mgr: EC2NodeClass status,
// finalization and hash, post-registration instance tags, the instance-type
// and offering gauges, the refresher of prices and instance types, the
// instance-status check, the pruning of unused launch templates, the
// launch templates made ahead of NodePools' first launches, and, when
// INTERRUPTION_QUEUE names a queue, the interruption controller.
func (p *Provider) Register(ctx context.Context, mgr manager.Manager) error {
	kube, s := p.opts.Kube, p.opts.Settings
	recorder := mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, like the rest of the project
	p.recorder.Store(&recorder)
	registrars := []interface {
		Name() string
		Register(context.Context, manager.Manager) error
	}{
		p.nodeClass,
		nodeclasshash.NewController(kube, p.hashCA),
		tagging.NewController(kube, p.clients.EC2, p.instances, s.ClusterName),
		awsmetrics.NewController(kube, p.CloudProvider, p.opts.Unavailable, p.log.WithName("metrics")),
		interruption.NewStatusController(kube, p.clients.EC2, interruption.StatusOptions{Interval: s.InstanceStatusInterval, Recorder: recorder, Clock: p.opts.Clock}),
		ssminvalidation.New(p.amis, p.nodeClass, s.SSMInvalidationInterval, p.log.WithName("ssm")),
		capacity.NewController(kube, p.types),
		// Leader only: deletes the cluster's launch templates unused for the TTL.
		launchtemplate.NewPruner(p.templates, p.opts.LaunchTemplatePruneInterval, p.log.WithName("launchtemplate")),
		// Leader only: makes NodePools' launch templates before their first launch.
		launchtemplates.NewController(kube, p.CloudProvider),
		partition.NewController(kube, p.instances, p.placementGroups),
	}
	if !s.IsolatedVPC {
		// IAM has no endpoint inside an isolated VPC.
		registrars = append(registrars, instanceprofilegc.NewController(kube, p.profiles, instanceprofilegc.Options{Clock: p.opts.Clock.Now, Log: p.log.WithName("instanceprofile")}))
	}
	if p.shifts != nil {
		registrars = append(registrars, zonalshiftcontroller.NewController(kube, p.shifts, recorder, 0, p.log.WithName("zonalshift")))
	}
	if p.opts.ReservedCapacity {
		// The capacity-type check only lists instances: a provider of its
		// own leaves the launch path's alone.
		instances := instance.NewProvider(p.clients.EC2, s.ClusterName, nil)
		registrars = append(registrars, capacitytype.NewController(kube, instances), expiration.NewController(kube, p.reservations, p.opts.Clock))
	}
	if s.InterruptionQueue != "" {
		opts := interruption.Options{Unavailable: p.opts.Unavailable, Recorder: recorder, Clock: p.opts.Clock, ReplaceOnRebalance: s.InterruptionReplaceOnRebalance,
			Reservations: p.reservations}
		if s.InterruptionRateLearning {
			opts.Learner = interruption.NewLearner(p.opts.Unavailable, interruption.LearnerOptions{})
		}
		registrars = append(registrars, interruption.NewController(kube, sqs.NewFromConfig(p.opts.AWS), s.InterruptionQueue, opts))
	}
	for _, r := range registrars {
		if err := r.Register(ctx, mgr); err != nil {
			return fmt.Errorf("registering the %s controller: %w", r.Name(), err)
		}
	}
	// On every replica, not only the leader: a standby is warm when it
	// takes over.
	if err := mgr.Add(warmer{p}); err != nil {
		return fmt.Errorf("registering the aws refresher: %w", err)
	}
	// Leader-only, like every runnable without NeedLeaderElection: from
	// now on this process launches, so NodeClaims created before may have
	// instances from the previous leader.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		p.instances.SetActive(p.opts.Clock.Now())
		<-ctx.Done()
		return nil
	})); err != nil {
		return fmt.Errorf("registering the launch leadership hook: %w", err)
	}
	// A new version re-resolves every class's aliases at once.
	if err := mgr.Add(p.versions.Refresher(s.VersionRefreshInterval, p.nodeClass.Resync, p.log.WithName("version"))); err != nil {
		return fmt.Errorf("registering the kubernetes version refresher: %w", err)
	}
	return nil
}

// warmer runs refresh on every replica: its NeedLeaderElection is false, so
// the manager starts it with its caches, before (and whether or not) this
// replica wins the lease.
type warmer struct{ p *Provider }

func (w warmer) Start(ctx context.Context) error { return w.p.refresh(ctx) }

func (warmer) NeedLeaderElection() bool { return false }

// refresh loads instance types, offerings and prices at start and keeps
// them current until ctx ends, so no provisioning round waits for EC2 or
// the Pricing API. The first load fetches instance types and prices side by
// side: the static price table serves until Pricing answers, so the types
// do not wait for it. After each load or refresh it computes the instance
// type list of every EC2NodeClass (warmLists), so the round after start-up
// or after new data finds it cached. A failure keeps the previous data (the
// static price table at first) and is logged; the providers retry after
// their RetryInterval.
func (p *Provider) refresh(ctx context.Context) error {
	start := p.opts.Clock.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := p.types.Tick(ctx); err != nil {
			if ctx.Err() == nil {
				p.log.Error(err, "loading instance types")
			}
			return
		}
		p.warmLists(ctx)
		p.log.Info("loaded instance types and offerings", "duration", p.opts.Clock.Since(start).String())
		p.warmOnce.Do(func() { close(p.warm) })
	}()
	go func() {
		defer wg.Done()
		if err := p.prices.Tick(ctx); err != nil {
			if ctx.Err() == nil {
				p.log.Error(err, "loading prices; the static price table serves until the Pricing API answers")
			}
			return
		}
		p.log.Info("loaded prices", "duration", p.opts.Clock.Since(start).String())
		p.warmLists(ctx)
	}()
	wg.Wait()
	// The wall clock paces the loop; the providers judge their intervals
	// by p.clock.
	t := time.NewTicker(RefreshPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := p.prices.Tick(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "refreshing prices")
		}
		if err := p.types.Tick(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "refreshing instance types")
		}
		p.warmLists(ctx)
		if p.types.Loaded() {
			// Loaded by a retry or by a round's List.
			p.warmOnce.Do(func() { close(p.warm) })
		}
	}
}

// Warm is closed once instance types and offerings are loaded and the
// instance types of every EC2NodeClass computed, by the refresher Register
// adds, which runs on every replica from start. The controller holds its
// campaign for leadership on it (operator.HoldLeadership), so the replica
// that leads can plan its first round without calling EC2.
func (p *Provider) Warm() <-chan struct{} { return p.warm }

// warmLists computes the instance types of every EC2NodeClass that has
// resolved subnets, so that a round's GetInstanceTypes is a cache hit.
// When nothing changed each class is a cache hit here too. Failures are
// left to the round, which reports them.
func (p *Provider) warmLists(ctx context.Context) {
	if !p.types.Loaded() {
		return
	}
	var classes awsv1.EC2NodeClassList
	if err := p.opts.Kube.List(ctx, &classes); err != nil {
		if ctx.Err() == nil {
			p.log.V(1).Info("listing EC2NodeClasses to warm their instance types", "error", err.Error())
		}
		return
	}
	for i := range classes.Items {
		nc := &classes.Items[i]
		if len(nc.Status.Subnets) == 0 || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		if _, err := p.types.List(ctx, nc); err != nil && ctx.Err() == nil {
			p.log.V(1).Info("warming instance types", "ec2nodeclass", nc.Name, "error", err.Error())
		}
	}
}

// EKSAPI is the EKS call cluster discovery makes.
type EKSAPI interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, opts ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// discoverCluster fills what nodes bootstrap with: the endpoint and CA from
// the settings, else from EKS DescribeCluster (as upstream); the service
// CIDR from DescribeCluster (AL2023's nodeadm needs it); the CA, last, from
// the controller's own connection to the API server; and kube-dns's
// ClusterIP as the cluster DNS when the Service exists.
func discoverCluster(ctx context.Context, o Options, api EKSAPI) (launchtemplate.Cluster, error) {
	s := o.Settings
	c := launchtemplate.Cluster{Name: s.ClusterName, Endpoint: s.ClusterEndpoint, CABundle: s.ClusterCABundle}
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(s.ClusterName)})
	switch {
	case err == nil && out.Cluster != nil:
		if c.Endpoint == "" {
			c.Endpoint = aws.ToString(out.Cluster.Endpoint)
		}
		if c.CABundle == "" && out.Cluster.CertificateAuthority != nil {
			c.CABundle = aws.ToString(out.Cluster.CertificateAuthority.Data)
		}
		if n := out.Cluster.KubernetesNetworkConfig; n != nil {
			c.CIDR = aws.ToString(n.ServiceIpv4Cidr)
			if c.CIDR == "" {
				c.CIDR = aws.ToString(n.ServiceIpv6Cidr)
			}
		}
	case c.Endpoint == "":
		return c, fmt.Errorf("discovering the cluster endpoint of %s with DescribeCluster (set CLUSTER_ENDPOINT to skip it): %w", s.ClusterName, err)
	default:
		// Not EKS, or no permission: the settings say where the API
		// server is; AL2023 launches will say that the CIDR is missing.
		o.Logger.Info("cluster details not discovered through DescribeCluster", "cluster", s.ClusterName, "error", fmt.Sprint(err))
	}
	if c.CABundle == "" && o.RestConfig != nil {
		ca := o.RestConfig.CAData
		if len(ca) == 0 && o.RestConfig.CAFile != "" {
			if ca, err = os.ReadFile(o.RestConfig.CAFile); err != nil {
				return c, fmt.Errorf("reading the API server's CA %s: %w", o.RestConfig.CAFile, err)
			}
		}
		c.CABundle = base64.StdEncoding.EncodeToString(ca)
	}
	c.DNS = kubeDNS(ctx, o)
	return c, nil
}

// hashCABundle is the CA bundle the EC2NodeClass hash includes, chosen as
// upstream chooses it so that both controllers stamp equal hashes on one
// cluster: the cluster-ca-bundle setting, else the CA of the controller's
// own connection to the API server (base64; empty without one). EKS's
// DescribeCluster answer is not used here, as upstream does not.
func hashCABundle(o Options) (*string, error) {
	if s := o.Settings.ClusterCABundle; s != "" {
		return &s, nil
	}
	var ca []byte
	if o.RestConfig != nil {
		ca = o.RestConfig.CAData
		if len(ca) == 0 && o.RestConfig.CAFile != "" {
			var err error
			if ca, err = os.ReadFile(o.RestConfig.CAFile); err != nil {
				return nil, fmt.Errorf("reading the API server's CA %s: %w", o.RestConfig.CAFile, err)
			}
		}
	}
	s := base64.StdEncoding.EncodeToString(ca)
	return &s, nil
}

// kubeDNS is kube-dns's ClusterIP, read once and directly: the manager's
// cache has not started when the provider is built, and a cached read
// would start a cluster-wide Service informer (list and watch on every
// Service) for one object. Empty when there is no kube-dns; the AMI's
// bootstrap then derives the DNS address from the service CIDR.
func kubeDNS(ctx context.Context, o Options) string {
	if o.RestConfig == nil {
		return ""
	}
	cs, err := kubernetes.NewForConfig(o.RestConfig)
	if err != nil {
		o.Logger.Info("not reading kube-dns", "error", err.Error())
		return ""
	}
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			o.Logger.Info("could not read kube-system/kube-dns for the nodes' cluster DNS", "error", err.Error())
		}
		return ""
	}
	return svc.Spec.ClusterIP
}
