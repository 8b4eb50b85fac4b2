package kwok

import (
	"flag"
	"fmt"
	"os"
)

// Flag and environment names for the provider's settings. The instance
// types file keeps upstream kwok's names.
const (
	FlagCatalog           = "kwok-catalog"
	FlagInstanceTypesFile = "instance-types-file-path"
	FlagRegistrationDelay = "kwok-registration-delay"
	FlagFaults            = "kwok-faults"
	FlagRepairToleration  = "kwok-repair-toleration"

	EnvCatalog           = "KWOK_CATALOG"
	EnvInstanceTypesFile = "INSTANCE_TYPES_FILE_PATH"
	EnvRegistrationDelay = "KWOK_REGISTRATION_DELAY"
	EnvFaults            = "KWOK_FAULTS"
	EnvRepairToleration  = "KWOK_REPAIR_TOLERATION"
)

// AddFlags registers the provider's flags on fs. Each defaults to its
// environment variable when set; an invalid environment value is an error
// here rather than a surprise at launch time.
func (o *Options) AddFlags(fs *flag.FlagSet) error {
	if o.Catalog == "" {
		o.Catalog = CatalogDefault
	}
	fs.StringVar(&o.Catalog, FlagCatalog, o.Catalog,
		fmt.Sprintf("built-in instance type catalog: %q (AWS-shaped) or %q (upstream kwok's)", CatalogDefault, CatalogUpstreamKWOK))
	fs.StringVar(&o.InstanceTypesFile, FlagInstanceTypesFile, o.InstanceTypesFile,
		"JSON instance type catalog to use instead of the built-in one")
	fs.DurationVar(&o.RegistrationDelay, FlagRegistrationDelay, o.RegistrationDelay,
		"how long a kwok instance takes to register its Node when its KWOKNodeClass sets no nodeRegistrationDelay")
	fs.Var(&o.Faults, FlagFaults,
		`faults to inject, e.g. "ice=c7a.large/test-zone-a/spot;create-errors=2;registration=never"`)
	if o.RepairToleration == 0 {
		o.RepairToleration = DefaultRepairToleration
	}
	fs.DurationVar(&o.RepairToleration, FlagRepairToleration, o.RepairToleration,
		"how long a node may be NotReady before node repair (feature gate NodeRepair) replaces it")
	for flagName, env := range map[string]string{
		FlagCatalog: EnvCatalog, FlagInstanceTypesFile: EnvInstanceTypesFile,
		FlagRegistrationDelay: EnvRegistrationDelay, FlagFaults: EnvFaults,
		FlagRepairToleration: EnvRepairToleration,
	} {
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(flagName, v); err != nil {
				return fmt.Errorf("environment %s=%q: %w", env, v, err)
			}
		}
	}
	return nil
}
