package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/lease"
)

var (
	// ErrInjected is wrapped by every error Faults makes up for a call that
	// never reached the store.
	ErrInjected = errors.New("leasetest: injected fault")

	// ErrLostResponse is wrapped by the error Faults returns for a Put that
	// reached the store (and may have been applied) but whose answer was
	// dropped. It is distinct from ErrInjected: the caller cannot know
	// whether the write happened, which is the case worth testing apart.
	ErrLostResponse = errors.New("leasetest: response lost")
)

// Faults wraps a lease.Store and injects failures into the calls made through
// it, for tests of code that uses a Store. It is safe for concurrent use.
//
// Each call is handled in this order: it is counted; the hook, if set, runs
// and may fail it; FailAll fails it; a pending FailNext fails it; otherwise
// it reaches the store, and for a Put a pending LosePutResponses replaces the
// store's answer. A call failed at one step consumes nothing from the later
// ones.
type Faults struct {
	s lease.Store

	mu       sync.Mutex // guards the fields below
	failAll  bool
	failNext int // calls left to fail
	lose     int // Put responses left to drop
	gets     int // Get calls made
	puts     int // Put calls made
	hook     func(op, name string) error
}

var _ lease.Store = (*Faults)(nil)

// NewFaults returns a Faults that passes every call to s until told otherwise.
func NewFaults(s lease.Store) *Faults { return &Faults{s: s} }

// FailAll makes every Get and Put from now on return an error wrapping
// ErrInjected without reaching the store, as if it were partitioned away or
// dead, until Heal.
func (f *Faults) FailAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAll = true
}

// Heal undoes FailAll, FailNext and LosePutResponses. The hook stays.
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAll = false
	f.failNext = 0
	f.lose = 0
}

// LosePutResponses makes the next n Puts that reach the store return an error
// wrapping ErrLostResponse instead of the store's answer, whether the write
// applied, conflicted or failed. It replaces any count still pending; n <= 0
// cancels it.
func (f *Faults) LosePutResponses(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose = max(n, 0)
}

// FailNext makes the next n calls (Get or Put) return an error wrapping
// ErrInjected without reaching the store. It replaces any count still
// pending; n <= 0 cancels it.
func (f *Faults) FailNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = max(n, 0)
}

// Counts returns how many Gets and Puts callers have made through f,
// including those that failed.
func (f *Faults) Counts() (gets, puts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.puts
}

// SetHook sets a function called before each operation with op "get" or
// "put" and the lease name. A non-nil error fails the call without reaching
// the store; it is returned wrapped, naming the operation and lease. The hook
// runs without f's lock held, concurrently for concurrent calls, so it may
// block to hold a call in flight and may call f's methods (a FailAll from
// the hook applies to the call that ran it). A nil hook removes it.
func (f *Faults) SetHook(hook func(op string, name string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = hook
}

// Get implements lease.Store.
func (f *Faults) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := f.before("get", name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return f.s.Get(ctx, name)
}

// Put implements lease.Store.
func (f *Faults) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := f.before("put", name); err != nil {
		return lease.NoVersion, err
	}
	f.mu.Lock()
	lose := f.lose > 0
	if lose {
		// Claimed before the call so that concurrent Puts drop exactly n
		// answers between them.
		f.lose--
	}
	f.mu.Unlock()
	v, err := f.s.Put(ctx, name, rec, expect)
	if lose {
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, ErrLostResponse)
	}
	return v, err
}

// before counts a call and returns the error it is to fail with, if any.
func (f *Faults) before(op, name string) error {
	f.mu.Lock()
	if op == "get" {
		f.gets++
	} else {
		f.puts++
	}
	hook := f.hook
	f.mu.Unlock()

	if hook != nil {
		if err := hook(op, name); err != nil {
			return fmt.Errorf("%s lease %q: %w", op, name, err)
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.failAll:
	case f.failNext > 0:
		f.failNext--
	default:
		return nil
	}
	return fmt.Errorf("%s lease %q: %w", op, name, ErrInjected)
}
