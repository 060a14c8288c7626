package tenure

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// ErrSlotTaken is wrapped by the error of TryLock, Lock and Do with
// OncePer when the slot has been taken already, by this process or
// another; errors.As finds the *LockedError that names the holder.
var ErrSlotTaken = errors.New("tenure: slot taken")

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

// slotTiming is a once-per lock's: its lease covers a whole slot, while
// store calls are bounded and retried as the Locker's.
func (l *Locker) slotTiming(every time.Duration) election.Timing {
	c := l.cfg
	return election.Timing{LeaseDuration: max(every, c.LeaseDuration), OpTimeout: c.OpTimeout,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax, MaxDrift: c.MaxDrift}.WithDefaults()
}

// slotTakenError is a once-per lock's LockedError.
type slotTakenError struct{ *LockedError }

func (e slotTakenError) Error() string {
	return fmt.Sprintf("tenure: slot %q was taken by %q (token %d)", e.Name, e.Holder, e.Token)
}

func (e slotTakenError) Is(target error) bool { return target == ErrSlotTaken || target == ErrLocked }
func (e slotTakenError) Unwrap() error        { return e.LockedError }
