package tenure

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// sbRun is the standby side of one Run (Config.Standby): the host's entry
// for the standby campaign (internal/standby), and the wake-up listener.
// The runner's loop owns it.
type sbRun struct {
	host.Slot
	r      *runner
	s      *standby.Standby
	flight *host.Flight // the call in flight
	cold   bool         // what the lease's Machine was last told
	hot    bool         // what the campaign says now
	// hotSince: when this candidate became the standby (zero: it is not);
	// toldUnled: a preferred standby said it has not been handed the
	// lease.
	hotSince  time.Time
	toldUnled bool
	// watch: no campaign (Config.Standby off), only the leader's reads of
	// the record (standby.NewWatch), for preferred standbys.
	watch bool

	conn    net.PacketConn // the wake-up listener; nil without WakeAddr
	notices *sender        // renewal notices, one queued at most
}

// wakeMsg is a wake-up for the lease: the message names it, so that a
// wake-up meant for another lease on the same address is ignored.
func wakeMsg(lease string) string { return "tenure wake " + lease }

// noticeMsg is a renewal notice for the lease: its leader has just renewed.
func noticeMsg(lease string) string { return "tenure renewed " + lease }

// startStandby listens for wake-ups (with WakeAddr, or a Priority) and
// makes the standby campaign; the lease's Machine starts cold.
func (r *runner) startStandby() error {
	cfg := &r.c.cfg
	sb := &sbRun{r: r}
	addr, listen := "", cfg.WakeAddr
	if listen == "" && cfg.Priority != 0 {
		listen = defaultWakeAddr(cfg.Store) // a preferred standby must be woken to be first at the release
	}
	var conn net.PacketConn
	if listen != "" && listen != NoWake {
		var err error
		conn, addr, err = listenWake(listen, cfg.WakeAdvertise)
		if err != nil && cfg.WakeAddr != "" {
			return err
		}
		if err != nil { // not asked for: go on without, as with NoWake
			r.log(slog.LevelWarn, "no wake-ups: a hand-over's release is found at the next poll (set WakeAddr)", "err", err)
		}
	}
	if conn != nil {
		sb.conn = conn
		sb.notices = newSender(conn, 1, r.log)
		r.h.Go(sb.listen)
		r.h.Go(func() { sb.notices.run(r.h.Quit()) })
		r.log(slog.LevelInfo, "listening for wake-ups", "addr", conn.LocalAddr().String(), "advertised", addr)
	}
	sb.s = standby.New(sb, cfg.Lease, cfg.standbyConfig(), addr, standby.Preference{Priority: cfg.Priority, HoldOff: cfg.PriorityHoldOff})
	r.sb = sb
	r.d.SetCold(true)
	sb.cold = true
	return nil
}

// startWatch makes a leader without Standby read the standby record, as
// a standby's leader does, so that it hands over to a preferred standby
// (Config.Priority): setting Priority on the candidate to prefer is then
// enough. No campaign, no listener, no notices; the lease's Machine keeps
// its hot polls. A name without room for the record has no standby to
// find.
func (r *runner) startWatch() {
	cfg := &r.c.cfg
	if lease.ValidateName(cfg.Lease+election.StandbySuffix) != nil {
		return
	}
	sb := &sbRun{r: r, watch: true, cold: true} // cold: never the standby, the Machine untold
	sb.s = standby.NewWatch(sb, cfg.Lease, cfg.standbyConfig(), standby.Preference{Priority: cfg.Priority, HoldOff: cfg.PriorityHoldOff})
	r.sb = sb
}

// listen passes wake-ups and renewal notices for this lease to the loop
// until the listener is closed. Anything else that arrives is dropped.
func (sb *sbRun) listen() {
	wake, notice := wakeMsg(sb.r.c.cfg.Lease), noticeMsg(sb.r.c.cfg.Lease)
	buf := make([]byte, max(len(wake), len(notice))+1)
	for {
		n, _, err := sb.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		var f func()
		switch string(buf[:n]) {
		case wake:
			f = sb.wake
		case notice:
			f = sb.r.d.Notice // rate-limited by the Machine
		default:
			continue
		}
		if !sb.r.h.Do(f) {
			return // the run is over
		}
	}
}

// notice queues a renewal notice to addr, dropping it if the one before is
// still on its way: the loop never waits on the network.
func (sb *sbRun) notice(addr string) { sb.notices.send(addr, noticeMsg(sb.r.c.cfg.Lease)) }

// wake takes a wake-up: read the lease now, within the rate limit.
func (sb *sbRun) wake() {
	if sb.s.AllowWake(sb.Now()) {
		sb.r.log(slog.LevelDebug, "woken: reading the lease")
		sb.r.d.Hint()
		return
	}
	sb.r.log(slog.LevelDebug, "wake-up dropped: over the rate limit")
}

// apply tells the lease's Machine whether this candidate is the standby,
// outside the driver's step.
func (sb *sbRun) apply() {
	if cold := !sb.hot; cold != sb.cold {
		sb.cold = cold
		sb.r.d.SetCold(cold)
		sb.r.c.mu.Lock()
		sb.r.c.status.Standby = sb.hot
		sb.r.c.mu.Unlock()
	}
}

// Due, Fire and CallDone make the campaign the host's entry.
func (sb *sbRun) Due() time.Time     { return sb.s.Due() }
func (sb *sbRun) Fire(now time.Time) { sb.s.Fire(now) }
func (sb *sbRun) CallDone(f *host.Flight, res election.Result) {
	if f == sb.flight {
		sb.flight = nil
	}
	sb.s.Result(res)
}

// close stops the listener.
func (sb *sbRun) close() {
	if sb.conn != nil {
		_ = sb.conn.Close()
	}
}

// The standby.Host of a Run.

func (sb *sbRun) Now() time.Time { return sb.r.c.cfg.Clock.Now() }

func (sb *sbRun) Call(op election.Op) {
	sb.flight = sb.r.h.Call(sb, 0, sb.r.c.cfg.Lease+election.StandbySuffix, op, 0)
}

func (sb *sbRun) Cancel() {
	sb.r.h.Cancel(sb.flight)
	sb.flight = nil
}

func (sb *sbRun) Log(level slog.Level, msg string, args ...any) { sb.r.log(level, msg, args...) }

func (sb *sbRun) Hot(hot bool) {
	sb.hot = hot
	sb.hotSince = time.Time{}
	if hot {
		sb.hotSince = sb.Now()
	}
	if hot {
		sb.r.log(slog.LevelInfo, "standby: reading the lease every PollInterval")
	} else {
		sb.r.log(slog.LevelInfo, "standby no more: reading every ColdPollInterval")
	}
}

func (sb *sbRun) Reschedule() {} // the runner fixes its entries after every event

// unled says, once, why a preferred standby has not led for three
// hold-offs while another leads: a leader hands over only if it looks for
// a preferred standby, which it does with Standby or a Priority of its
// own. Called after every step of the lease.
func (sb *sbRun) unled(now time.Time, leading bool, leader string) {
	cfg := &sb.r.c.cfg
	if cfg.Priority <= 0 || leading || sb.hotSince.IsZero() || leader == "" || leader == cfg.ID {
		return
	}
	if wait := 3 * cfg.PriorityHoldOff; !sb.toldUnled && now.Sub(sb.hotSince) >= wait {
		sb.toldUnled = true
		sb.r.log(slog.LevelWarn, "preferred, but not handed the lease: the leader has not handed over in three hold-offs; one of equal or higher priority never does, nor one that cannot read this candidate's standby record (see its store errors), nor an older tenure, which handed over only with Standby",
			"priority", cfg.Priority, "leader", leader, "standby for", now.Sub(sb.hotSince).Round(time.Second).String())
	}
}

// HandOver gives the lease back for the standby, whose priority is higher,
// and wakes it once the release is confirmed. Priority decides only this,
// and who is woken: never who may take the lease, or when.
func (sb *sbRun) HandOver(holder string, priority int) {
	r := sb.r
	if r.d.Stopping() {
		return // the release under way wakes the standby
	}
	r.log(slog.LevelInfo, "handing the lease over to a candidate of higher priority", "standby", holder, "priority", priority, "ours", r.c.cfg.Priority)
	r.planWake()
	r.handing = true
	r.d.HandOver(r.c.cfg.ResignHoldOff)
}

// wakeStandby reads the standby's record now, and sends its holder a
// wake-up once released is closed: once the lease given back is
// confirmed. It gives up if the run ends first without that.
func (r *runner) wakeStandby(released <-chan struct{}) {
	cfg := &r.c.cfg
	r.h.Go(func() {
		// Not cancelled with the run: the release may well be confirmed
		// before this read is answered, and Run waits for it (OpTimeout).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.runCtx), cfg.OpTimeout)
		rec, _, err := cfg.Store.Get(ctx, cfg.Lease+election.StandbySuffix)
		cancel()
		addr, _ := standby.Parse(rec.Payload)
		if err != nil || rec.Released || rec.Holder == cfg.ID || addr == "" {
			r.log(slog.LevelDebug, "no standby to wake", "holder", rec.Holder, "released", rec.Released, "err", err)
			return
		}
		select {
		case <-released:
		case <-r.h.Quit():
			select {
			case <-released:
			default:
				return
			}
		}
		conn, err := net.Dial("udp", addr)
		if err != nil {
			r.log(slog.LevelDebug, "wake-up not sent", "standby", rec.Holder, "err", err)
			return
		}
		_, err = conn.Write([]byte(wakeMsg(cfg.Lease)))
		_ = conn.Close()
		r.log(slog.LevelDebug, "woke the standby", "standby", rec.Holder, "addr", addr, "err", err)
	})
}
