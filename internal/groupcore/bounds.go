package groupcore

import (
	"math"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/plan"
)

// Bounds are what a group of k shards and n members promises at a timing,
// with store round trips up to RoundTrip, its callbacks returning at once.
// docs/groups.md derives them; the simulator checks them; tenure plan
// prints them.
type Bounds struct {
	Timing    election.Timing
	RoundTrip time.Duration

	// Suspect: after a member stops, each other member suspects it within
	// this: the first of its reads that no longer sees the member's entry
	// move (a beat and a round trip), and two more, a beat apart.
	Suspect time.Duration
	// CrashTakeover: after a member stops (a crash, or cut off from the
	// store), each of its shards is held again within this: suspected,
	// then the shard's record read, waited out for ttl·(1+ρ) on a clock ρ
	// slow, read once more at the next poll, and taken.
	CrashTakeover time.Duration
	// WatchedCrashTakeover: the same with Watch: the lock's failover bound
	// after a crash (plan.Plan.CrashFailover), the shard's next owner
	// having been waiting on it all along.
	WatchedCrashTakeover time.Duration
	// WokenHandover: a shard given up on a join or a leave is held by its
	// next owner within this of its release, when the wake-up arrives: for
	// a leave, the next owner reads the membership first.
	WokenHandover time.Duration
	// PolledHandover: the same without a wake-up (none listens, or it was
	// lost): found at the next owner's next poll, or, on a leave, its next
	// beat and then its read.
	PolledHandover time.Duration
	// Balance: once no member has joined, left or stopped for this long,
	// each holds its share, ⌊k·w/W⌋ or one more: every member's next beat
	// sees the last change, a joiner is seen to beat by the one after (a
	// held shard goes only to a member seen to beat), and each shard that
	// moves does so within PolledHandover. After a crash, count from CrashTakeover's end, and
	// the membership's ttl·(1+ρ) besides, after which the dead member's
	// entry no longer counts.
	Balance time.Duration

	// Requests per hour, for the whole group: the renewals of the k
	// shards, and the membership's beats (a read and a write per member
	// per beat; conflicts aside), which do not grow with k.
	RenewalsPerHour, MemberReadsPerHour, MemberWritesPerHour float64
	// WatchReadsPerHour: with Watch, each shard is read by the member it
	// would fall to, once a PollInterval on average.
	WatchReadsPerHour float64
}

// NewBounds returns the bounds of a group of k shards and n members at
// timing t (defaults filled in).
func NewBounds(t election.Timing, k, n int, rtt time.Duration) Bounds {
	t = t.WithDefaults()
	slow := func(d time.Duration) time.Duration { return time.Duration(math.Ceil(float64(d) / (1 - t.MaxDrift))) }
	beat := slow(t.RenewInterval) + rtt // a beat, as others see it: its interval, then its write
	wait := time.Duration(float64(t.LeaseDuration) * (1 + t.MaxDrift))
	poll := slow(election.MaxPoll(t.PollInterval))
	b := Bounds{Timing: t, RoundTrip: rtt}
	b.Suspect = 3*beat + rtt
	b.CrashTakeover = b.Suspect + rtt + slow(wait) + poll + 2*rtt
	if p, err := plan.New(t, 2, rtt); err == nil {
		b.WatchedCrashTakeover = p.CrashFailover
	}
	b.WokenHandover = 5 * rtt
	b.PolledHandover = beat + poll + 2*rtt
	b.Balance = 2*beat + b.PolledHandover
	perHour := float64(time.Hour) / float64(t.RenewInterval)
	b.RenewalsPerHour = float64(k) * perHour
	b.MemberWritesPerHour = float64(n) * perHour
	if n > 1 {
		b.MemberReadsPerHour = float64(n) * perHour
		b.WatchReadsPerHour = float64(k) * float64(time.Hour) / float64(t.PollInterval)
	}
	return b
}
