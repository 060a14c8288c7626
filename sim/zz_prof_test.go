package sim

import "testing"

func BenchmarkZZAll(b *testing.B) {
	for b.Loop() {
		for _, sc := range Scenarios() {
			for seed := uint64(1); seed <= 10; seed++ {
				Run(sc, seed, Options{})
			}
		}
	}
}
