package sim

import (
	"errors"
	"fmt"
	"github.com/tenure-go/tenure/fencing"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// naive is the baseline the simulator must catch: a lock with an
// "expires_at" column. The holder writes its wall-clock time into the
// record; a follower takes over once its own wall clock passes that time
// plus the lease; the holder leads while its wall clock is before it, less
// the margin. It compares clocks of different hosts, so skew or a step of
// either clock gives two leaders. Like many such locks, it also treats a
// write whose answer was lost as failed. It uses the store and tokens as
// tenure does, so a fenced resource still protects the data.
type naive struct {
	cfg  election.Config
	wall func() time.Time // this host's wall clock

	exists bool
	rec    lease.Record
	ver    lease.Version
	leader election.Leader

	leading  bool
	own      lease.Record  // its last confirmed write
	ownVer   lease.Version // and its version
	expires  time.Time     // wall time its lease ends, as written
	deadline time.Time     // local monotonic estimate of expires-margin

	op       *naiveOp
	lastID   uint64
	next     time.Time
	nextDo   naiveDo
	stopping bool
	release  bool
	finished bool
	out      election.Output
}

type naiveDo int

const (
	nPoll naiveDo = iota + 1
	nAcquire
	nRenew
	nRelease
)

type naiveOp struct {
	id   uint64
	do   naiveDo
	sent time.Time
	rec  lease.Record
}

func newNaive(cfg election.Config, wall func() time.Time) *naive {
	return &naive{cfg: cfg, wall: wall}
}

func (n *naive) Start(now time.Time) election.Output {
	n.schedule(now, nPoll)
	return n.flush(now)
}

func (n *naive) Tick(now time.Time) election.Output { return n.flush(now) }

func (n *naive) Done(now time.Time, res election.Result) election.Output {
	if n.op != nil && n.op.id == res.ID {
		op := n.op
		n.op = nil
		n.handle(now, op, res)
	}
	return n.flush(now)
}

func (n *naive) Stop(now time.Time) election.Output {
	if !n.stopping {
		n.stopping = true
		if n.leading {
			n.demote(election.ReasonShutDown)
		}
		n.nextDo = 0
	}
	return n.flush(now)
}

func (n *naive) Release(now time.Time) election.Output {
	n.Stop(now)
	n.release = true
	return n.flush(now)
}

func (n *naive) Leader() election.Leader { return n.leader }

// Config returns the baseline's configuration (lockcore.Machine).
func (n *naive) Config() *election.Config { return &n.cfg }

// Err: the baseline keeps no error.
func (n *naive) Err() error { return nil }

// CallbacksDone: the baseline campaigns whether or not callbacks run.
func (n *naive) CallbacksDone(now time.Time) election.Output { return n.flush(now) }

// Term has no deadline to check: the baseline ends its terms by its wall
// clock, in its loop.
func (n *naive) Term() (election.Term, bool) { return election.Term{}, false }

func (n *naive) flush(now time.Time) election.Output {
	for {
		n.checkExpiry(now)
		if n.op != nil && !now.Before(n.op.sent.Add(n.cfg.OpTimeout)) {
			op := n.op
			n.op = nil
			n.out.Abandon = op.id
			n.handle(now, op, election.Result{ID: op.id, Err: election.ErrTimeout})
			continue
		}
		if n.release && !n.finished && n.op == nil && n.nextDo == 0 {
			if n.ownVer != lease.NoVersion && !n.own.Released {
				n.schedule(now, nRelease)
			} else {
				n.finished = true
			}
		}
		if n.op == nil && n.nextDo != 0 && !now.Before(n.next) {
			n.start(now)
			continue
		}
		break
	}
	out := n.out
	n.out = election.Output{}
	if n.finished {
		out.Done = true
		return out
	}
	switch {
	case n.op != nil:
		out.Wake = n.op.sent.Add(n.cfg.OpTimeout)
	case n.nextDo != 0:
		out.Wake = n.next
	}
	if n.leading {
		n.deadline = now.Add(n.expires.Add(-n.cfg.Margin).Sub(n.wall()))
		if out.Wake.IsZero() || n.deadline.Before(out.Wake) {
			out.Wake = n.deadline
		}
	}
	return out
}

// checkExpiry ends the term once this host's wall clock says so.
func (n *naive) checkExpiry(now time.Time) {
	if n.leading && !n.wall().Before(n.expires.Add(-n.cfg.Margin)) {
		n.deadline = now
		n.demote(election.ReasonExpired)
	}
}

func (n *naive) schedule(at time.Time, do naiveDo) { n.next, n.nextDo = at, do }

func (n *naive) term() election.Term {
	return election.Term{Holder: n.cfg.ID, Token: fencing.Token(n.own.Token), Deadline: n.deadline}
}

func (n *naive) demote(r election.Reason) {
	n.leading = false
	n.out.Events = append(n.out.Events, election.Event{Kind: election.EventDemoted, Term: n.term(), Reason: r})
}

func (n *naive) start(now time.Time) {
	do := n.nextDo
	n.nextDo = 0
	switch do {
	case nPoll:
		n.send(now, do, election.Op{Kind: election.OpGet}, lease.Record{})
	case nAcquire:
		if n.stopping {
			return
		}
		token, expect := uint64(1), lease.NoVersion
		if n.exists {
			token, expect = n.rec.Token+1, n.ver
		}
		n.write(now, do, lease.Record{Holder: n.cfg.ID, Token: token, Duration: n.cfg.LeaseDuration}, expect)
	case nRenew:
		if n.stopping || !n.leading {
			return
		}
		n.write(now, do, n.own, n.ownVer)
	case nRelease:
		rec := n.own
		rec.Released = true
		n.write(now, do, rec, n.ownVer)
	}
}

func (n *naive) write(now time.Time, do naiveDo, rec lease.Record, expect lease.Version) {
	rec.Nonce = fmt.Sprintf("%016x", n.cfg.Rand.Uint64())
	rec.WrittenAt = n.wall()
	rec.Payload = strconv.AppendInt(nil, rec.WrittenAt.UnixNano(), 10) // expires_at = this + Duration
	n.send(now, do, election.Op{Kind: election.OpPut, Record: rec, Expect: expect}, rec)
}

func (n *naive) send(now time.Time, do naiveDo, op election.Op, rec lease.Record) {
	n.lastID++
	op.ID = n.lastID
	n.op = &naiveOp{id: op.ID, do: do, sent: now, rec: rec}
	n.out.Op = &op
}

func (n *naive) handle(now time.Time, op *naiveOp, res election.Result) {
	var ce *lease.ConflictError
	switch op.do {
	case nPoll:
		switch {
		case res.Err == nil:
			n.observe(true, res.Record, res.Version)
		case errors.Is(res.Err, lease.ErrNotFound):
			n.observe(false, lease.Record{}, lease.NoVersion)
		default:
			n.poll(now)
			return
		}
		n.follow(now)
	case nAcquire, nRenew:
		switch {
		case res.Err == nil:
			n.own, n.ownVer = op.rec, res.Version
			n.observe(true, op.rec, res.Version)
			n.expires = op.rec.WrittenAt.Add(op.rec.Duration)
			if n.stopping {
				return
			}
			if !n.leading {
				n.leading = true
				n.deadline = now.Add(n.expires.Add(-n.cfg.Margin).Sub(n.wall()))
				n.out.Events = append(n.out.Events, election.Event{Kind: election.EventElected, Term: n.term()})
			}
			n.schedule(now.Add(n.cfg.RenewInterval), nRenew)
		case errors.Is(res.Err, lease.ErrConflict):
			if n.leading {
				n.demote(election.ReasonLost)
			}
			if errors.As(res.Err, &ce) {
				n.observe(ce.Found, ce.Current, ce.Version)
			}
			n.poll(now)
		case n.leading:
			n.schedule(now.Add(n.cfg.RetryMin), nRenew)
		default:
			n.poll(now) // a lost answer counts as a failure
		}
	case nRelease:
		n.finished = true
	}
}

func (n *naive) poll(now time.Time) {
	if !n.stopping {
		d := n.cfg.PollInterval
		n.schedule(now.Add(d-time.Duration(n.cfg.Rand.Int64N(int64(d/5)+1))), nPoll)
	}
}

// writtenAt is the naive lock's write time, its writer's wall clock: in
// the payload, since a host stamps WrittenAt with its own reading.
func writtenAt(rec lease.Record) time.Time {
	ns, err := strconv.ParseInt(string(rec.Payload), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// follow takes the lease once the record's expires_at is past by this
// host's wall clock: the comparison of two hosts' clocks that tenure avoids.
func (n *naive) follow(now time.Time) {
	if n.stopping || n.leading {
		return
	}
	if !n.exists || n.rec.Released || !n.wall().Before(writtenAt(n.rec).Add(n.rec.Duration)) {
		n.schedule(now, nAcquire)
		return
	}
	n.poll(now)
}

func (n *naive) observe(found bool, rec lease.Record, ver lease.Version) {
	n.exists, n.rec, n.ver = found, rec, ver
	var l election.Leader
	if found && !rec.Released {
		l = election.Leader{Holder: rec.Holder, Token: fencing.Token(rec.Token)}
	}
	if l.Holder != n.leader.Holder || l.Token != n.leader.Token {
		n.leader = l
		n.out.Events = append(n.out.Events, election.Event{Kind: election.EventLeaderChanged, Leader: l})
	}
}
