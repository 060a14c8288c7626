package sim

import "testing"

func BenchmarkZZAll(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, sc := range Scenarios() {
			Run(sc, uint64(i+1), Options{})
		}
	}
}
