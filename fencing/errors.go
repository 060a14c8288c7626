package fencing

import (
	"errors"
	"fmt"
)

// ErrStaleToken is matched (errors.Is) by every *StaleTokenError.
var ErrStaleToken = errors.New("fencing: stale token")

// ErrWrongLease is matched (errors.Is) by every *WrongLeaseError.
var ErrWrongLease = errors.New("fencing: wrong lease")

// StaleTokenError reports a token lower than one the resource already
// accepted: the writer's term is over and a newer leader has written.
type StaleTokenError struct {
	Lease     string
	Presented Token // the token the writer sent
	// Current is the highest token accepted so far, or 0 where the resource
	// refused the write without saying which token it holds.
	Current Token
}

func (e *StaleTokenError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("fencing: lease %q: token %d is stale, a higher token was already accepted", e.Lease, e.Presented)
	}
	return fmt.Sprintf("fencing: lease %q: token %d is stale, token %d was already accepted", e.Lease, e.Presented, e.Current)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// WrongLeaseError reports a write whose fence names another lease than the
// one the resource is fenced by. Tokens of different leases are unrelated, so
// the resource cannot order the write and refuses it. It means a
// misconfiguration (two leases writing one resource, or a renamed lease), not
// a stale leader.
type WrongLeaseError struct {
	Presented Fence
	Current   Fence // the fence stored with the resource
}

func (e *WrongLeaseError) Error() string {
	return fmt.Sprintf("fencing: write under lease %q (token %d) refused: the resource is fenced by lease %q (token %d)",
		e.Presented.Lease, e.Presented.Token, e.Current.Lease, e.Current.Token)
}

// Is makes errors.Is(err, ErrWrongLease) true.
func (e *WrongLeaseError) Is(target error) bool { return target == ErrWrongLease }

// Check reports whether a resource that stores current may accept a write
// under presented, for resources that keep one fence each (an item, an object,
// a row): nil if current is the zero Fence (nothing fenced yet) or names the
// same lease with a token no higher than presented's; a *WrongLeaseError if
// it names another lease; a *StaleTokenError otherwise. The remote helpers use
// it to explain a refusal the store made, and a resource of your own may use
// it the same way, as long as it evaluates the same rule atomically with the
// write.
func Check(current, presented Fence) error {
	switch {
	case current == Fence{}:
		return nil
	case current.Lease != presented.Lease:
		return &WrongLeaseError{Presented: presented, Current: current}
	case current.Token > presented.Token:
		return &StaleTokenError{Lease: presented.Lease, Presented: presented.Token, Current: current.Token}
	}
	return nil
}
