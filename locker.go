package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"

	"github.com/tenure-go/tenure/internal/seam"
)

var (
	// ErrLocked is wrapped by TryLock's error when another holder has the
	// lock; errors.As finds the *LockedError that names it.
	ErrLocked = errors.New("tenure: locked")
	// ErrClosed is returned by a Locker's methods after Close.
	ErrClosed = engine.ErrClosed
)

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
	if err := checkWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise"); err != nil {
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
	h      *host.Host

	wakeConn seam.WakeConn // the wake-up listener; nil without WakeAddr
	wakeAddr string        // the address published for it
	wakes    *sender
	sent     chan struct{} // closed once wakes has sent what was queued at Close

	closeOnce sync.Once
	flood     engine.FloodGuard // repeated warnings counted, not repeated

	ms       *metrics
	reg      metric.Registration
	held     atomic.Int64 // locks granted and not yet ended
	answered lastAnswer

	// Owned by the loop goroutine.
	lk      *engine.Locker                 // the locks, one entry per call
	drained chan struct{}                  // closed when closing and no entry is left
	unlocks map[*engine.Entry][]chan error // Unlock calls waiting for a release
}

// NewLocker returns a Locker for cfg and starts its loop; Close stops it.
func NewLocker(cfg LockerConfig) (*Locker, error) {
	given := cfg.Timing
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	l := &Locker{cfg: cfg, given: given, unlocks: map[*engine.Entry][]chan error{}}
	shared, err := l.machineConfig(lockOptions{})
	if err != nil {
		return nil, err
	}
	l.shared = &shared
	var meter metric.Meter
	if l.ms, meter, err = newMetrics(cfg.MeterProvider, attribute.String("lease", "locker")); err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	held, err := meter.Int64ObservableGauge("tenure.locks.held", metric.WithDescription("Locks a Locker holds."), metric.WithUnit("{lock}"))
	if err == nil {
		l.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(held, l.held.Load(), metric.WithAttributes(attribute.String("locker", l.cfg.ID)))
			return nil
		}, held)
	}
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	l.h = host.New(host.Config{
		Clock: cfg.Clock, Store: cfg.Store, MaxCalls: maxCalls,
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			l.ms.storeCall(opName(kind), err, took)
			l.answered.note(cfg.Clock, err)
		},
		After: func() {
			if l.lk.Closing() && l.lk.Live() == 0 {
				l.h.Exit()
			}
		},
	})
	if cfg.WakeAddr != "" {
		if l.wakeConn, l.wakeAddr, err = wakeNet(cfg.Store).Listen(cfg.WakeAddr, cfg.WakeAdvertise); err != nil {
			_ = l.reg.Unregister()
			return nil, err
		}
		l.wakes, l.sent = newSender(l.wakeConn, 64, l.log), make(chan struct{})
		l.h.Go(l.listen)
		l.h.Go(func() { l.wakes.run(l.h.Quit()); close(l.sent) })
		l.log(slog.LevelInfo, "listening for wake-ups", "addr", l.wakeConn.Addr(), "advertised", l.wakeAddr)
	}
	l.lk = engine.NewLocker(l.h.Core, (*lockerFx)(l), cfg.ID, l.wakeAddr)
	if t, ok := cfg.Store.(engine.Tapped); ok {
		l.lk.Tap(t.TapLocker())
	}
	l.h.Go(func() { l.h.Run(nil, nil) })
	return l, nil
}

// WakeAddr returns the address this Locker publishes for wake-ups, or ""
// without WakeAddr.
func (l *Locker) WakeAddr() string { return l.wakeAddr }

// listen passes wake-ups to the waiting locks they name until the listener
// is closed. Anything else that arrives is dropped.
func (l *Locker) listen() {
	prefix := wakeMsg("")
	buf := make([]byte, len(prefix)+lease.MaxNameLen+1)
	for {
		n, err := l.wakeConn.Recv(buf)
		if err != nil {
			return // closed
		}
		name, ok := strings.CutPrefix(string(buf[:n]), prefix)
		if !ok {
			continue
		}
		if !l.do(func() { l.woken(name) }) {
			return // closed
		}
	}
}

// woken takes a wake-up for the lock name: the lock of this Locker that
// waits for it, if any, reads it now (rate-limited).
func (l *Locker) woken(name string) {
	if l.lk.Woken(name) {
		l.log(slog.LevelDebug, "woken: reading the lock", "lock", name)
	}
}

// feed listens to the store's change feed for the lock name while a Lock
// call waits for it, when the store has one (lease.Watcher): each write of
// the lock is taken as a renewal notice, and an unlock as a wake-up
// (engine.Locker.Noticed), so that the waiter reads a round trip after
// each renewal and after the unlock,
// without a wake-up address. It returns the function that stops it.
func (l *Locker) feed(name string) (stop func()) {
	w, ok := l.cfg.Store.(lease.Watcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.h.Go(func() {
		// Every event, the first ("listening") too: the wait's first read
		// may have come before the feed listened, and missed an unlock.
		err := w.Watch(ctx, name, func(ev lease.Event) {
			if !l.do(func() { l.lk.Noticed(name, ev) }) {
				cancel() // closed
			}
		})
		if ctx.Err() == nil {
			l.log(slog.LevelWarn, "no change feed from the store: waiting by polls", "lock", name, "err", err)
		}
	})
	return cancel
}

// ID returns the identity this Locker writes into the locks it holds.
func (l *Locker) ID() string { return l.cfg.ID }

// Lock is a held lock.
type Lock struct {
	ctx engine.TermContext // its fence names the lock and holds its token
	e   *engine.Entry
	l   *Locker
}

// Name returns the lock's name (as asked for, without a slot).
func (h *Lock) Name() string { return h.e.Name() }

// Token returns the lock's fencing token: above every earlier holder's
// (of the same slot, with Slots).
func (h *Lock) Token() fencing.Token { return h.ctx.Fence().Token }

// Slot returns which slot of its semaphore the lock holds (Slots), from 0
// to n-1; 0 for a lock without Slots.
func (h *Lock) Slot() int { return max(h.e.SlotHeld(), 0) }

// Context returns a context cancelled at the lock's local deadline (unless
// renewed), when the lock is lost, on Unlock and on Close. It carries the
// lock's fencing.Fence.
func (h *Lock) Context() context.Context { return &h.ctx }

// Deadline returns the local instant at which the lock's term ends unless
// renewed, as of its latest confirmed renewal; its context is done from
// then on. A program that needs time to wind down starts before it.
func (h *Lock) Deadline() time.Time { return h.ctx.Current() }

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
func (h *Lock) Unlock(ctx context.Context) error {
	done := make(chan error, 1)
	if !h.l.do(func() { h.l.unlock(h.e, done) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close releases every held lock (each within ReleaseTimeout), makes
// waiting Lock calls return ErrClosed, stops the loop and waits for every
// goroutine the Locker started.
func (l *Locker) Close() error {
	l.closeOnce.Do(func() {
		ok := l.do(func() {
			l.drained = make(chan struct{})
			l.lk.Close()
			l.checkDrained()
		})
		if ok {
			<-l.h.Quit()
		}
		if l.wakeConn != nil {
			<-l.sent // the wake-ups of the last releases go out first
			_ = l.wakeConn.Close()
		}
		l.h.Wait()
		_ = l.reg.Unregister()
	})
	return nil
}

// LastAnswer returns the local time the store last answered one of this
// Locker's calls (a record, a conflict, no record); zero before the first.
func (l *Locker) LastAnswer() time.Time { return l.answered.get() }

// do runs f on the loop goroutine; false if the Locker is closed.
func (l *Locker) do(f func()) bool { return l.h.Do(f) }

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
		slot, err := slotLock(name, o.every, l.cfg.Clock.Now())
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
	result := make(chan takeResult, 1)
	e := l.lk.NewEntry(engine.Call{Name: name, Config: ec, Try: try, Fair: o.fair, Keep: o.every != 0, Slots: o.slots}, &lockCall{result: result})
	if !l.do(func() { l.lk.Add(e) }) {
		return nil, ErrClosed
	}
	if !try && !o.sem {
		defer l.feed(name)()
	}
	select {
	case r := <-result:
		return r.lock, r.err
	case <-ctx.Done():
		// Give up: whatever the store holds of ours is released. The
		// error says who held the lock meanwhile, as last seen.
		var gaveUp error
		ran := make(chan struct{}) // Do returns once the loop has f, not once f ran
		if l.do(func() { gaveUp = l.waitedFor(e, ctx.Err()); l.lk.Fail(e, gaveUp); l.stop(e); close(ran) }) {
			<-ran
		}
		r := <-result
		if r.lock != nil { // taken just now: give it back
			_ = r.lock.Unlock(context.WithoutCancel(ctx))
		}
		if gaveUp == nil {
			gaveUp = ctx.Err() // the Locker closed meanwhile
		}
		return nil, gaveUp
	}
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
	ec := c.machine(t, o.payload, staleReads(c.Store, c.StrongPolls))
	if err := ec.Validate(); err != nil {
		return ec, fieldError(err)
	}
	return ec, nil
}

// maxCalls bounds a Locker's store calls in flight. Beyond it calls wait
// in order: a slow store then slows the Locker down instead of piling up
// goroutines, and the goroutines the runtime keeps for reuse stay few.
const maxCalls = 256

func (l *Locker) checkDrained() {
	if l.lk.Closing() && l.lk.Live() == 0 && l.drained != nil {
		select {
		case <-l.drained:
		default:
			close(l.drained)
		}
	}
}

func (l *Locker) log(level slog.Level, msg string, args ...any) {
	if lg := l.cfg.Logger; lg != nil {
		l.flood.Log(lg, l.cfg.Clock.Now(), level, msg, append([]any{"id", l.cfg.ID}, args...)...)
	}
}

// Fair makes Lock wait in first-come order among fair waiters: see the
// docs/locks.md, "Fair waiting". TryLock ignores it.
func Fair() LockOption { return func(o *lockOptions) { o.fair = true } }

// ErrQueueFull is no longer returned: a fair Lock whose queue is full
// waits until a waiter leaves or is found abandoned (dropped a lease after
// it went silent), so that dead waiters never keep a lock from being
// taken. It stays for programs that test for it.
var ErrQueueFull = lockcore.ErrQueueFull
