package sim

import (
	"fmt"
	"os"
	"testing"
)

func TestZZHashes(t *testing.T) {
	f, _ := os.Create(os.Getenv("HASHOUT"))
	defer f.Close()
	for _, sc := range Scenarios() {
		for seed := uint64(1); seed <= 20; seed++ {
			r := Run(sc, seed, Options{})
			fmt.Fprintf(f, "%s %d %016x %d %v\n", sc.Name, seed, r.Hash, r.Lines, r.Counts)
		}
	}
}
