package repack

import (
	"math"
	"testing"
)

func TestCoverCost(t *testing.T) {
	// Resources per $/h: a cpu-heavy family (2,000 millicores and 2 units
	// of memory per dollar) and a memory-heavy one (1,000 and 8).
	cpuType, memType := [2]float64{2000, 2}, [2]float64{1000, 8}
	tests := []struct {
		name  string
		front [][2]float64
		d     vec
		want  float64
	}{
		{name: "one type: the scarcer resource decides", front: [][2]float64{cpuType}, d: vec{1000, 4}, want: 2},
		{name: "cpu-only demand buys the cpu type", front: [][2]float64{cpuType, memType}, d: vec{2000, 0}, want: 1},
		{name: "memory-only demand buys the memory type", front: [][2]float64{cpuType, memType}, d: vec{0, 8}, want: 1},
		// 2000·a + 1000·b = 3000 and 2·a + 8·b = 10 → a = b = $1; the cpu
		// type alone costs $5 (memory), the memory type alone $3 (cpu).
		{name: "mixed demand mixes both types", front: [][2]float64{cpuType, memType}, d: vec{3000, 10}, want: 2},
		{name: "no types", front: nil, d: vec{1000, 1}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := coverCost(tt.front, tt.d); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("coverCost = %v, want %v", got, tt.want)
			}
		})
	}
}
