package tenure

import (
	"fmt"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

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

// ErrSlotsMismatch is wrapped by the error of a call with Slots(n) on a
// name whose holders use another number of slots.
var ErrSlotsMismatch = lockcore.ErrSlotsMismatch

// SlotHolder is the holder of one slot of a semaphore, as last seen.
type SlotHolder struct {
	Slot int
	// Leader is the slot's holder as last seen: Holder "" when free, or
	// not known.
	Leader
}

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

// slotHolders lists a semaphore's holders.
func slotHolders(ls []election.Leader) []SlotHolder {
	hs := make([]SlotHolder, len(ls))
	for i, ld := range ls {
		hs[i] = SlotHolder{Slot: i, Leader: ld}
	}
	return hs
}

// lockedBySlots is the LockedError of a semaphore whose slots are held by
// ls.
func lockedBySlots(name string, ls []election.Leader, err error) *LockedError {
	le := &LockedError{Name: name, Holders: slotHolders(ls), Err: err}
	for _, h := range le.Holders {
		if h.Holder != "" {
			le.Holder, le.Token, le.Payload = h.Holder, h.Token, h.Payload
			break
		}
	}
	return le
}
