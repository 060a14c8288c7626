package tenure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/lease"
)

// LockerConfig configures a Locker. Store is required; every other field
// has a default, which NewLocker fills in on its own copy. A lock may ask
// for its own lease (WithLeaseDuration).
type LockerConfig struct {
	// Store keeps the locks.
	Store lease.Store
	// Timing is every lock's, as a Candidate's, with a waiting Lock for a
	// follower: it reads the lock every PollInterval. ColdPollInterval
	// must be zero (it is a Candidate's standby's).
	Timing
	// Runtime is the process's: ID (in the records of the locks it
	// holds), Clock, Logger, wake-ups (see Runtime.WakeAddr), ... The
	// metrics are the store calls under lease="locker", and
	// tenure.locks.held.
	Runtime
	// StrongPolls makes a waiting Lock poll with strongly consistent reads
	// where the store offers cheaper ones, as Config.StrongPolls does.
	StrongPolls bool
}

// Validate checks every field, with the defaults filled in where a field
// is zero, as NewLocker does, and changes nothing.
func (c LockerConfig) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults filled in, checked.
func (c LockerConfig) resolved() (LockerConfig, error) {
	if c.Store == nil {
		return c, fieldError(&election.FieldError{Field: "Store", Reason: "is nil"})
	}
	if err := shell.CheckWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise"); err != nil {
		return c, fieldError(err)
	}
	if err := noColdPolls(c.Timing, "a Locker"); err != nil {
		return c, err
	}
	c.Timing = c.Timing.WithDefaults()
	c.Runtime = c.Runtime.withDefaults()
	if err := c.Timing.Validate(); err != nil {
		return c, fieldError(err)
	}
	return c, nil
}

// Locker takes and holds locks on leases, many at once, under the rules of
// leadership (see the package doc): a lock is a lease taken for a piece of
// work and given back. One goroutine renews every held lock; a store call
// in flight has a goroutine of its own while it lasts. A lock name follows
// lease.ValidateName; locks and Candidates may share one store.
//
// A held lock's context is cancelled at its local deadline, when it is
// lost, on Unlock and on Close; its token is above every earlier holder's.
type Locker struct {
	cfg    LockerConfig
	given  election.Timing  // the timings the caller set, zero where left to their default
	shared *election.Config // the Machines' configuration, for locks without options
	sh     *shell.Locker
}

// NewLocker returns a Locker for cfg and starts its loop; Close stops it.
func NewLocker(cfg LockerConfig) (*Locker, error) {
	given := cfg.Timing
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	l := &Locker{cfg: cfg, given: given}
	shared, err := l.machineConfig(lockOptions{})
	if err != nil {
		return nil, err
	}
	l.shared = &shared
	ms, meter, err := shell.NewMetrics(cfg.MeterProvider, attribute.String("lease", "locker"))
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	l.sh, err = shell.NewLocker(shell.LockerConfig{
		Store: cfg.Store, Clock: cfg.Clock, ID: cfg.ID, Logger: cfg.Logger,
		WakeAddr: cfg.WakeAddr, WakeAdvertise: cfg.WakeAdvertise, Metrics: ms, Meter: meter,
		Locked: lockedError,
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// WakeAddr returns the address this Locker publishes for wake-ups, or ""
// without WakeAddr.
func (l *Locker) WakeAddr() string { return l.sh.WakeAddr() }

// ID returns the identity this Locker writes into the locks it holds.
func (l *Locker) ID() string { return l.cfg.ID }

// Lock is a held lock.
type Lock struct{ h *shell.Lock }

// Name returns the lock's name (as asked for, without a slot).
func (h *Lock) Name() string { return h.h.E.Name() }

// Token returns the lock's fencing token: above every earlier holder's
// (of the same slot, with Slots).
func (h *Lock) Token() fencing.Token { return h.h.Ctx.Fence().Token }

// Slot returns which slot of its semaphore the lock holds (Slots), from 0
// to n-1; 0 for a lock without Slots.
func (h *Lock) Slot() int { return max(h.h.E.SlotHeld(), 0) }

// Context returns a context cancelled at the lock's local deadline (unless
// renewed), when the lock is lost, on Unlock and on Close. It carries the
// lock's fencing.Fence.
func (h *Lock) Context() context.Context { return &h.h.Ctx }

// Deadline returns the local instant at which the lock's term ends unless
// renewed, as of its latest confirmed renewal; its context is done from
// then on. A program that needs time to wind down starts before it.
func (h *Lock) Deadline() time.Time { return h.h.Ctx.Current() }

// TryLock takes the lock if nobody holds it, and otherwise returns at once
// an error wrapping ErrLocked (a *LockedError naming the holder). It waits
// only for the store's answers, bounded by ctx.
func (l *Locker) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return l.take(ctx, name, true, opts)
}

// Lock takes the lock, waiting for it as long as ctx allows: a deadline on
// ctx waits that long, none waits forever. A holder gone silent is waited
// out for its lease × (1+MaxDrift) on this Locker's clock. It returns ctx's
// error when ctx is done first.
func (l *Locker) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return l.take(ctx, name, false, opts)
}

// Do takes the lock (as Lock), runs fn with the lock's context and token,
// and unlocks, whatever fn returns. It returns fn's error, or the error of
// taking or releasing the lock.
func (l *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context, token fencing.Token) error, opts ...LockOption) error {
	h, err := l.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	ferr := fn(h.Context(), h.Token())
	uerr := h.Unlock(context.WithoutCancel(ctx))
	return errors.Join(ferr, uerr)
}

// Unlock gives the lock back, with its token kept: only if the store still
// holds this holder's write (it never releases someone else's). It returns
// once the release is confirmed, or ctx is done; the release goes on in the
// background for at most ReleaseTimeout. An unconfirmed release wraps
// ErrReleaseUnconfirmed: the lock then expires on its own.
func (h *Lock) Unlock(ctx context.Context) error { return h.h.Unlock(ctx) }

// Close releases every held lock (each within ReleaseTimeout), makes
// waiting Lock calls return ErrClosed, stops the loop and waits for every
// goroutine the Locker started.
func (l *Locker) Close() error {
	l.sh.Close()
	return nil
}

// LastAnswer returns the local time the store last answered one of this
// Locker's calls (a record, a conflict, no record); zero before the first.
func (l *Locker) LastAnswer() time.Time { return l.sh.LastAnswer() }

func (l *Locker) take(ctx context.Context, name string, try bool, opts []LockOption) (*Lock, error) {
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("tenure: lock: %w", err)
	}
	var o lockOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.sem {
		if err := checkSlots(name, o, try); err != nil {
			return nil, err
		}
	} else if o.fair && !try {
		if err := lease.ValidateName(lockcore.LongestName(name)); err != nil {
			return nil, fmt.Errorf("tenure: lock %q: too long for a fair lock, whose queue's records are named up to %q: %w", name, lockcore.LongestName(name), err)
		}
	}
	if o.every != 0 {
		if o.fair {
			return nil, fmt.Errorf("tenure: lock %q: OncePer and Fair do not go together: a slot is never waited for", name)
		}
		// The slot is the wall clock's: a clock with a Wall method keeps
		// its monotonic Now apart from it (tenure.Clock).
		now := l.cfg.Clock.Now()
		if wall := wallOf(l.cfg.Clock); wall != nil {
			now = wall()
		}
		slot, err := slotLock(name, o.every, now)
		if err != nil {
			return nil, err
		}
		name, try = slot, true
	}
	ec := l.shared // most locks share the Locker's
	if o.payload != nil || o.ttl != 0 || o.every != 0 {
		c, err := l.machineConfig(o)
		if err != nil {
			return nil, err
		}
		ec = &c
	}
	h, err := l.sh.Take(ctx, engine.Call{Name: name, Config: ec, Try: try, Fair: o.fair, Keep: o.every != 0, Slots: o.slots})
	if err != nil {
		return nil, err
	}
	return &Lock{h}, nil
}

func (l *Locker) machineConfig(o lockOptions) (election.Config, error) {
	c := l.cfg
	t := c.Timing
	switch {
	case o.every != 0:
		t = l.slotTiming(o.every)
	case o.ttl != 0:
		// The lock's own lease; the timings the Locker was given stay, and
		// those it left to their defaults derive from this lease instead.
		t = l.given
		t.LeaseDuration, t.MaxDrift = o.ttl, c.MaxDrift
		t = t.WithDefaults()
	}
	// Every lock draws from Runtime.Rand, on the loop goroutine only.
	ec := c.machine(t, o.payload, c.Store, c.StrongPolls)
	if err := ec.Validate(); err != nil {
		return ec, fieldError(err)
	}
	return ec, nil
}

// slotTiming is a once-per lock's: its lease covers a whole slot, while
// store calls are bounded and retried as the Locker's.
func (l *Locker) slotTiming(every time.Duration) election.Timing {
	c := l.cfg
	return election.Timing{LeaseDuration: max(every, c.LeaseDuration), OpTimeout: c.OpTimeout,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax, MaxDrift: c.MaxDrift}.WithDefaults()
}
