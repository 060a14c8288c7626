package standby

import (
	"testing"
	"time"
)

// A flood of wake-ups makes WakeBurst reads at once, then one every
// WakeEvery, however many arrive.
func TestWakeRateLimit(t *testing.T) {
	var s Standby
	t0 := time.Unix(1e9, 0)
	allowed := 0
	for i := range 1000 { // 1,000 wake-ups a second for 10s
		if s.AllowWake(t0.Add(time.Duration(i) * 10 * time.Millisecond)) {
			allowed++
		}
	}
	if want := WakeBurst + 9; allowed != want { // the burst, then one a second
		t.Fatalf("%d wake-ups allowed in 10s of a flood, want %d", allowed, want)
	}
	// Quiet for a while: the full burst again.
	later := t0.Add(time.Minute)
	for i := range WakeBurst {
		if !s.AllowWake(later) {
			t.Fatalf("wake-up %d of a new burst refused", i)
		}
	}
	if s.AllowWake(later) {
		t.Fatal("a wake-up beyond the burst allowed")
	}
}
