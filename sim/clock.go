package sim

import (
	"math"
	"math/bits"
	"time"
)

// localEpoch is local time zero: a node's readings are localEpoch plus its
// offset plus the elapsed time its clock measured.
var localEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ppbFrozen is the rate error of a clock that stands still.
const ppbFrozen = -1_000_000_000

// never is a true time no event reaches.
const never = time.Duration(math.MaxInt64)

// clock maps true time to one node's readings. Its monotonic reading runs
// at 1+ppb/1e9 times the rate of true time from the instant t0, when it read
// l0; a change of rate starts a new segment. The wall reading is the
// monotonic one plus wall, which steps when the wall clock is set.
//
// All arithmetic is on integers, so that the same seed gives the same
// readings on every platform. Readings are only ever taken at the current
// true time, which never goes back, so the current segment is all it keeps.
type clock struct {
	t0   time.Duration // true time the segment began
	l0   time.Duration // monotonic reading then, since localEpoch
	ppb  int64         // rate error in parts per billion; ppbFrozen stands still
	wall time.Duration // wall reading minus monotonic reading

	// The last local reading: an event reads its node's clock many times at
	// one true time, and a reading costs a 128-bit division and a
	// time.Time.Add.
	atT    time.Duration // true time of the reading
	atMono time.Duration // the monotonic reading then
	local  time.Time     // zero: none
}

// sinceEpoch returns local time l as a monotonic reading: l.Sub(localEpoch)
// for the readings a clock gives, which have no monotonic part of their own,
// without time.Sub's check for overflow (a run lasts hours, not centuries).
func sinceEpoch(l time.Time) time.Duration {
	return time.Duration(l.Unix()-localEpoch.Unix())*time.Second + time.Duration(l.Nanosecond()-localEpoch.Nanosecond())
}

// localAt returns the monotonic reading at true time t as a time.Time.
func (c *clock) localAt(t time.Duration) time.Time {
	if t != c.atT || c.local.IsZero() {
		m := c.mono(t)
		c.atT, c.atMono, c.local = t, m, localEpoch.Add(m)
	}
	return c.local
}

// mono returns the monotonic reading at true time t >= c.t0.
func (c *clock) mono(t time.Duration) time.Duration {
	if t == c.atT && !c.local.IsZero() {
		return c.atMono
	}
	dt := t - c.t0
	if c.ppb == 0 {
		return c.l0 + dt
	}
	return c.l0 + dt + time.Duration(mulDivFloor(int64(dt), c.ppb, 1e9))
}

// setRate starts a new segment at true time now.
func (c *clock) setRate(now time.Duration, ppb int64) {
	c.l0, c.t0, c.ppb = c.mono(now), now, ppb
	c.local = time.Time{}
}

// trueAt returns the earliest true time, not before now, at which the
// monotonic reading reaches l, or never if the clock stands still first.
func (c *clock) trueAt(now, l time.Duration) time.Duration {
	if c.mono(now) >= l {
		return now
	}
	if c.ppb == ppbFrozen {
		return never
	}
	// Solve dt + dt*ppb/1e9 >= l-l0, then step to the exact first nanosecond:
	// the floor in mono makes the estimate off by at most a few.
	dt, ok := mulDiv(int64(l-c.l0), 1e9, 1e9+c.ppb)
	if !ok || dt > int64(never-c.t0)-2 {
		return never // a clock this slow never gets there
	}
	t := c.t0 + time.Duration(dt)
	for c.mono(t) < l {
		t++
	}
	for t > now && c.mono(t-1) >= l {
		t--
	}
	return max(t, now)
}

// mulDivFloor returns ⌊a×b/c⌋ for a >= 0 and c > 0, exact where int64
// arithmetic would overflow after a few hours at 1e9 ppb. The quotient must
// fit in an int64.
func mulDivFloor(a, b, c int64) int64 {
	neg := b < 0
	if neg {
		b = -b
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if neg {
		if r != 0 {
			q++
		}
		return -int64(q)
	}
	return int64(q)
}

// mulDiv returns ⌊a×b/c⌋ for a, b >= 0 and c > 0, and false if it does not
// fit in an int64.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q), q <= math.MaxInt64
}
