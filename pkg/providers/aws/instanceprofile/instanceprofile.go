// Package instanceprofile manages the IAM instance profiles Karpenter creates
// for an EC2NodeClass's spec.role, as upstream does: a profile named
// <cluster>_<hash of region, class name and a random UUID>, under the IAM
// path /karpenter/<region>/<cluster>/<nodeclass uid>/, tagged as the
// cluster's and the class's, holding exactly the class's role. A new profile
// is created when the role changes (the old one is left for cleanup), and
// every profile under a class's path is deleted when the class goes.
package instanceprofile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/google/uuid"
	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
)

// API is the part of the IAM client the provider calls.
type API interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

// CacheTTL is upstream's instance-profile cache lifetime.
const CacheTTL = 15 * time.Minute

// ProtectionTTL is how long a profile a role change replaced is kept from
// garbage collection: instances launched with it may not yet carry the
// NodeClaim annotation that protects it afterwards (upstream's 1h).
const ProtectionTTL = time.Hour

// PropagationDelay is, by default, how long after this provider put a role into a
// profile it reports the profile as still propagating. IAM is eventually
// consistent: EC2 refuses a launch naming a profile (or a profile's new
// role) it has not seen yet with "Invalid IAM Instance Profile", typically
// for a few seconds. Launching before that would only spend CreateFleet
// calls and NodeClaim retries on refusals.
const PropagationDelay = 10 * time.Second

// unstoredTTL bounds how long Ensure offers a profile it made to a class
// whose status never named it (the class deleted meanwhile, status writes
// failing throughout); past it the profile is garbage collection's.
const unstoredTTL = 15 * time.Minute

// Provider creates, finds and deletes managed instance profiles. It is safe
// for concurrent use.
type Provider struct {
	iam     API
	region  string
	cluster string
	// now and delay judge propagation (WithPropagation).
	now   func() time.Time
	delay time.Duration
	// profiles caches GetInstanceProfile answers by name.
	profiles *ttl.Cache[iamtypes.InstanceProfile]
	// protected are the profiles replaced within ProtectionTTL.
	protected *ttl.Cache[bool]
	// propagating holds, by name, when the profiles whose role this
	// provider set within PropagationDelay become usable.
	propagating *ttl.Cache[time.Time]
	// unstored holds, by class UID, the profile Ensure made for a class
	// whose status did not name it yet. The controller's status write can
	// lose to another write of the class (the hash controller's
	// annotation, a user's edit); the retry then stores this profile
	// instead of making another and deleting this one, which would cost
	// IAM calls and start the class's propagation wait over.
	unstored *ttl.Cache[string]
}

// NewProvider returns a provider for the cluster's profiles in region.
func NewProvider(api API, region, cluster string) *Provider {
	return &Provider{iam: api, region: region, cluster: cluster, now: time.Now, delay: PropagationDelay,
		profiles: ttl.New[iamtypes.InstanceProfile](nil), protected: ttl.New[bool](nil), propagating: ttl.New[time.Time](nil),
		unstored: ttl.New[string](nil)}
}

// WithPropagation sets how long a profile whose role this provider set is
// reported as propagating (0 never reports it) and the clock that judges
// it (time.Now when nil). It returns p, and is for tests and for the
// provider's construction only.
func (p *Provider) WithPropagation(delay time.Duration, now func() time.Time) *Provider {
	if now == nil {
		now = time.Now
	}
	p.delay, p.now, p.propagating = delay, now, ttl.New[time.Time](now)
	return p
}

// Propagating is how much longer the named profile may be unknown to EC2
// because this provider set its role moments ago; 0 once that has passed,
// and for any profile it did not change (one that existed before a
// restart has had time to propagate, or a launch's refusal is retried).
func (p *Provider) Propagating(name string) time.Duration {
	at, ok := p.propagating.Get(name)
	if !ok {
		return 0
	}
	return max(at.Sub(p.now()), 0)
}

// NewName is a fresh managed profile name for the class, as upstream forms
// it: the cluster name, "_", and the FNV hash hashstructure gives the
// region, the class name and a random UUID.
func NewName(cluster, region, nodeClassName string) string {
	h, err := hashstructure.Hash(region+nodeClassName+uuid.NewString(), hashstructure.FormatV2, nil)
	if err != nil {
		// Hashing a string cannot fail; keep a usable name anyway.
		return cluster + "_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	return fmt.Sprintf("%s_%d", cluster, h)
}

// ClusterPath is the IAM path prefix of every profile the cluster manages.
func ClusterPath(region, cluster string) string {
	return fmt.Sprintf("/karpenter/%s/%s/", region, cluster)
}

// NodeClassPath is the IAM path of a class's managed profiles.
func NodeClassPath(region, cluster, uid string) string {
	return ClusterPath(region, cluster) + uid + "/"
}

// Tags are the tags on a managed profile: the class's own tags plus the
// cluster ownership, EKS cluster name, class name and region.
func Tags(nodeClass *awsv1.EC2NodeClass, cluster, region string) map[string]string {
	out := map[string]string{}
	for k, v := range nodeClass.Spec.Tags {
		out[k] = v
	}
	out[awsv1.KubernetesClusterTagKeyPrefix+cluster] = "owned"
	out[awsv1.EKSClusterNameTagKey] = cluster
	out[awsv1.NodeClassTagKey] = nodeClass.Name
	out[corev1.LabelTopologyRegion] = region
	return out
}

// Ensure returns the name of a managed profile holding the class's role:
// the one in status when it still holds that role, else the one an
// earlier Ensure made that status does not name yet, else a newly created
// one.
func (p *Provider) Ensure(ctx context.Context, nodeClass *awsv1.EC2NodeClass) (string, error) {
	role := nodeClass.Spec.Role
	uid := string(nodeClass.UID)
	if current := nodeClass.Status.InstanceProfile; current != "" {
		if made, ok := p.unstored.Get(uid); ok && made == current {
			p.unstored.Delete(uid)
		}
		profile, found, err := p.Get(ctx, current)
		if err != nil {
			return "", err
		}
		if found && aws.ToString(profile.Path) == NodeClassPath(p.region, p.cluster, uid) &&
			len(profile.Roles) == 1 && aws.ToString(profile.Roles[0].RoleName) == roleName(role) {
			return current, nil
		}
	}
	// Create is idempotent on a name: a profile made for an earlier role
	// has its role swapped, one gone since is made again.
	// A failed Create is retried under the same name, so a retry never
	// leaves a second profile behind.
	name, ok := p.unstored.Get(uid)
	if !ok {
		name = NewName(p.cluster, p.region, nodeClass.Name)
	}
	p.unstored.Set(uid, name, unstoredTTL)
	if err := p.Create(ctx, name, role, Tags(nodeClass, p.cluster, p.region), uid); err != nil {
		return "", err
	}
	if current := nodeClass.Status.InstanceProfile; current != "" {
		p.Protect(current)
	}
	return name, nil
}

// Protect keeps the named profile from garbage collection for
// ProtectionTTL.
func (p *Provider) Protect(name string) { p.protected.Set(name, true, ProtectionTTL) }

// IsProtected reports a profile Protect named within ProtectionTTL.
func (p *Provider) IsProtected(name string) bool {
	_, ok := p.protected.Get(name)
	return ok
}

// Get returns the named profile; found is false when IAM has none.
func (p *Provider) Get(ctx context.Context, name string) (iamtypes.InstanceProfile, bool, error) {
	if profile, ok := p.profiles.Get(name); ok {
		return profile, true, nil
	}
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		if IsNotFound(err) {
			return iamtypes.InstanceProfile{}, false, nil
		}
		return iamtypes.InstanceProfile{}, false, fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	p.profiles.Set(name, *out.InstanceProfile, CacheTTL)
	return *out.InstanceProfile, true, nil
}

// Create makes sure the named profile exists under the class's path with
// exactly role in it. It is idempotent: an existing profile keeps its name
// and has a wrong role swapped.
//
// The role is not looked up first: upstream's controller policy grants no
// iam:GetRole, so a missing role shows as AddRoleToInstanceProfile's
// NoSuchEntity, and a profile this call made for it is deleted again.
func (p *Provider) Create(ctx context.Context, name, role string, tags map[string]string, nodeClassUID string) error {
	profile, found, err := p.Get(ctx, name)
	if err != nil {
		return err
	}
	if !found {
		out, err := p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name),
			Path:                aws.String(NodeClassPath(p.region, p.cluster, nodeClassUID)),
			Tags:                iamTags(tags),
		})
		if err != nil {
			return fmt.Errorf("creating instance profile %s: %w", name, err)
		}
		profile = *out.InstanceProfile
	}
	want := roleName(role)
	// A profile holds at most one role.
	if len(profile.Roles) == 1 {
		if aws.ToString(profile.Roles[0].RoleName) == want {
			p.profiles.Set(name, profile, CacheTTL)
			return nil
		}
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: profile.Roles[0].RoleName,
		}); err != nil {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(profile.Roles[0].RoleName), name, err)
		}
	}
	if _, err := p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(name), RoleName: aws.String(want),
	}); err != nil {
		p.profiles.Delete(name)
		if IsNotFound(err) {
			if !found {
				// An empty profile would otherwise wait for garbage
				// collection; the class will ask for a fresh name anyway.
				if _, derr := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); derr != nil && !IsNotFound(derr) {
					return fmt.Errorf("role %s does not exist (%w); deleting the empty instance profile %s: %w", role, err, name, derr)
				}
			}
			return fmt.Errorf("role %s does not exist: %w", role, err)
		}
		return fmt.Errorf("adding role %s to instance profile %s: %w", want, name, err)
	}
	profile.Roles = []iamtypes.Role{{RoleName: aws.String(want)}}
	p.profiles.Set(name, profile, CacheTTL)
	if p.delay > 0 {
		p.propagating.Set(name, p.now().Add(p.delay), p.delay)
	}
	return nil
}

// Delete removes the profile's role and the profile; a missing profile is
// not an error.
func (p *Provider) Delete(ctx context.Context, name string) error {
	p.profiles.Delete(name)
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		if IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	for _, r := range out.InstanceProfile.Roles {
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName,
		}); err != nil && !IsNotFound(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	return nil
}

// ListNodeClassProfiles lists the managed profiles under the class's path.
func (p *Provider) ListNodeClassProfiles(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]iamtypes.InstanceProfile, error) {
	return p.list(ctx, NodeClassPath(p.region, p.cluster, string(nodeClass.UID)))
}

// ListClusterProfiles lists every managed profile of the cluster.
func (p *Provider) ListClusterProfiles(ctx context.Context) ([]iamtypes.InstanceProfile, error) {
	return p.list(ctx, ClusterPath(p.region, p.cluster))
}

func (p *Provider) list(ctx context.Context, prefix string) ([]iamtypes.InstanceProfile, error) {
	var out []iamtypes.InstanceProfile
	pages := iam.NewListInstanceProfilesPaginator(p.iam, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instance profiles under %s: %w", prefix, err)
		}
		out = append(out, page.InstanceProfiles...)
	}
	return out, nil
}

// IsNotFound reports IAM's NoSuchEntity.
func IsNotFound(err error) bool {
	var nse *iamtypes.NoSuchEntityException
	return errors.As(err, &nse)
}

// roleName drops a role's path: AddRoleToInstanceProfile takes names only.
func roleName(role string) string {
	if i := strings.LastIndex(role, "/"); i >= 0 {
		return role[i+1:]
	}
	return role
}

func iamTags(tags map[string]string) []iamtypes.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]iamtypes.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}
