package benchmark

import (
	"fmt"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

func TestQuick(t *testing.T) {
	for _, alg := range []Algorithm{Planner("planner", repack.Options{SpotToSpot: true}), Upstream()} {
		c, err := NewCluster(100, 0.3, 1)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Consolidate(c, alg, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Print(Table([]Result{r}))
	}
}
