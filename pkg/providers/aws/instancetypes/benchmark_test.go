package instancetypes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
)

// BenchmarkGetInstanceTypes20NodePools measures GetInstanceTypes for
// NodePools sharing one EC2NodeClass, per round of one call per pool:
//
//   - warm: every pool hits the cached list;
//   - cold: the cached list has expired, so the first pool computes it
//     (instancetype.New for every offered type, offerings and prices) and
//     the other pools share it;
//   - ice: the unavailable offering changed since the last round, so the
//     first pool lays a new overlay over the cached list (copying the one
//     instance type it touches) and the others share it.
//
// 1 and 20 pools are run side by side: the cost of 20 must be that of 1
// plus 19 cache hits, and the cache holds one list either way (lists/op).
func BenchmarkGetInstanceTypes20NodePools(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 20} {
		for _, mode := range []string{"warm", "cold", "ice"} {
			b.Run(fmt.Sprintf("pools=%d/%s", n, mode), func(b *testing.B) {
				clk := clocktesting.NewFakeClock(time.Now())
				ice := &flipping{}
				p := newProvider(instancetypes.Options{Unavailable: ice, Clock: clk})
				env := newPools(n, twoZoneClass("bench"))
				if err := p.Refresh(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := env.getInstanceTypes(ctx, p, env.pools[0]); err != nil {
					b.Fatal(err)
				}
				types := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					switch mode {
					case "cold":
						clk.Step(instancetypes.CacheTTL)
					case "ice":
						zone := []string{"us-east-1a", "us-east-1c"}[i%2]
						ice.keys = []cloudprovider.OfferingKey{{InstanceType: "m5.large", Zone: zone, CapacityType: "spot"}}
					}
					for _, np := range env.pools {
						its, err := env.getInstanceTypes(ctx, p, np)
						if err != nil {
							b.Fatal(err)
						}
						types = len(its)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/call")
				b.ReportMetric(float64(p.CachedLists()), "lists")
				b.ReportMetric(float64(types), "types")
			})
		}
	}
}

// flipping is an unavailable-offerings cache whose one entry the benchmark
// changes every round, so each round lays a new overlay.
type flipping struct{ keys []cloudprovider.OfferingKey }

func (f *flipping) Keys() []cloudprovider.OfferingKey { return f.keys }
