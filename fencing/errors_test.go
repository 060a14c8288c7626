package fencing_test

import (
	"errors"
	"testing"

	"github.com/tenure-go/tenure/fencing"
)

func TestCheck(t *testing.T) {
	p := fencing.Fence{Lease: "a", Token: 5}
	for _, cur := range []fencing.Fence{{}, {Lease: "a", Token: 1}, {Lease: "a", Token: 5}} {
		if err := fencing.Check(cur, p); err != nil {
			t.Errorf("Check(%v, %v) = %v, want nil", cur, p, err)
		}
	}

	err := fencing.Check(fencing.Fence{Lease: "a", Token: 6}, p)
	var se *fencing.StaleTokenError
	if !errors.As(err, &se) || *se != (fencing.StaleTokenError{Lease: "a", Presented: 5, Current: 6}) {
		t.Errorf("Check(a 6, a 5) = %v, want StaleTokenError{a, 5, 6}", err)
	}
	if errors.Is(err, fencing.ErrWrongLease) {
		t.Errorf("a stale token matches ErrWrongLease")
	}

	other := fencing.Fence{Lease: "b", Token: 1}
	err = fencing.Check(other, p)
	var we *fencing.WrongLeaseError
	if !errors.As(err, &we) || we.Presented != p || we.Current != other || !errors.Is(err, fencing.ErrWrongLease) {
		t.Fatalf("Check(b 1, a 5) = %v, want a WrongLeaseError", err)
	}
	if errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("a wrong lease matches ErrStaleToken")
	}
	if got, want := err.Error(), `fencing: write under lease "a" (token 5) refused: the resource is fenced by lease "b" (token 1)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// A resource that refuses without saying what it holds still gets an error
// that reads well.
func TestStaleTokenErrorUnknownCurrent(t *testing.T) {
	err := &fencing.StaleTokenError{Lease: "a", Presented: 3}
	if got, want := err.Error(), `fencing: lease "a": token 3 is stale, a higher token was already accepted`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
