package kwok

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// FaultsAnnotationKey on a KWOKNodeClass injects faults for NodeClaims of
// that class, in ParseFaults syntax. It lets tests drive an out-of-process
// controller without restarting it.
const FaultsAnnotationKey = "karpenter-go.io/kwok-faults"

// Faults are failures the provider simulates on purpose.
type Faults struct {
	// ICE lists offerings that are out of capacity: a Create whose cheapest
	// compatible offering matches one fails with InsufficientCapacityError.
	// An empty or "*" field matches anything.
	ICE []cloudprovider.OfferingKey
	// CreateErrors makes Create fail with a CreateError: the next n calls
	// when positive, every call when negative.
	CreateErrors int
	// RegistrationDelay, when set, replaces the NodeClass's delay (slow
	// registration).
	RegistrationDelay *time.Duration
	// NeverRegister launches instances whose Node never appears (failed
	// registration). Get and List still report them until deleted.
	NeverRegister bool
	// HangAfterCreate makes Create wait this long after the Node exists and
	// before returning, so a test can kill the controller inside the window
	// between buying an instance and recording it on the NodeClaim. It
	// applies only when the Node is created inside Create (no registration
	// delay): a delayed instance lives in memory and dies with the process.
	HangAfterCreate time.Duration
}

// ParseFaults reads a fault spec: ";"-separated settings
//
//	ice=<instance-type>/<zone>/<capacity-type>[,...]   ("*" or empty = any)
//	create-errors=<n>|always
//	registration=never|<duration>
//	hang-after-create=<duration>                     (test hook: crash window)
//
// e.g. "ice=c7a.large/test-zone-a/spot;registration=30s". Empty means none.
func ParseFaults(spec string) (Faults, error) {
	var f Faults
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, ok := strings.Cut(item, "=")
		if !ok {
			return Faults{}, fmt.Errorf("fault %q: want key=value", item)
		}
		switch strings.TrimSpace(key) {
		case "ice":
			for _, o := range strings.Split(value, ",") {
				parts := strings.Split(strings.TrimSpace(o), "/")
				if len(parts) != 3 {
					return Faults{}, fmt.Errorf("fault ice=%q: want instance-type/zone/capacity-type", o)
				}
				f.ICE = append(f.ICE, cloudprovider.OfferingKey{InstanceType: parts[0], Zone: parts[1], CapacityType: parts[2]})
			}
		case "create-errors":
			if value == "always" {
				f.CreateErrors = -1
				break
			}
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return Faults{}, fmt.Errorf("fault create-errors=%q: want a count or \"always\"", value)
			}
			f.CreateErrors = n
		case "registration":
			if value == "never" {
				f.NeverRegister = true
				break
			}
			d, err := time.ParseDuration(value)
			if err != nil || d < 0 {
				return Faults{}, fmt.Errorf("fault registration=%q: want \"never\" or a duration", value)
			}
			f.RegistrationDelay = &d
		case "hang-after-create":
			d, err := time.ParseDuration(value)
			if err != nil || d < 0 {
				return Faults{}, fmt.Errorf("fault hang-after-create=%q: want a duration", value)
			}
			f.HangAfterCreate = d
		default:
			return Faults{}, fmt.Errorf("unknown fault %q", key)
		}
	}
	return f, nil
}

// String renders f in ParseFaults syntax.
func (f Faults) String() string {
	var parts []string
	if len(f.ICE) > 0 {
		keys := make([]string, 0, len(f.ICE))
		for _, k := range f.ICE {
			keys = append(keys, k.InstanceType+"/"+k.Zone+"/"+k.CapacityType)
		}
		parts = append(parts, "ice="+strings.Join(keys, ","))
	}
	switch {
	case f.CreateErrors < 0:
		parts = append(parts, "create-errors=always")
	case f.CreateErrors > 0:
		parts = append(parts, "create-errors="+strconv.Itoa(f.CreateErrors))
	}
	switch {
	case f.NeverRegister:
		parts = append(parts, "registration=never")
	case f.RegistrationDelay != nil:
		parts = append(parts, "registration="+f.RegistrationDelay.String())
	}
	if f.HangAfterCreate > 0 {
		parts = append(parts, "hang-after-create="+f.HangAfterCreate.String())
	}
	return strings.Join(parts, ";")
}

// Set and Type make *Faults a flag.Value.
func (f *Faults) Set(spec string) error {
	parsed, err := ParseFaults(spec)
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

func (f *Faults) Type() string { return "faults" }

// iced reports whether an ICE entry matches the offering.
func (f Faults) iced(key cloudprovider.OfferingKey) bool {
	for _, k := range f.ICE {
		if matches(k.InstanceType, key.InstanceType) && matches(k.Zone, key.Zone) && matches(k.CapacityType, key.CapacityType) {
			return true
		}
	}
	return false
}

func matches(pattern, value string) bool {
	return pattern == "" || pattern == "*" || pattern == value
}

// SetFaults replaces the injected faults (and restarts the create-error count).
func (p *Provider) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	p.createErrorsLeft = f.CreateErrors
}

// Faults returns the injected faults currently set through options or
// SetFaults (not those from NodeClass annotations).
func (p *Provider) Faults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// hangAfterCreate holds a Create whose Node already exists when the
// hang-after-create fault is set, giving crash tests a deterministic window
// in which the instance exists but no NodeClaim records it.
func (p *Provider) hangAfterCreate(ctx context.Context, name string, fromAnnotation Faults) {
	d := max(p.Faults().HangAfterCreate, fromAnnotation.HangAfterCreate)
	if d <= 0 {
		return
	}
	log.FromContext(ctx).Info("holding kwok launch after creating the instance (injected fault)", "node", name, "duration", d)
	select {
	case <-ctx.Done():
	case <-p.clock.After(d):
	}
}

// annotationFaults parses the NodeClass's fault annotation, if any.
func (p *Provider) annotationFaults(class *kwokv1alpha1.KWOKNodeClass) (Faults, error) {
	if class == nil || class.Annotations[FaultsAnnotationKey] == "" {
		return Faults{}, nil
	}
	f, err := ParseFaults(class.Annotations[FaultsAnnotationKey])
	if err != nil {
		return Faults{}, fmt.Errorf("annotation %s on node class %s: %w", FaultsAnnotationKey, class.Name, err)
	}
	return f, nil
}

// consumeCreateError reports whether this Create should fail, counting
// down the configured faults. Counts from an annotation are kept per class
// and annotation value, so changing the annotation starts a new count.
func (p *Provider) consumeCreateError(class *kwokv1alpha1.KWOKNodeClass, fromAnnotation Faults) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.createErrorsLeft != 0 {
		if p.createErrorsLeft > 0 {
			p.createErrorsLeft--
		}
		return true
	}
	switch n := fromAnnotation.CreateErrors; {
	case n < 0:
		return true
	case n > 0:
		key := class.Name + "\x00" + class.Annotations[FaultsAnnotationKey]
		if p.annotationUses[key] < n {
			p.annotationUses[key]++
			return true
		}
	}
	return false
}

// registrationDelay is how long until the Node appears, or never. Fault
// settings win over the NodeClass, which wins over the provider option.
func (p *Provider) registrationDelay(class *kwokv1alpha1.KWOKNodeClass, fromAnnotation Faults) (time.Duration, bool) {
	f := p.Faults()
	switch {
	case fromAnnotation.NeverRegister || f.NeverRegister:
		return 0, true
	case fromAnnotation.RegistrationDelay != nil:
		return *fromAnnotation.RegistrationDelay, false
	case f.RegistrationDelay != nil:
		return *f.RegistrationDelay, false
	case class != nil && class.Spec.NodeRegistrationDelay.Duration > 0:
		return class.Spec.NodeRegistrationDelay.Duration, false
	}
	return p.opts.RegistrationDelay, false
}
