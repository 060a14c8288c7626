// Package host runs entries — a lease's driver, a standby campaign, the
// locks of a Locker — on one goroutine, with one timer for all of them and
// one path for their store calls. A tenure.Candidate is a host with a lease
// entry (and a standby entry); a tenure.Locker is a host with an entry per
// lock. Entries are single-threaded code (internal/driver,
// internal/lockcore, internal/standby): the host calls them one event at a
// time, and they call it back only from within those calls.
//
// The host is two layers. Core is the part without goroutines: the timer
// heap, the calls in flight and those waiting their turn, stepped with the
// time and the store's answers, so that a simulator can step the same
// code. Host is the thin loop around it: a select over its one timer, the
// calls' answers and functions passed to Do, on the real clock.
//
// A store call runs on a goroutine of its own, so that the loop keeps time
// (and ends a term at its deadline) while the store is slow; its answer
// comes back to the loop. Calls beyond Config.MaxCalls wait their turn in
// order: a slow store then slows the host down instead of piling up
// goroutines.
package host

import (
	"context"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

// Entry is what a host runs. Embed a Slot to implement it.
type Entry interface {
	// Due returns the instant of the entry's next timer; zero if none.
	Due() time.Time
	// Fire runs whatever of the entry is due at now.
	Fire(now time.Time)
	// CallDone takes the outcome of a call the entry made: also that of a
	// call it cancelled once the call had started.
	CallDone(f *Flight, res election.Result)
	slot() *Slot
}

// Slot is an Entry's place in its host's timer heap. The zero Slot is
// outside the heap.
type Slot struct {
	idx  int       // index+1; 0: not in the heap
	rank uint64    // order among entries due at once: first come, first served
	due  time.Time // its Due when last fixed: the heap's key
}

func (s *Slot) slot() *Slot { return s }

// Clock is the time a host keeps: tenure.Clock, or a part of it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Config configures a Host.
type Config struct {
	Clock Clock
	Store lease.Store
	// Context is the parent of the calls' contexts, for its values (it is
	// never cancelled by the host's end: Run cancels the calls itself);
	// nil: context.Background.
	Context context.Context
	// MaxCalls bounds the store calls in flight; 0: no bound.
	MaxCalls int
	// Observe, if set, sees every call's outcome and duration, on the
	// call's goroutine (metrics, the time of the store's last answer).
	Observe func(kind election.OpKind, err error, took time.Duration)
	// After, if set, runs on the loop after each event.
	After func()
}

// Host is one loop around a Core, whose methods (Call, Cancel, Fix,
// Remove) it has. Its methods but Do, Go, Quit and Wait belong to the
// loop: call them from Run's goroutine, within an event.
type Host struct {
	*Core
	cfg     Config
	reqs    chan func()
	res     chan answer
	quit    chan struct{} // closed when the loop ends
	base    context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	ordered bool // the simulator's store: mark each call's order (seam.CallOrder)

	// The loop's.
	abandoned []*Flight // calls abandoned in this event, to answer after it
	timer     <-chan time.Time
	timerAt   time.Time
	exit      bool
}

type answer struct {
	f   *Flight
	res election.Result
}

// New returns a Host; Run runs its loop.
func New(cfg Config) *Host {
	parent := cfg.Context
	if parent == nil {
		parent = context.Background()
	}
	base, stop := context.WithCancel(parent)
	h := &Host{cfg: cfg, reqs: make(chan func()), res: make(chan answer), quit: make(chan struct{}), base: base, stop: stop}
	h.Core = NewCore(cfg.Clock.Now, (*loopCalls)(h), cfg.MaxCalls)
	_, h.ordered = cfg.Store.(seam.Ordered)
	return h
}

// Run runs the loop on the calling goroutine until Exit: entries' timers,
// call answers, and functions passed to Do. Once stop is closed it calls
// onStop (on the loop) and goes on. When it returns, calls still in flight
// are cancelled and Do returns false.
func (h *Host) Run(stop <-chan struct{}, onStop func()) {
	defer h.stop()
	defer close(h.quit)
	for !h.exit {
		h.arm()
		select {
		case <-stop:
			stop = nil
			onStop()
		case f := <-h.reqs:
			f()
		case a := <-h.res:
			h.Answer(a.f, a.res)
		case <-h.timer:
			h.timer = nil
			h.Fire(h.cfg.Clock.Now())
		}
		h.answerAbandoned()
		if h.cfg.After != nil {
			h.cfg.After()
		}
	}
}

// Exit makes Run return after the current event.
func (h *Host) Exit() { h.exit = true }

// Do runs f on the loop, and reports whether it did: false once Run has
// returned. It may be called from any goroutine but the loop's.
func (h *Host) Do(f func()) bool {
	select {
	case h.reqs <- f:
		return true
	case <-h.quit:
		return false
	}
}

// Go runs f on a goroutine that Wait waits for.
func (h *Host) Go(f func()) { h.wg.Go(f) }

// Quit is closed once Run has returned.
func (h *Host) Quit() <-chan struct{} { return h.quit }

// Wait waits for every goroutine the host started: calls and Go's.
func (h *Host) Wait() { h.wg.Wait() }

// arm sets the loop's timer for the earliest Due.
func (h *Host) arm() {
	at := h.Next()
	if at.IsZero() {
		h.timer = nil
		return
	}
	if h.timer != nil && at.Equal(h.timerAt) {
		return
	}
	h.timerAt = at
	h.timer = h.cfg.Clock.After(at.Sub(h.cfg.Clock.Now()))
}

// loopCalls runs a Core's calls for the loop: each on a goroutine of its
// own, whose answer comes back to the loop.
type loopCalls Host

func (l *loopCalls) Start(f *Flight) {
	h := (*Host)(l)
	// The Core times the call out on the host's clock; the deadline tells
	// the store too (an SDK's retries stop at it).
	var ctx context.Context
	var cancel context.CancelFunc
	if f.timeout > 0 {
		ctx, cancel = context.WithTimeout(h.base, f.timeout)
	} else {
		ctx, cancel = context.WithCancel(h.base)
	}
	f.abandon = cancel
	if h.ordered {
		ctx = seam.CallOrder(ctx, f.seq)
	}
	clk, st := h.cfg.Clock, h.cfg.Store
	h.wg.Go(func() {
		defer cancel()
		res := election.Result{ID: f.op.ID, Record: f.op.Record}
		start := clk.Now()
		switch f.op.Kind {
		case election.OpGet:
			res.Record, res.Version, res.Err = get(ctx, st, f.name, f.op.Stale)
		case election.OpPut:
			res.Version, res.Err = st.Put(ctx, f.name, f.op.Record, f.op.Expect)
		}
		if h.cfg.Observe != nil {
			h.cfg.Observe(f.op.Kind, res.Err, clk.Now().Sub(start))
		}
		select {
		case h.res <- answer{f, res}:
		case <-h.quit:
		}
	})
}

// Abandon cancels f's call. Unless the Core timed it out (and answered it
// itself), the loop answers it once the event is over, as cancelled: its
// entry gave it up and ignores what the store says, so the answer need not
// wait for the call to unwind, and the entries see their abandoned calls
// answered in the order they gave them up, whatever order the goroutines
// return in. The call's own answer, later, is dropped.
func (l *loopCalls) Abandon(f *Flight) {
	f.abandon()
	if !f.timedOut {
		l.abandoned = append(l.abandoned, f)
	}
}

// answerAbandoned answers the calls abandoned, in order, and those their
// answers abandon.
func (h *Host) answerAbandoned() {
	for len(h.abandoned) > 0 {
		f := h.abandoned[0]
		h.abandoned[0] = nil
		h.abandoned = h.abandoned[1:]
		h.Answer(f, Canceled(f))
	}
}

// get reads name from store: with GetStale where a stale answer may serve
// (Op.Stale, set only for a store that offers it).
func get(ctx context.Context, store lease.Store, name string, stale bool) (lease.Record, lease.Version, error) {
	if sg, ok := store.(lease.StaleGetter); ok && stale {
		return sg.GetStale(ctx, name)
	}
	return store.Get(ctx, name)
}
