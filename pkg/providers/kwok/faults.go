package kwok

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
