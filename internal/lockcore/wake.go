package lockcore

import (
	"errors"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Wake-ups. A lock that knows a wake-up address (SetWake) keeps, while it
// waits, the lock's wake record (NAME::wake) naming itself as the waiter to
// wake, and, when it gives the lock back, reads that record beside the
// release and sends its waiter a wake-up once the release is confirmed
// (Host.WakeNext). A woken waiter reads the lock at once, strongly: a wake-up
// has no authority, it only makes a waiter read sooner, and a wake-up that
// is lost, late or forged costs at most a poll of handoff, or a read.
//
// Who registers: a plain waiter, once per holder it sees (the first of the
// waiters to write the record behind a holder stays, the others leave it);
// a fair waiter, only at the head of its queue, and it writes over a plain
// waiter's registration, so that the head is woken. A fair waiter that
// leaves the queue from its head (it got the lock, or gave up) wakes the
// new head, found in its slot (which says its address), so that it learns
// of its turn, and registers, a few round trips later, not a poll. The record names the
// lock's token it was written behind; a registration from before the
// current holder took the lock (the holder's own, most often) is stale and
// written over.

// WakeSuffix names a lock's wake record.
const WakeSuffix = "::wake"

// RecWake is the lock's wake record, for Host.Call.
const RecWake = -3

// Wake-ups are rate-limited per lock: a burst of WakeBurst, then one every
// WakeEvery. A flood of them costs at most that many extra reads.
const (
	WakeBurst = 3
	WakeEvery = time.Second
)

// WakeLimit is a wake-up rate limit (GCRA): WakeBurst at once, then one
// every WakeEvery. The zero value is ready.
type WakeLimit struct{ tat time.Time }

// Allow reports whether a wake-up received at now may make a read.
func (w *WakeLimit) Allow(now time.Time) bool {
	tat := w.tat
	if tat.Before(now) {
		tat = now
	}
	if tat.Sub(now) > (WakeBurst-1)*WakeEvery {
		return false
	}
	w.tat = tat.Add(WakeEvery)
	return true
}

// Next returns the earliest instant from now at which Allow would allow.
func (w *WakeLimit) Next(now time.Time) time.Time {
	if t := w.tat.Add(-(WakeBurst - 1) * WakeEvery); t.After(now) {
		return t
	}
	return now
}

// wakeState is a lock's part in wake-ups; the loop's.
type wakeState struct {
	addr  string // ours, for the record; "" to wake others only
	limit WakeLimit

	op       uint8         // wakeRegister or wakeRead in flight; 0 none
	ver      lease.Version // the record's version as last seen; "" unknown
	found    bool
	behind   uint64    // the lock's token our registration (or another's we left) is behind; 0 none
	probed   uint64    // the lock's token we last read the record behind (a plain waiter reads before it writes)
	retryAt  time.Time // after a failed call
	unlock   bool      // we give the lock back: read the record
	read     bool      // and it was read
	target   string    // the address to wake once the release is confirmed
	targetID string
}

const (
	wakeRegister uint8 = iota + 1
	wakeRead
	wakeProbe // a plain waiter's read before it registers
)

// SetWake gives the lock a wake-up address (before Start): it registers as
// its lock's waiter to wake while it waits, and wakes the registered
// waiter when it gives the lock back. With addr "" it only wakes others.
func (l *Lock) SetWake(addr string) {
	l.wk = &wakeState{addr: addr}
	if l.fair != nil {
		l.fair.addr = addr
	}
}

// Turn reports whether a waiting lock may take the lock as far as its
// queue goes: always, unless it waits, fair, behind others.
func (l *Lock) Turn() bool { return l.fair == nil || l.fair.gone || l.fair.open }

// Wake takes a wake-up for the lock: a waiting lock reads the lock now
// (and a fair one the slot ahead of it), within the rate limit. It reports
// whether the wake-up was taken.
func (l *Lock) Wake() bool {
	if l.wk == nil || l.held || l.answered || l.retired || !l.wk.limit.Allow(l.h.Now()) {
		return false
	}
	if f := l.fair; f != nil && !f.gone && !f.leaving && !f.open {
		// Not our turn as far as we know: learn whether the head left.
		now := l.h.Now()
		for i := range f.watch {
			f.watch[i].due = now
		}
		if len(f.watch) == 0 {
			f.idxKnown = false
		}
		if !f.inFlight {
			f.next = now
		}
	} else {
		l.d.Hint()
	}
	l.after()
	return true
}

// Noticed takes an event of the store's change feed for the lock (a write
// of its record): a waiting lock that read the holder's term times a
// renewal of it from the event, and otherwise reads the record now, within
// its Machine's notice rate limit, as a standby on a renewal notice; a fair
// waiter behind the head ignores it, as it ignores the lock between its
// gated polls. A release is a wake-up instead (WakeBurst at once, then one
// every WakeEvery). It needs no wake-up address. It reports whether the
// lock waits.
func (l *Lock) Noticed(ev lease.Event) bool {
	if l.held || l.answered || l.retired || l.try {
		return false
	}
	if !ev.Released {
		if ev.Record != nil {
			// A renewal of the holder's term it read: timed, not read
			// (election.Machine.NoticeRecord).
			l.d.NoticeRecord(ev.Version, *ev.Record)
		} else {
			l.d.Notice(ev.Version)
		}
		l.after()
		return true
	}
	if l.wk != nil {
		return l.Wake()
	}
	if !l.feedLimit.Allow(l.h.Now()) {
		return false
	}
	if f := l.fair; f == nil || f.gone || f.open {
		l.d.Hint()
	}
	l.after()
	return true
}

// wakeBusy reports whether a call on the wake record is in flight: the
// queue's calls wait for it, and it for them.
func (l *Lock) wakeBusy() bool { return l.wk != nil && l.wk.op != 0 }

// queueBusy reports whether a call on the queue is in flight.
func (l *Lock) queueBusy() bool { return l.fair != nil && l.fair.inFlight }

// wakeStep sends the call on the wake record that is due, if any: the
// read of an unlock, or our registration.
func (l *Lock) wakeStep() {
	wk := l.wk
	if wk == nil || wk.op != 0 || l.queueBusy() || l.h.Now().Before(wk.retryAt) {
		return
	}
	switch {
	case wk.unlock && !wk.read:
		wk.op = wakeRead
		l.h.Call(election.Op{Kind: election.OpGet}, RecWake)
	case l.wantRegister() && (l.fair == nil || l.fair.gone) && wk.probed != uint64(l.Leader().Token):
		// A plain waiter reads first: another has most likely registered
		// behind this holder already, and a read costs less than a write
		// the store refuses.
		wk.op = wakeProbe
		l.h.Call(election.Op{Kind: election.OpGet, Stale: l.Config().StaleReads}, RecWake)
	case l.wantRegister():
		cfg := l.Config()
		ld := l.Leader()
		rec := lease.Record{Holder: cfg.ID, Token: uint64(ld.Token), Duration: cfg.LeaseDuration, Nonce: l.nonce(), Payload: []byte(wk.addr)}
		expect := wk.ver
		if expect == "" || !wk.found {
			expect = lease.NoVersion
		}
		wk.op = wakeRegister
		l.h.Call(election.Op{Kind: election.OpPut, Record: rec, Expect: expect}, RecWake)
	}
}

// wantRegister reports whether we should name ourselves in the wake record
// now: we wait for a holder we have not registered behind, and (if fair)
// we are at the head of the queue.
func (l *Lock) wantRegister() bool {
	wk := l.wk
	if wk.addr == "" || l.try || l.held || l.answered || l.stopping || l.lost || l.retired {
		return false
	}
	if f := l.fair; f != nil && !f.gone && !f.open {
		return false
	}
	ld := l.Leader()
	return ld.Holder != "" && ld.Holder != l.Config().ID && ld.Token != 0 && uint64(ld.Token) != wk.behind
}

// wakeResult takes the answer of a call on the wake record.
func (l *Lock) wakeResult(r election.Result) {
	wk := l.wk
	op := wk.op
	wk.op = 0
	now := l.h.Now()
	ce := (*lease.ConflictError)(nil)
	if r.Err != nil {
		ce = conflict(r.Err)
	}
	switch {
	case op == wakeRead:
		wk.read = true
		if r.Err == nil && !r.Record.Released && r.Record.Holder != l.Config().ID && len(r.Record.Payload) > 0 {
			wk.target, wk.targetID = string(r.Record.Payload), r.Record.Holder
		}
	case op == wakeProbe && (r.Err == nil || errors.Is(r.Err, lease.ErrNotFound)):
		t := uint64(l.Leader().Token)
		wk.probed, wk.ver, wk.found = t, r.Version, r.Err == nil
		if cur := r.Record; r.Err == nil && !cur.Released && cur.Token >= t {
			wk.behind = t // registered behind this holder already (by us, or another): leave it
		}
	case r.Err == nil:
		wk.ver, wk.found, wk.behind = r.Version, true, r.Record.Token
		l.h.Log(slog.LevelDebug, "waiting for a wake-up", "lock", l.name, "addr", wk.addr)
	case ce != nil:
		wk.ver, wk.found = ce.Version, ce.Found
		cur := ce.Current
		// Another waiter registered behind the same holder (or a later
		// one): leave it, unless we are the head of a fair queue.
		if ce.Found && !cur.Released && cur.Holder != l.Config().ID && cur.Token >= uint64(l.Leader().Token) &&
			(l.fair == nil || l.fair.gone) {
			wk.behind = uint64(l.Leader().Token)
		}
		if ce.Found && cur.Holder == l.Config().ID && cur.Token >= uint64(l.Leader().Token) {
			wk.behind = cur.Token // ours landed unconfirmed
		}
	case errors.Is(r.Err, lease.ErrPermanent) || errors.Is(r.Err, lease.ErrInvalidRecord):
		// A record we may not write (a policy that allows the lock's name
		// alone, say): wait without wake-ups, said once.
		if wk.addr != "" {
			l.h.Log(slog.LevelWarn, "lock wake record unusable: waiting without wake-ups", "lock", l.name, "record", l.name+WakeSuffix, "err", r.Err)
		}
		wk.addr, wk.read = "", true
	case errors.Is(r.Err, lease.ErrConflict):
		wk.ver = "" // refused without the record: write as if new, and learn it
		wk.retryAt = now.Add(l.Config().RetryMin)
	default:
		wk.retryAt = now.Add(l.Config().RetryMax)
		if op == wakeRead {
			wk.read = true // no one to wake: the waiters' polls find the lock free
		}
	}
	if f := l.fair; f != nil && !f.gone && !f.inFlight && f.next.IsZero() {
		f.next = now // a queue step waited for this call
	}
}

// wakeDue returns the end of the backoff after a failed call on the wake
// record, while one is wanted and can be sent; zero if none. (after sends
// the calls not held back; a queue call's answer runs after.)
func (l *Lock) wakeDue() time.Time {
	wk := l.wk
	if wk == nil || wk.op != 0 || l.queueBusy() || wk.retryAt.IsZero() || !((wk.unlock && !wk.read) || l.wantRegister()) {
		return time.Time{}
	}
	return wk.retryAt
}

// wakeTarget is the waiter to wake, once our release is confirmed: its
// address, and its ID for the log. "" if none.
func (l *Lock) wakeTarget() (addr, id string) {
	if l.wk == nil {
		return "", ""
	}
	return l.wk.target, l.wk.targetID
}
