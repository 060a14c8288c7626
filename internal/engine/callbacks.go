package engine

import (
	"context"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
)

// JobKind says what a Job is: a callback of a term, or a barrier.
type JobKind uint8

const (
	JobElected JobKind = iota + 1 // OnElected(Ctx, Term)
	JobDemoted                    // OnDemoted(Term, Reason)
	JobBarrier                    // Barrier: reached once the callbacks before it returned
)

// Job is one item of a Candidate's callback queue.
type Job struct {
	Kind    JobKind
	Term    election.Term
	Reason  election.Reason
	Ctx     context.Context // JobElected: the term's context
	Barrier driver.Barrier
}

// Name is the callback a Job runs ("" for a barrier), as CallbackPanic
// names it.
func (j Job) Name() string {
	switch j.Kind {
	case JobElected:
		return "OnElected"
	case JobDemoted:
		return "OnDemoted"
	}
	return ""
}

// Dispatch is a Candidate's callback queue: OnElected and OnDemoted run
// one at a time, in the order of the events, and a barrier is reached once
// the callbacks queued before it have returned. After a callback panicked
// it runs no more callbacks, only barriers. It runs nothing itself: whoever
// runs the callbacks (a goroutine of tenure.Candidate's, or the
// simulator's program) takes each job with Next and says it is over with
// Done. It is safe for concurrent use.
type Dispatch struct {
	mu      sync.Mutex // guards what follows
	queue   []Job
	cur     bool      // a job is taken and not done
	running string    // the callback running, "" if none (or a barrier)
	since   time.Time // when it began
	closed  bool
	broken  bool // a callback panicked
}

// Push queues j.
func (d *Dispatch) Push(j Job) {
	d.mu.Lock()
	d.queue = append(d.queue, j)
	d.mu.Unlock()
}

// Close lets the queue finish once it is empty.
func (d *Dispatch) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// Next takes the next job to run, if none runs: at now, by the caller's
// clock. Callbacks queued after one panicked are dropped.
func (d *Dispatch) Next(now time.Time) (Job, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for !d.cur && len(d.queue) > 0 {
		j := d.queue[0]
		d.queue[0] = Job{}
		d.queue = d.queue[1:]
		if j.Kind != JobBarrier && d.broken {
			continue
		}
		d.cur = true
		if j.Kind != JobBarrier {
			d.running, d.since = j.Name(), now
		}
		return j, true
	}
	return Job{}, false
}

// Done says the job taken last is over; panicked, that its callback
// panicked.
func (d *Dispatch) Done(panicked bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur, d.running = false, ""
	d.broken = d.broken || panicked
}

// Finished reports whether the queue is closed, empty and idle.
func (d *Dispatch) Finished() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed && len(d.queue) == 0 && !d.cur
}

// Busy returns the callback running now and since when, if any.
func (d *Dispatch) Busy() (string, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running, d.since
}

// Notify is a Candidate's OnLeaderChange queue: one call at a time, and a
// change that comes while one runs replaces any still waiting, so that the
// callback catches up with the latest leader. Like Dispatch, it runs
// nothing itself: Next and Done. It is safe for concurrent use.
type Notify struct {
	mu      sync.Mutex // guards what follows
	latest  election.Leader
	pending bool
	cur     bool
	closed  bool
	broken  bool
}

// Push queues l, replacing a leader still waiting.
func (n *Notify) Push(l election.Leader) {
	n.mu.Lock()
	n.latest, n.pending = l, true
	n.mu.Unlock()
}

// Close lets the queue finish once nothing waits.
func (n *Notify) Close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}

// Next takes the leader to report, if none is being reported and one
// waits (and no call panicked).
func (n *Notify) Next() (election.Leader, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur || !n.pending || n.broken {
		return election.Leader{}, false
	}
	n.pending, n.cur = false, true
	return n.latest, true
}

// Done says the call taken last is over; panicked, that it panicked.
func (n *Notify) Done(panicked bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cur = false
	n.broken = n.broken || panicked
}

// Finished reports whether the queue is closed and idle, with nothing
// that will run.
func (n *Notify) Finished() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed && !n.cur && (!n.pending || n.broken)
}
