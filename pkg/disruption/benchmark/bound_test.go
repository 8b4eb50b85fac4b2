package benchmark

import (
	"math"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

func TestCoverLP2(t *testing.T) {
	tests := []struct {
		name string
		rows [][3]float64
		d    [2]float64
		want float64
	}{
		{"one type, cpu binds", [][3]float64{{4, 8, 1}}, [2]float64{8, 8}, 2},
		{"one type, memory binds", [][3]float64{{4, 8, 1}}, [2]float64{4, 24}, 3},
		// cpu-rich at 1 and memory-rich at 1: 8 cpu and 8 memory take one of each.
		{"two types mix", [][3]float64{{8, 0.001, 1}, {0.001, 8, 1}}, [2]float64{8, 8}, 2},
		{"cheaper balanced type wins", [][3]float64{{8, 1, 1}, {1, 8, 1}, {8, 8, 1.5}}, [2]float64{8, 8}, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := coverLP2(tt.rows, tt.d); math.Abs(got-tt.want) > 1e-2 {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestClusterAndExecute: the synthetic cluster has 10 pods a node before
// the scale-in and 70% after, and carrying out the planner's commands
// keeps every pod scheduled.
func TestClusterAndExecute(t *testing.T) {
	c, err := NewCluster(30, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.AppPods(); got != 300 {
		t.Fatalf("app pods %d", got)
	}
	c.ScaleIn(0.3)
	if got := c.AppPods(); got != 210 {
		t.Fatalf("app pods after scale-in %d", got)
	}
	before := c.Price()
	r, err := Consolidate(c, Upstream(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.AppPods() != 210 || r.PriceAfter > before || r.Commands == 0 {
		t.Fatalf("pods %d, price %.2f -> %.2f, commands %d", c.AppPods(), before, r.PriceAfter, r.Commands)
	}
}

func TestPodFloor(t *testing.T) {
	tests := []struct {
		name   string
		capped bool
		n      int
		// typ is the type with the cheapest price per large pod, fits
		// how many it holds.
		typ  string
		fits int
	}{
		// 16 vCPU / 128 GiB less 100m and 10Mi: 4 pods of 3500m and 28 GiB.
		{"capped at 16 vCPU", true, 500, "m-16x-amd64-linux", 4},
		// m-256x: 255.9 vCPU hold 73 (255.5), 2 TiB hold 73 (2044 GiB);
		// every smaller m type wastes more per pod (m-32x: 9 at $1.0749).
		{"uncapped", false, 500, "m-256x-amd64-linux", 73},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat, err := kwok.LoadCatalog(kwok.CatalogUpstreamKWOK)
			if err != nil {
				t.Fatal(err)
			}
			var price float64
			for _, it := range cat {
				if it.Name != tt.typ {
					continue
				}
				for _, o := range it.Offerings {
					if o.CapacityType == "on-demand" && (price == 0 || o.Price < price) {
						price = o.Price
					}
				}
			}
			got, err := LargePodFloor(tt.n, tt.capped)
			if err != nil {
				t.Fatal(err)
			}
			if want := price / float64(tt.fits) * float64(tt.n); math.Abs(got-want) > 1e-9 {
				t.Fatalf("LargePodFloor(%d, %v) = %.4f, want %.4f (%s at %d per machine)", tt.n, tt.capped, got, want, tt.typ, tt.fits)
			}
		})
	}
}
