package tenure

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// LockOption changes how one call of TryLock, Lock or Do takes its lock.
type LockOption func(*lockOptions)

type lockOptions struct {
	payload []byte
	ttl     time.Duration
	fair    bool
	every   time.Duration // OncePer
	slots   int           // Slots
	sem     bool          // Slots was given
}

// WithPayload stores b with the lock while it is held, for others to read
// (LockedError.Payload). At most lease.MaxPayloadLen bytes.
func WithPayload(b []byte) LockOption { return func(o *lockOptions) { o.payload = b } }

// WithLeaseDuration gives the lock a lease of its own. The timings the
// LockerConfig set stay (a lease they do not fit is refused, naming the
// field); those it left to their defaults derive from this lease.
func WithLeaseDuration(d time.Duration) LockOption { return func(o *lockOptions) { o.ttl = d } }

// Fair makes Lock wait in first-come order among fair waiters: see the
// docs/locks.md, "Fair waiting". TryLock ignores it.
func Fair() LockOption { return func(o *lockOptions) { o.fair = true } }

// Slots makes TryLock, Lock and Do take one of n slots of the name, a
// semaphore: at most n callers hold the name at once, each a slot
// (Lock.Slot) with that slot's fencing token. Every caller of the name
// must ask for the same n: the first fixes it in the record NAME::slots,
// and a caller asking for another is refused (ErrSlotsMismatch). A
// TryLock finding every slot held returns a *LockedError listing the
// holders (Holders). A Lock waits on every slot at once, so that a waiter
// reads n records a poll; with Fair, the name's queue orders the waiters
// across all slots. One Locker holds at most one slot of a name at a time:
// its calls for the same name wait in turn, as for a lock. n is 1 to
// MaxSlots; see docs/locks.md, "Semaphores".
func Slots(n int) LockOption { return func(o *lockOptions) { o.slots, o.sem = n, true } }

// MaxSlots is the most slots a semaphore may have.
const MaxSlots = lockcore.MaxSlots

// checkSlots refuses options that do not go with Slots, and a name too
// long for its semaphore's records.
func checkSlots(name string, o lockOptions, try bool) error {
	switch {
	case o.slots < 1 || o.slots > MaxSlots:
		return fmt.Errorf("tenure: lock %q: Slots(%d): a semaphore has 1 to %d slots", name, o.slots, MaxSlots)
	case o.every != 0:
		return fmt.Errorf("tenure: lock %q: OncePer and Slots do not go together", name)
	}
	longest := lockcore.LongestSemName(name, o.slots, o.fair && !try)
	if err := lease.ValidateName(longest); err != nil {
		return fmt.Errorf("tenure: lock %q: too long for a semaphore of %d slots, whose records are named up to %q: %w", name, o.slots, longest, err)
	}
	return nil
}

// OncePer makes the lock that of the current slot of a wall-clock
// schedule, so that a job runs at most once per slot however many
// replicas fire within it (each replica's cron, at its own moment):
//
//   - the slot is the interval of length every, aligned to the Unix epoch
//     (5m slots start at :00, :05...; 24h slots at 00:00 UTC), that holds
//     the Locker's wall clock at the call; the lock's name is the name
//     given, "/", and the slot's start (nightly/20261124T150500Z);
//   - TryLock, Lock and Do never wait: a slot taken already returns an
//     error wrapping ErrSlotTaken and ErrLocked at once;
//   - the lock is never given back: Unlock, the end of Do and Close only
//     stop renewing it, and its lease, max(every, the Locker's
//     LeaseDuration), keeps the slot taken until it ends. A holder that
//     crashes leaves its slot taken too: at most once, not at least once.
//
// every is a whole number of seconds, from 1s to 24h, and not combined
// with Fair. The replicas' wall clocks must agree within a slot, less the
// time from a slot's start to when the last replica fires: a replica whose
// clock is off by more may see the next or the previous slot, and run a
// slot twice or skip one. Records of past slots stay in the store until
// removed (tenure gc).
func OncePer(every time.Duration) LockOption { return func(o *lockOptions) { o.every = every } }

// slotLock returns the name of the lock of the slot that holds wall, and
// checks every.
func slotLock(name string, every time.Duration, wall time.Time) (string, error) {
	if every < time.Second || every > lease.MaxDuration || every%time.Second != 0 {
		return "", fmt.Errorf("tenure: OncePer(%v): want a whole number of seconds from 1s to 24h", every)
	}
	sec := int64(every / time.Second)
	start := time.Unix(wall.Unix()/sec*sec, 0).UTC()
	slot := name + "/" + start.Format("20060102T150405Z")
	if err := lease.ValidateName(slot); err != nil {
		return "", fmt.Errorf("tenure: lock %q: no room for the slot in the name: %w", name, err)
	}
	return slot, nil
}
