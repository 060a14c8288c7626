package sim

import (
	"strconv"

	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// Semaphores: in a scenario whose lockPlan has Slots, each name is a
// semaphore of that many slots, and a lock client's call is a
// lockcore.Sem under the engine, as tenure.Locker's calls with Slots. The
// checker holds each slot to I1 and I2 as a lock, and each name to at most
// n holders in belief, for the n of every one of them (callers may
// disagree on n, and the count record that fixes it may be lost:
// loseCount).

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
