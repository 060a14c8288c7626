package shell

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
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

// LockerConfig is what a Locker's shell needs: tenure.LockerConfig,
// resolved.
type LockerConfig struct {
	Store  lease.Store
	Clock  host.Clock
	ID     string
	Logger *slog.Logger // nil: none
	// WakeAddr and WakeAdvertise are Runtime's: where to listen for
	// wake-ups ("": no listener).
	WakeAddr, WakeAdvertise string
	Metrics                 *Metrics
	Meter                   metric.Meter // Metrics', for tenure.locks.held
	// Locked makes the error of a call that found name held: by ld, or
	// (a semaphore's) the slots' holders; keeps says it is a once-per
	// slot's lock. err is the context's error of a Lock that gave up
	// waiting, nil for TryLock. It is a *tenure.LockedError.
	Locked func(name string, ld election.Leader, slots []election.Leader, keeps bool, err error) error
}

// maxCalls bounds a Locker's store calls in flight. Beyond it calls wait
// in order: a slow store then slows the Locker down instead of piling up
// goroutines, and the goroutines the runtime keeps for reuse stay few.
const maxCalls = 256

// Locker runs a tenure.Locker: a host (internal/host) with the locks'
// entries (engine.Locker) on a goroutine of its own, the callers waiting
// on channels, the held locks' contexts, the wake-up listener and its
// sender, the store's change feed for a waiting Lock, and the metrics. It
// is the entries' engine.LockerEffects.
type Locker struct {
	cfg LockerConfig
	h   *host.Host

	wakeConn seam.WakeConn // the wake-up listener; nil without WakeAddr
	wakeAddr string        // the address published for it
	wakes    *Sender
	sent     chan struct{} // closed once wakes has sent what was queued at Close

	closeOnce sync.Once
	flood     engine.FloodGuard // repeated warnings counted, not repeated

	reg      metric.Registration
	held     atomic.Int64 // locks granted and not yet ended
	answered LastAnswer

	// Owned by the loop goroutine.
	lk      *engine.Locker                 // the locks, one entry per call
	drained chan struct{}                  // closed when closing and no entry is left
	unlocks map[*engine.Entry][]chan error // Unlock calls waiting for a release
}

// NewLocker returns a Locker for cfg and starts its loop; Close stops it.
func NewLocker(cfg LockerConfig) (*Locker, error) {
	l := &Locker{cfg: cfg, unlocks: map[*engine.Entry][]chan error{}}
	held, err := cfg.Meter.Int64ObservableGauge("tenure.locks.held", metric.WithDescription("Locks a Locker holds."), metric.WithUnit("{lock}"))
	if err == nil {
		l.reg, err = cfg.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(held, l.held.Load(), metric.WithAttributes(attribute.String("locker", cfg.ID)))
			return nil
		}, held)
	}
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	l.h = host.New(host.Config{
		Clock: cfg.Clock, Store: cfg.Store, MaxCalls: maxCalls,
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			cfg.Metrics.StoreCall(kind, err, took)
			l.answered.Note(cfg.Clock, err)
		},
		After: func() {
			if l.lk.Closing() && l.lk.Live() == 0 {
				l.h.Exit()
			}
		},
	})
	if cfg.WakeAddr != "" {
		if l.wakeConn, l.wakeAddr, err = WakeNet(cfg.Store).Listen(cfg.WakeAddr, cfg.WakeAdvertise); err != nil {
			_ = l.reg.Unregister()
			return nil, err
		}
		l.wakes, l.sent = NewSender(l.wakeConn, 64, l.log), make(chan struct{})
		l.h.Go(l.listen)
		l.h.Go(func() { l.wakes.Run(l.h.Quit()); close(l.sent) })
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

// LastAnswer returns when the store last answered one of the Locker's
// calls.
func (l *Locker) LastAnswer() time.Time { return l.answered.Get() }

// Held returns how many locks the Locker holds.
func (l *Locker) Held() int64 { return l.held.Load() }

// Open reports whether the Locker's loop runs: not closed.
func (l *Locker) Open() bool {
	select {
	case <-l.h.Quit():
		return false
	default:
		return true
	}
}

// Lock is a held lock: its term's context, and its entry.
type Lock struct {
	Ctx engine.TermContext // its fence names the lock and holds its token
	E   *engine.Entry
	l   *Locker
}

// lockCall is what a Locker keeps of one TryLock or Lock call beside its
// engine.Entry (Entry.Owner): the caller's answer, and the lock held.
// Every field is the loop's.
type lockCall struct {
	result  chan takeResult // size 1: what TryLock or Lock returns; nil once sent
	held    *Lock
	counted bool // in Locker.held
}

type takeResult struct {
	lock *Lock
	err  error
}

func callOf(e *engine.Entry) *lockCall { return e.Owner.(*lockCall) }

// Take takes the lock call asks for (TryLock with call.Try, else Lock),
// waiting for it as long as ctx allows, and listens to the store's change
// feed while it waits for a lock.
func (l *Locker) Take(ctx context.Context, call engine.Call) (*Lock, error) {
	result := make(chan takeResult, 1)
	e := l.lk.NewEntry(call, &lockCall{result: result})
	if !l.h.Do(func() { l.lk.Add(e) }) {
		return nil, engine.ErrClosed
	}
	if !call.Try && call.Slots == 0 {
		defer l.feed(call.Name)()
	}
	select {
	case r := <-result:
		return r.lock, r.err
	case <-ctx.Done():
		// Give up: whatever the store holds of ours is released. The
		// error says who held the lock meanwhile, as last seen.
		var gaveUp error
		ran := make(chan struct{}) // Do returns once the loop has f, not once f ran
		if l.h.Do(func() { gaveUp = l.waitedFor(e, ctx.Err()); l.lk.Fail(e, gaveUp); l.stop(e); close(ran) }) {
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

// Unlock gives the lock back (tenure.Lock.Unlock).
func (h *Lock) Unlock(ctx context.Context) error {
	done := make(chan error, 1)
	if !h.l.h.Do(func() { h.l.unlock(h.E, done) }) {
		return engine.ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close releases every held lock (each within ReleaseTimeout), makes
// waiting calls return ErrClosed, stops the loop and waits for every
// goroutine the Locker started.
func (l *Locker) Close() {
	l.closeOnce.Do(func() {
		ok := l.h.Do(func() {
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
}

// listen passes wake-ups to the waiting locks they name until the listener
// is closed. Anything else that arrives is dropped.
func (l *Locker) listen() {
	prefix := WakeMsg("")
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
		if !l.h.Do(func() { l.woken(name) }) {
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
// each renewal and after the unlock, without a wake-up address. It returns
// the function that stops it.
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
			if !l.h.Do(func() { l.lk.Noticed(name, ev) }) {
				cancel() // closed
			}
		})
		if ctx.Err() == nil {
			l.log(slog.LevelWarn, "no change feed from the store: waiting by polls", "lock", name, "err", err)
		}
	})
	return cancel
}

// waitedFor is the error of a Lock whose ctx ended with err: the Locked
// error naming the holder last seen, or, if none was, err with the last
// store error.
func (l *Locker) waitedFor(e *engine.Entry, err error) error {
	var ld election.Leader
	switch {
	case !e.Started(): // waiting behind a call of this Locker
		if a := l.lk.Active(e.Name()); a != nil {
			if t, ok := a.Held(); ok {
				ld = election.Leader{Holder: l.cfg.ID, Token: t.Token}
			}
		}
	case e.Sem() != nil:
		ls := e.Sem().Holders()
		for _, h := range ls {
			if h.Holder != "" {
				return l.cfg.Locked(e.Name(), election.Leader{}, ls, false, err)
			}
		}
	default:
		ld = e.Leader()
	}
	if ld.Holder != "" {
		return l.cfg.Locked(e.Name(), ld, nil, false, err)
	}
	if e.Started() {
		if serr := e.Err(); serr != nil {
			return fmt.Errorf("tenure: lock %q: %w (the store's last error: %v)", e.Name(), err, serr)
		}
	}
	return fmt.Errorf("tenure: lock %q: %w", e.Name(), err)
}

// stop ends e: the term, then the release (engine.Locker.Stop).
func (l *Locker) stop(e *engine.Entry) {
	l.lk.Stop(e)
	l.checkDrained()
}

// unlock stops e and answers done once it is released.
func (l *Locker) unlock(e *engine.Entry, done chan error) {
	if !e.Live() {
		done <- nil // already gone: lost, or released
		return
	}
	l.unlocks[e] = append(l.unlocks[e], done)
	l.stop(e)
}

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

var errUnlocked = errors.New("tenure: unlocked")

// lockerFx is a Locker's engine.LockerEffects: its entries' answers go to
// their callers, their terms to the Locks' contexts, their events to the
// metrics and the log.
type lockerFx Locker

func (f *lockerFx) l() *Locker { return (*Locker)(f) }

func (f *lockerFx) Now() time.Time { return f.cfg.Clock.Now() }

func (f *lockerFx) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		f.cfg.Metrics.Anomaly()
	}
	f.l().log(level, msg, args...)
}

// Granted answers the caller with the lock held for term t of the record
// name (a semaphore's slot record, or the lock's).
func (f *lockerFx) Granted(e *engine.Entry, name string, t election.Term) {
	c := callOf(e)
	t.Lease, t.Holder, t.Payload = name, f.cfg.ID, e.Config().Payload
	c.held = &Lock{E: e, l: f.l()}
	c.held.Ctx.Init(context.Background(), t, f.cfg.Clock)
	c.counted = true
	f.held.Add(1)
	f.cfg.Metrics.Elected()
	c.answer(takeResult{lock: c.held})
	f.l().log(slog.LevelDebug, "locked", "lock", e.Name(), "token", t.Token)
}

func (f *lockerFx) Busy(e *engine.Entry, ld election.Leader, slots []election.Leader) {
	callOf(e).answer(takeResult{err: f.cfg.Locked(e.Name(), ld, slots, e.Keeps(), nil)})
}

func (f *lockerFx) Refused(e *engine.Entry, err error) { callOf(e).answer(takeResult{err: err}) }

// answer sends the one answer, and lets go of the channel that the
// caller alone holds now.
func (c *lockCall) answer(r takeResult) {
	c.result <- r
	c.result = nil
}

func (f *lockerFx) Published(e *engine.Entry, s driver.Snapshot) {
	if h := callOf(e).held; h != nil {
		engine.FollowJeopardy(&h.Ctx, f.cfg.Clock.Now(), s, f.cfg.Metrics, f.l().log, "lock", e.Name())
		h.Ctx.Announce()
	}
}

func (f *lockerFx) Ended(e *engine.Entry, t election.Term, r election.Reason) {
	c := callOf(e)
	f.uncount(c)
	f.cfg.Metrics.Demoted(r)
	if h := c.held; h != nil {
		engine.FollowJeopardy(&h.Ctx, f.cfg.Clock.Now(), driver.Snapshot{}, f.cfg.Metrics, f.l().log, "lock", e.Name()) // over with the term
		h.Ctx.Announce()
		h.Ctx.Cancel(fmt.Errorf("tenure: lock %q (token %d) ended: %s", e.Name(), t.Token, r))
	}
	if r != election.ReasonShutDown {
		f.l().log(slog.LevelWarn, "lock lost", "lock", e.Name(), "token", t.Token, "reason", r.String())
	}
}

func (f *lockerFx) WakeNext(name, addr string) { f.wakes.Send(addr, WakeMsg(name)) }

// uncount takes the lock out of tenure.locks.held.
func (f *lockerFx) uncount(c *lockCall) {
	if c.counted {
		c.counted = false
		f.held.Add(-1)
	}
}

func (f *lockerFx) Retired(e *engine.Entry) {
	c := callOf(e)
	f.uncount(c)
	var err error
	if e.GaveUp() {
		cause := e.Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		err = fmt.Errorf("%w: lock %q within %v: %w", ErrReleaseUnconfirmed, e.Name(), e.Config().ReleaseTimeout, cause)
	}
	for _, u := range f.unlocks[e] {
		u <- err
	}
	delete(f.unlocks, e)
	if c.held != nil {
		c.held.Ctx.Cancel(errUnlocked)
	}
	f.lk.Fail(e, engine.ErrClosed) // a call still waiting: the Locker is closing
	f.l().checkDrained()
}
