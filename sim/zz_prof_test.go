package sim

import "testing"

func BenchmarkZZLocks(b *testing.B) {
	for b.Loop() {
		for _, sc := range Scenarios() {
			if !sc.Locks() {
				continue
			}
			for seed := uint64(1); seed <= 30; seed++ {
				Run(sc, seed, Options{})
			}
		}
	}
}
