package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// Semaphores: in a scenario whose lockPlan has Slots, each name is a
// semaphore of that many slots, and a lock client's call is a
// lockcore.Sem, the code of tenure.Locker's calls with Slots. The checker
// holds each slot to I1 and I2 as a lock, and each name to at most n
// holders in belief, for the n of every one of them (callers may disagree
// on n, and the count record that fixes it may be lost: loseCount).

// callSem makes the client's call, on a semaphore, with the caller's
// deadline wait.
func (l *lockClient) callSem(wait time.Duration) {
	w, in := l.w, l.in
	sem := new(lockcore.Sem)
	l.sem = sem
	cfg := election.Config{ID: in.ID, Timing: in.timing, Rand: w.machineRand(in), Wall: in.wallNow, StaleReads: w.plan.StaleReads}
	var mk func() (lockcore.Machine, error)
	if w.opt.Strategy == Naive {
		mk = func() (lockcore.Machine, error) { return newNaive(cfg, in.wallNow), nil }
	}
	n := w.plan.Locks.Slots
	if alt := w.plan.Locks.SlotsAlt; alt > 0 && l.rng.IntN(2) == 0 {
		n = alt
	}
	if err := sem.Init((*semClient)(l), l.name, n, &cfg, l.try, l.fair, mk); err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the timing passed Validate
	}
	l.begin(sem, wait)
}

func (l *lockClient) semRequests() []*request {
	rs := make([]*request, len(l.semReqs))
	for i, q := range l.semReqs {
		rs[i] = q.r
	}
	return rs
}

// semFire: the host's timer fired: calls past their timeout are answered
// with one, then the semaphore's due timers run.
func (l *lockClient) semFire() {
	now := l.now()
	for i := 0; i < len(l.semReqs); i++ {
		if q := l.semReqs[i]; !q.by.IsZero() && !now.Before(q.by) {
			l.semReqs = slices.Delete(l.semReqs, i, i+1)
			i--
			q.r.abandoned, l.failed = true, true
			l.semDone(q, election.Result{Err: election.ErrTimeout}, q.r.kind == election.OpPut)
		}
	}
	if l.sem != nil {
		if due := l.sem.Due(); !due.IsZero() && !now.Before(due) {
			l.sem.Fire(now)
		}
	}
	l.arm()
}

func (l *lockClient) semDeliver(r *request) {
	i := slices.IndexFunc(l.semReqs, func(q semReq) bool { return q.r == r })
	if i < 0 {
		return // cancelled, or timed out
	}
	q := l.semReqs[i]
	l.semReqs = slices.Delete(l.semReqs, i, i+1)
	res := election.Result{ID: r.opID, Record: r.res.rec, Version: r.res.ver, Err: r.res.err}
	put := r.kind == election.OpPut
	if put && res.Err == nil {
		res.Record = r.rec
	}
	if res.Err != nil && q.rec != lockcore.RecLock && !errors.Is(res.Err, lease.ErrConflict) && !errors.Is(res.Err, lease.ErrNotFound) {
		l.failed = true
	}
	l.semDone(q, res, put)
	l.arm()
}

func (l *lockClient) semDone(q semReq, res election.Result, put bool) {
	sem := l.sem
	sem.Result(q.slot, q.rec, res, put)
	if t := sem.Ticket(); t != 0 && l.sem == sem {
		l.ticket = t
	}
}

// semClient is the lock client's lockcore.SemHost.
type semClient lockClient

func (s *semClient) l() *lockClient { return (*lockClient)(s) }

func (s *semClient) Now() time.Time { return s.l().now() }

func (s *semClient) Call(slot int, op election.Op, rec int) {
	l := s.l()
	g := l.w.store.register(lockcore.SemRecordName(l.name, slot, rec))
	q := semReq{r: l.w.call(l.in, op, g), slot: slot, rec: rec}
	if rec != lockcore.RecLock {
		q.by = l.now().Add(l.in.timing.OpTimeout)
	}
	l.semReqs = append(l.semReqs, q)
}

func (s *semClient) Cancel(slot int) {
	l := s.l()
	if i := slices.IndexFunc(l.semReqs, func(q semReq) bool { return q.slot == slot && q.rec == lockcore.RecLock }); i >= 0 {
		l.semReqs[i].r.abandoned = true
		l.semReqs = slices.Delete(l.semReqs, i, i+1)
	}
}

func (s *semClient) Log(slog.Level, string, ...any) {}

func (s *semClient) Granted(slot int, t election.Term) {
	l := s.l()
	l.held = lockcore.SlotName(l.name, slot)
	l.Granted(t)
}

func (s *semClient) Busy(ls []election.Leader) {
	l := s.l()
	msg := "all slots held:"
	for _, h := range ls {
		msg += " " + h.Holder + "/" + strconv.FormatUint(uint64(h.Token), 10)
	}
	l.answered(msg)
}

func (s *semClient) Refused(err error) { s.l().Refused(err) }

func (s *semClient) Publish(d driver.Snapshot) { s.l().Publish(d) }

func (s *semClient) Ended(t election.Term, r election.Reason) { s.l().Ended(t, r) }

func (s *semClient) Reschedule() {}

func (s *semClient) Retired() { s.l().Retired() }

// loseCount deletes the count record of the semaphore name, as an operator
// or a store that lost it would, or (release) writes it released, as
// tenure release --force does: the semaphore must not widen, nor narrow,
// while a slot may still be believed held.
func (w *world) loseCount(name string, release bool) {
	g := w.store.regs[name+lockcore.SlotsSuffix]
	if w.healed {
		return
	}
	if g == nil || !g.exists || g.rec.Released {
		w.fault("", "no count record of %s to lose", name)
		return
	}
	if w.store.f.StalePPM > 0 {
		g.past = w.store.remember(g.past, g.exists, g.rec, g.ver)
	}
	if release {
		w.fault("", "the count record of %s (%s) is released by force", name, g.rec.Payload)
		g.rec.Released, g.rec.Token = true, g.rec.Token+1
		w.store.verN++
		g.ver = lease.Version("v" + strconv.Itoa(w.store.verN))
	} else {
		w.fault("", "the count record of %s (%s) vanishes", name, g.rec.Payload)
		g.exists, g.rec, g.ver = false, lease.Record{}, lease.NoVersion
	}
	g.written = w.now
	w.chk.stats.Losses++
}
