package tenure

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/lockcore"
)

// The errors a program matches on (errors.As, errors.Is), named here so
// that it need not import election.
type (
	// FieldError is a configuration field that breaks a rule: New,
	// NewLocker and Validate return one, naming the field and the rule.
	FieldError = election.FieldError
	// DuplicateIDError says that another process writes the lease with
	// this candidate's ID (in Status().Err, and logged once a minute).
	DuplicateIDError = election.DuplicateIDError
	// TimeoutError is a store call abandoned after OpTimeout; it wraps the
	// store's last error before it, which often says why.
	TimeoutError = election.TimeoutError
	// RecordLostError says that the lease's record vanished or went back.
	RecordLostError = election.RecordLostError
)

// ErrTimeout is matched by every *TimeoutError.
var ErrTimeout = election.ErrTimeout

// TermEndedError is the cause (context.Cause) of a term's context that
// ended with its term: which term, and why. A term handed over to a
// candidate of higher priority (ReasonHandedOver) ends on purpose, and its
// work may wind down calmly; one lost (ReasonLost, ReasonStoreUnavailable)
// may already have another holder.
type TermEndedError struct {
	Lease  string
	Token  fencing.Token
	Reason DemotionReason
}

func (e *TermEndedError) Error() string {
	return fmt.Sprintf("tenure: term %d of lease %q ended: %s", e.Token, e.Lease, e.Reason)
}

// The errors of locks.

var (
	// ErrLocked is wrapped by TryLock's error when another holder has the
	// lock; errors.As finds the *LockedError that names it.
	ErrLocked = errors.New("tenure: locked")
	// ErrClosed is returned by a Locker's methods after Close.
	ErrClosed = engine.ErrClosed
)

// ErrSlotTaken is wrapped by the error of TryLock, Lock and Do with
// OncePer when the slot has been taken already, by this process or
// another; errors.As finds the *LockedError that names the holder.
var ErrSlotTaken = errors.New("tenure: slot taken")

// ErrSlotsMismatch is wrapped by the error of a call with Slots(n) on a
// name whose holders use another number of slots.
var ErrSlotsMismatch = lockcore.ErrSlotsMismatch

// ErrQueueFull is no longer returned: a fair Lock whose queue is full
// waits until a waiter leaves or is found abandoned (dropped a lease after
// it went silent), so that dead waiters never keep a lock from being
// taken. It stays for programs that test for it.
var ErrQueueFull = lockcore.ErrQueueFull

// LockedError says who holds a lock that TryLock could not take, or that
// Lock waited for until its context ended, as the store last showed it.
// The holder may already be dead: only waiting out its lease (Lock) tells.
type LockedError struct {
	Name string
	// Leader is the holder as last seen: its Holder, Token and Payload.
	Leader
	// Holders lists the holder of every slot of a semaphore (Slots), in
	// slot order, as last seen (Holder "": free, or not known); Leader is
	// then the first listed holder. Nil for a lock.
	Holders []SlotHolder
	// Err is the context's error when Lock gave up waiting (errors.Is
	// finds context.DeadlineExceeded through it), nil for TryLock.
	Err error
}

func (e *LockedError) Error() string {
	msg := fmt.Sprintf("tenure: lock %q is held by %q (token %d)", e.Name, e.Holder, e.Token)
	if e.Holders != nil {
		msg = fmt.Sprintf("tenure: lock %q: all %d slots are held:", e.Name, len(e.Holders))
		for _, h := range e.Holders {
			if h.Holder == "" {
				msg += fmt.Sprintf(" %d by nobody known;", h.Slot)
				continue
			}
			msg += fmt.Sprintf(" %d by %q (token %d);", h.Slot, h.Holder, h.Token)
		}
		msg = strings.TrimSuffix(msg, ";")
	}
	if e.Err != nil {
		msg += ": gave up waiting: " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Unwrap returns Err.
func (e *LockedError) Unwrap() error { return e.Err }

// SlotHolder is the holder of one slot of a semaphore, as last seen.
type SlotHolder struct {
	Slot int
	// Leader is the slot's holder as last seen: Holder "" when free, or
	// not known.
	Leader
}

// lockedError is the error of a call that found name held (shell.Locker's
// Locked).
func lockedError(name string, ld Leader, slots []Leader, keeps bool, err error) error {
	if slots != nil {
		return lockedBySlots(name, slots, err)
	}
	le := &LockedError{Name: name, Leader: ld, Err: err}
	if keeps {
		return slotTakenError{le}
	}
	return le
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

// slotTakenError is a once-per lock's LockedError.
type slotTakenError struct{ *LockedError }

func (e slotTakenError) Error() string {
	return fmt.Sprintf("tenure: slot %q was taken by %q (token %d)", e.Name, e.Holder, e.Token)
}

func (e slotTakenError) Is(target error) bool { return target == ErrSlotTaken || target == ErrLocked }
func (e slotTakenError) Unwrap() error        { return e.LockedError }
