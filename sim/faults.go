package sim

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/lease"
)

// Scenario actions on the world around the instances: the record lost or
// restored, a node cut off, its clock stepped or its rate changed, the
// wake-ups on their way; and hooks, which arm an action on an instance's
// next step. Once heal has run, they inject nothing more.

// loseRecord deletes the lease record, as an operator, a TTL attribute or
// a lifecycle rule would, or a store that lost its data.
func (w *world) loseRecord() {
	s := w.store
	if w.healed {
		return
	}
	if !s.exists {
		w.fault("", "no lease record to lose")
		return
	}
	if w.user != nil {
		w.user.lost = true
	}
	w.fault("", "the lease record (token %d) vanishes", s.rec.Token)
	s.replaced()
	s.exists, s.rec, s.ver, s.lostAt = false, lease.Record{}, lease.NoVersion, w.now
	w.chk.stats.Losses++
}

// restoreRecord writes back an older record, as a restored backup or a
// careless tool would: frac picks it among the records the store kept (the
// released ones, if released and there are any).
func (w *world) restoreRecord(frac float64, released bool) {
	s := w.store
	if w.healed {
		return
	}
	if w.user != nil {
		w.user.lost = true
	}
	pool := s.history
	if released {
		var rel []lease.Record
		for _, r := range s.history {
			if r.Released {
				rel = append(rel, r)
			}
		}
		if len(rel) > 0 {
			pool = rel
		}
	}
	if len(pool) == 0 {
		w.fault("", "no older record to write back")
		return
	}
	old := pool[min(int(frac*float64(len(pool))), len(pool)-1)]
	s.replaced()
	s.verN++
	s.ver = lease.Version("v" + strconv.Itoa(s.verN))
	s.rec, s.exists, s.lostAt = old.Clone(), true, w.now
	w.chk.stats.Losses++
	flags := ""
	if old.Released {
		flags = ", released"
	}
	w.fault("", "an older record is written back: %s token %d%s", old.Holder, old.Token, flags)
}

// clockTokens: Machines mint every takeover's token from the wall clock,
// as tenure does on a Lossy store.
func (w *world) clockTokens() bool { return w.plan.Lossy && !w.opt.plainTokens }

// failover models a Lossy store's failover (a Redis primary that dies
// before its replica had its latest writes): every node is cut off from
// the store for down, and the store comes back as it was lose ago, with
// that state's version; the writes since are lost.
func (w *world) failover(lose, down time.Duration) {
	s := w.store
	if w.healed {
		return
	}
	from, lost := w.now-lose, 0
	var back *pastState
	for i := range s.journal {
		if s.journal[i].until > from {
			if back == nil {
				back = &s.journal[i]
			}
			lost++
		}
	}
	for _, n := range w.nodes {
		w.cutOff(n, true)
	}
	w.at(w.now+down, nil, func() {
		for _, n := range w.nodes {
			w.cutOff(n, false)
		}
	})
	if back == nil {
		w.fault("", "a failover loses no write (none in the last %v)", lose)
		return
	}
	b := *back
	s.replaced()
	s.exists, s.rec, s.ver, s.lostAt = b.exists, b.rec.Clone(), b.ver, w.now
	w.chk.stats.Losses++
	if w.user != nil {
		w.user.lost = true
	}
	if b.exists {
		w.fault("", "a failover loses the last %d writes: the record is back at %s, %s token %d", lost, b.ver, b.rec.Holder, b.rec.Token)
	} else {
		w.fault("", "a failover loses the last %d writes: the record is gone", lost)
	}
}

// cutOff partitions n from the store (both ways) or heals it.
func (w *world) cutOff(n *node, on bool) {
	if n.cut == on || on && w.healed {
		return
	}
	n.cut = on
	if on {
		n.cutAt, w.upset = w.now, w.now
		w.fault(n.Name, "cut off from the store")
		if w.tl != nil {
			w.tl.cutStart(n, w.now)
		}
	} else {
		w.upset = w.now
		w.fault(n.Name, "reconnected to the store")
		if w.tl != nil {
			w.tl.cutEnd(n, w.now)
		}
	}
}

// stepWall sets n's wall clock by d; only the naive strategy reads it.
func (w *world) stepWall(n *node, d time.Duration) {
	if w.healed {
		return
	}
	n.clk.wall += d
	w.fault(n.Name, "wall clock stepped by %v", d)
	if w.tl != nil {
		w.tl.step(n, w.now, d)
	}
}

// rate sets n's clock rate error, in parts per billion, from now on. After
// heal only rates within the node's bound are taken.
func (w *world) rate(n *node, ppb int64) {
	if bound := ppbOf(n.spec.maxDrift()); w.healed && (ppb > bound || ppb < -bound) {
		return
	}
	n.spec.PPB = ppb
	if cur := n.cur; cur != nil && cur.frozen {
		return // applied on resume
	}
	w.setRate(n, ppb)
	w.fault(n.Name, "clock rate %+dppm", ppb/1000)
}

// heal ends every fault: the store is healthy again, no node is cut off or
// paused, clocks drift within the bound, and every node runs a process.
func (w *world) heal() {
	w.fault("", "heal: faults end")
	w.healed = true
	w.triggers = nil // a pause armed for the next check would come after
	w.store.lat, w.store.f = healthyLatency, faults{}
	for _, n := range w.nodes {
		w.cutOff(n, false)
		if cur := n.cur; cur != nil && cur.paused {
			w.resume(cur)
		}
		if bound := ppbOf(n.spec.maxDrift()); n.spec.PPB > bound || n.spec.PPB < -bound {
			w.rate(n, max(min(n.spec.PPB, bound), -bound))
		}
		if n.cur == nil || !n.cur.live() {
			w.restart(n, false)
		}
	}
}

// hooks: one-shot triggers that scenarios arm to act at a precise point.
type hook uint8

const (
	hookCheck       hook = iota + 1 // the instance checked its term before acting
	hookRenewalSent                 // the instance sent a renewal
	hookRenewed                     // the instance received a successful renewal's answer
)

type trigger struct {
	in *instance
	on hook
	f  func()
}

// arm runs f, as an event at the same instant, the next time in reaches on.
func (w *world) arm(in *instance, on hook, f func()) {
	w.triggers = append(w.triggers, trigger{in: in, on: on, f: f})
}

func (w *world) hook(on hook, in *instance) {
	for i := 0; i < len(w.triggers); i++ {
		if t := w.triggers[i]; t.on == on && t.in == in {
			w.triggers = slices.Delete(w.triggers, i, i+1)
			w.at(w.now, nil, t.f)
			return
		}
	}
}

// A real-tier process hears the messages of the wake-up network as they
// are sent: tenure's own.
type hearer interface{ hear(msg string) }

// Wake-up messages as tenure sends them (internal/shell).
var (
	wakePrefix   = shell.WakeMsg("")
	noticePrefix = shell.NoticeMsg("")
)

// sendMsg sends msg, a message of tenure's, from in to the instance with
// ID to, over the network of Plan.Wake: a wake-up (which names its lock,
// or the lease) or a renewal notice, staged by the process that sends it.
func (w *world) sendMsg(from *instance, to, msg string) {
	lock, _ := strings.CutPrefix(msg, wakePrefix)
	w.send(from, to, strings.HasPrefix(msg, noticePrefix), lock, msg)
}

func (w *world) send(from *instance, to string, notice bool, lock, msg string) {
	var target *instance
	for _, o := range w.liveInstances() {
		if o.ID == to {
			target = o
		}
	}
	wf := w.plan.Wake
	what := "wake-up"
	if notice {
		what = "renewal notice"
		w.chk.stats.NoticesSent++
	} else {
		w.chk.stats.WakesSent++
	}
	var delays []time.Duration
	if target != nil {
		delays = w.delays(wf)
	}
	if delays == nil {
		if notice {
			w.chk.stats.NoticesLost++
		} else {
			w.chk.stats.WakesLost++
		}
		w.trace(from, line{what: mFault, text: what + " to " + to + " lost"})
		return
	}
	for _, d := range delays {
		w.at(w.now+d, target, func() {
			switch rt := target.rt.(type) {
			case *fastRun:
				if notice {
					rt.noticedMsg(msg)
				} else {
					rt.woken()
				}
			case *lockClient:
				rt.woken(lock)
			case *groupMember:
				rt.woken(lock)
			case hearer:
				rt.hear(msg)
			}
		})
	}
}

// delays draws what a network with faults wf does to one message: nil
// if it is lost, else when each copy arrives from now (one, or two when
// duplicated), at the store's latency and maybe delayed.
func (w *world) delays(wf *wakeFaults) []time.Duration {
	if chance(w.rng, wf.LossPPM) {
		return nil
	}
	copies := 1
	if chance(w.rng, wf.DupPPM) {
		copies = 2
	}
	ds := make([]time.Duration, copies)
	for i := range ds {
		ds[i] = w.store.lat.draw(w.rng)
		if chance(w.rng, wf.DelayPPM) {
			ds[i] += uniform(w.rng, time.Millisecond, max(wf.DelayMax, time.Millisecond))
		}
	}
	return ds
}

// endBrownout restores the store's planned behaviour, unless heal came first.
func (w *world) endBrownout() {
	w.fault("", "store brownout ends")
	if !w.healed {
		w.store.lat, w.store.f = w.plan.Latency, w.plan.Faults
	}
}
