package sim

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

// latency is a distribution of one-way delays between a node and the store:
// most draws fall uniformly within [Min, Max], and one in TailOneIn falls in
// a long tail up to TailMax whose density falls off like 1/x (every doubling
// of the delay is as likely as the previous one), the shape that request
// latencies of real services show. Draws use integers only, so they are the
// same on every platform.
type latency struct {
	Min, Max  time.Duration
	TailOneIn int           // 0: no tail
	TailMax   time.Duration // the tail lies within [Max, TailMax]
}

// Bound returns the longest delay the distribution can draw.
func (l latency) Bound() time.Duration {
	if l.TailOneIn > 0 && l.TailMax > l.Max {
		return l.TailMax
	}
	return l.Max
}

func (l latency) draw(r *rand.Rand) time.Duration {
	if l.TailOneIn > 0 && l.TailMax > l.Max && r.IntN(l.TailOneIn) == 0 {
		return l.tail(r)
	}
	return uniform(r, l.Min, l.Max)
}

// tail picks one of the doublings between Max and TailMax, then a delay
// within it.
func (l latency) tail(r *rand.Rand) time.Duration {
	lo := max(l.Max, time.Microsecond)
	n := bits.Len64(uint64(l.TailMax / lo)) // doublings that fit, at least 1
	lo <<= r.IntN(n)
	return uniform(r, lo, min(2*lo, l.TailMax))
}

// uniform draws from [lo, hi].
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// chance reports true with probability ppm parts per million.
func chance(r *rand.Rand, ppm int) bool {
	return ppm > 0 && (ppm >= 1_000_000 || r.IntN(1_000_000) < ppm)
}
