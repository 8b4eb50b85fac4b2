package kwok

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

func TestParseFaults(t *testing.T) {
	tests := []struct {
		spec    string
		want    Faults
		wantErr bool
	}{
		{spec: "", want: Faults{}},
		{spec: "ice=c7a.large/test-zone-a/spot", want: Faults{ICE: []cloudprovider.OfferingKey{{InstanceType: "c7a.large", Zone: "test-zone-a", CapacityType: "spot"}}}},
		{spec: "ice=*/test-zone-a/*,m7a.large//on-demand", want: Faults{ICE: []cloudprovider.OfferingKey{
			{InstanceType: "*", Zone: "test-zone-a", CapacityType: "*"}, {InstanceType: "m7a.large", CapacityType: "on-demand"}}}},
		{spec: "create-errors=3", want: Faults{CreateErrors: 3}},
		{spec: "create-errors=always", want: Faults{CreateErrors: -1}},
		{spec: "registration=never", want: Faults{NeverRegister: true}},
		{spec: " registration=45s ; create-errors=1 ", want: Faults{RegistrationDelay: ptr(45 * time.Second), CreateErrors: 1}},
		{spec: "hang-after-create=10m", want: Faults{HangAfterCreate: 10 * time.Minute}},
		{spec: "hang-after-create=later", wantErr: true},
		{spec: "ice=a/b", wantErr: true},
		{spec: "create-errors=-2", wantErr: true},
		{spec: "registration=soon", wantErr: true},
		{spec: "explode=yes", wantErr: true},
		{spec: "ice", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseFaults(tt.spec)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := ParseFaults(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, again, "String round-trips")
		})
	}
}

func TestFaultMatching(t *testing.T) {
	f := Faults{ICE: []cloudprovider.OfferingKey{{InstanceType: "*", Zone: "z1"}}}
	assert.True(t, f.iced(cloudprovider.OfferingKey{InstanceType: "x", Zone: "z1", CapacityType: "spot"}))
	assert.False(t, f.iced(cloudprovider.OfferingKey{InstanceType: "x", Zone: "z2", CapacityType: "spot"}))
}

func TestAddFlags(t *testing.T) {
	t.Setenv(EnvCatalog, CatalogUpstreamKWOK)
	t.Setenv(EnvFaults, "registration=never")
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	require.NoError(t, o.AddFlags(fs))
	assert.Equal(t, CatalogUpstreamKWOK, o.Catalog)
	assert.True(t, o.Faults.NeverRegister)
	require.NoError(t, fs.Parse([]string{"--kwok-registration-delay=5s", "--kwok-faults=create-errors=1"}))
	assert.Equal(t, 5*time.Second, o.RegistrationDelay)
	assert.Equal(t, Faults{CreateErrors: 1}, o.Faults, "flags override the environment")

	t.Setenv(EnvRegistrationDelay, "soon")
	assert.Error(t, (&Options{}).AddFlags(flag.NewFlagSet("bad", flag.ContinueOnError)))
}
