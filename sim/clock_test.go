package sim

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func TestMulDivFloor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		a := r.Int64N(1 << 50)
		b := r.Int64N(4e9) - 2e9
		c := r.Int64N(2e9) + 1e6
		want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		// Floor division: big.Int.Div rounds toward -∞ for a positive divisor.
		want.Div(want, big.NewInt(c))
		if got := mulDivFloor(a, b, c); got != want.Int64() {
			t.Fatalf("mulDivFloor(%d, %d, %d) = %d, want %d", a, b, c, got, want)
		}
	}
}

// TestClockTrueAt: trueAt finds the first true nanosecond at which the
// monotonic reading reaches a target, whatever the rate.
func TestClockTrueAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ppb := range []int64{0, 1, -1, 1_000_000, -1_000_000, 20_000_000, -20_000_000, 999_999_999, -990_000_000} {
		for range 2000 {
			c := clock{t0: time.Duration(r.Int64N(1e12)), l0: time.Duration(r.Int64N(1e13) - 5e12), ppb: ppb}
			now := c.t0 + time.Duration(r.Int64N(1e12))
			target := c.mono(now) + time.Duration(r.Int64N(1e12)) - 1000
			at := c.trueAt(now, target)
			if at < now || c.mono(at) < target || at > now && c.mono(at-1) >= target {
				t.Fatalf("ppb %d: trueAt(%d, %d) = %d: mono there %d, before %d", ppb, now, target, at, c.mono(at), c.mono(at-1))
			}
		}
	}
	frozen := clock{l0: 5, ppb: ppbFrozen}
	if frozen.mono(1e12) != 5 || frozen.trueAt(10, 6) != never || frozen.trueAt(10, 5) != 10 {
		t.Fatal("a frozen clock moves, or fires a timer")
	}
}

// TestClockRate: over any span a clock measures within its rate, give or
// take the nanosecond the floor may cost.
func TestClockRate(t *testing.T) {
	c := clock{l0: 1234, ppb: -1_000_000}
	c.setRate(10*time.Second, 1_000_000)
	if got := c.mono(10 * time.Second); got != 1234+10*time.Second-10*time.Millisecond {
		t.Fatalf("reading at the change of rate = %v", got)
	}
	if got := c.mono(20*time.Second) - c.mono(10*time.Second); got != 10*time.Second+10*time.Millisecond {
		t.Fatalf("10s at +1000ppm measured %v", got)
	}
}

func TestLatency(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	l := latency{Min: time.Millisecond, Max: 10 * time.Millisecond, TailOneIn: 10, TailMax: 5 * time.Second}
	var tail, long int
	for range 100_000 {
		d := l.draw(r)
		if d < l.Min || d > l.Bound() {
			t.Fatalf("draw %v outside [%v, %v]", d, l.Min, l.Bound())
		}
		if d > l.Max {
			tail++
		}
		if d > time.Second {
			long++
		}
	}
	// One in ten from the tail, whose doublings from 10ms to 5s are equally
	// likely: about a fifth of the tail lies past one second.
	if tail < 8_000 || tail > 12_000 || long < tail/10 || long > tail/3 {
		t.Fatalf("%d tail draws, %d past 1s, of 100000", tail, long)
	}
	if fixed := (latency{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}); fixed.draw(r) != 5*time.Millisecond || fixed.Bound() != 5*time.Millisecond {
		t.Fatal("a fixed latency varies")
	}
}

func TestSinceEpochIsSub(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 10_000 {
		l := localEpoch.Add(time.Duration(r.Int64N(int64(2000*time.Hour))) - 1000*time.Hour)
		if got, want := sinceEpoch(l), l.Sub(localEpoch); got != want {
			t.Fatalf("sinceEpoch(%v) = %v, want %v", l, got, want)
		}
	}
}
