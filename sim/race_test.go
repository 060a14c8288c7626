//go:build race

package sim

// raceEnabled: the race detector slows the simulator about tenfold, so the
// suites run fewer seeds (see seedsPerScenario) and `make test` stays quick.
const raceEnabled = true
