package tenure

import (
	"context"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
)

// Callbacks tell a program about its leadership. Every field is optional.
//
// The contract:
//
//   - Callbacks of one Candidate run one at a time, in the order of the
//     events, on one goroutine that Run owns: never concurrently, and never
//     on the goroutine that renews the lease, so a slow callback delays later
//     callbacks but never a renewal.
//   - OnElected gets a context that is cancelled no later than the term's
//     local deadline, when the lease is lost, and when Run's context is done.
//     It may block, running the leader's work until the context is done, or
//     return at once. The context carries the term's fencing.Fence
//     (fencing.FromContext).
//   - OnDemoted is called exactly once for every OnElected, after the term's
//     context was cancelled and after OnElected returned; never otherwise.
//   - OnLeaderChange reports the leader as observed in the store whenever it
//     changes (holder or token), this candidate included; the zero Leader
//     means none (absent or released). An observed leader may already be
//     dead: followers only learn that by waiting out its lease.
//   - Run returns only after every callback has returned, so a callback that
//     never returns keeps Run from returning.
type Callbacks struct {
	OnElected      func(ctx context.Context, term Term)
	OnDemoted      func(term Term, reason DemotionReason)
	OnLeaderChange func(leader Leader)
}

// Term describes one leadership term.
type Term struct {
	Lease  string
	Holder string // this candidate's ID
	// Token is the term's fencing token: higher than every earlier term's.
	Token fencing.Token
	// Deadline is the local deadline when the term began; each renewal moves
	// it later (Candidate.Status has the current one). The term's context is
	// cancelled by then at the latest.
	Deadline time.Time
	Payload  []byte
}

// Fence returns what the term's writes present to a fenced resource.
func (t Term) Fence() fencing.Fence { return fencing.Fence{Lease: t.Lease, Token: t.Token} }

// Leader is a leader as observed in the store.
type Leader struct {
	ID      string // holder identity; empty when there is no leader
	Token   fencing.Token
	Payload []byte
}

// DemotionReason says why a term ended.
type DemotionReason int

const (
	// ReasonLost: a renewal found the lease taken by another holder.
	ReasonLost = DemotionReason(election.ReasonLost)
	// ReasonExpired: the local deadline passed before a renewal was
	// confirmed, though none failed: the store or this process was too slow.
	ReasonExpired = DemotionReason(election.ReasonExpired)
	// ReasonStoreUnavailable: renewals failed until the local deadline.
	ReasonStoreUnavailable = DemotionReason(election.ReasonStoreUnavailable)
	// ReasonShutDown: Run's context is done.
	ReasonShutDown = DemotionReason(election.ReasonShutDown)
)

func (r DemotionReason) String() string { return election.Reason(r).String() }

// dispatcher runs callbacks one at a time, in order, on its own goroutine, so
// that the loop that renews the lease never waits for one.
type dispatcher struct {
	mu     sync.Mutex // guards queue and closed
	queue  []func()
	closed bool
	wake   chan struct{} // size 1: a push never blocks
}

func newDispatcher() *dispatcher { return &dispatcher{wake: make(chan struct{}, 1)} }

func (d *dispatcher) push(f func()) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	d.mu.Unlock()
	d.signal()
}

func (d *dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// barrier returns a channel closed once every callback pushed before it has
// returned.
func (d *dispatcher) barrier() <-chan struct{} {
	ch := make(chan struct{})
	d.push(func() { close(ch) })
	return ch
}

// close lets run return once the queue is empty.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.signal()
}

func (d *dispatcher) run() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return
			}
			<-d.wake
			continue
		}
		f := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.mu.Unlock()
		f()
	}
}
