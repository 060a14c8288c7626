package tenure

import (
	"context"
	"log/slog"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// wakeMsg is a wake-up for the lease: the message names it, so that a
// wake-up meant for another lease on the same address is ignored.
func wakeMsg(lease string) string { return "tenure wake " + lease }

// noticeMsg is a renewal notice for the lease: its leader has just renewed.
func noticeMsg(lease string) string { return "tenure renewed " + lease }

// newRun makes the run's entries (engine.Run): the lease's, and the
// standby's: with Config.Standby the campaign, with its wake-up listener
// (with WakeAddr, or a Priority); without, a leader's reads of the
// standby record, so that it hands over to a preferred standby
// (Config.Priority) and setting Priority on the candidate to prefer is
// enough. A name without room for the record has no standby to find.
func (r *runner) newRun(m driver.Machine) error {
	cfg := &r.c.cfg
	rc := engine.RunConfig{
		Lease: cfg.Lease, ID: cfg.ID, ReleaseTimeout: cfg.ReleaseTimeout, ResignHoldOff: cfg.ResignHoldOff,
		Standby: cfg.Standby, Preference: standby.Preference{Priority: cfg.Priority, HoldOff: cfg.PriorityHoldOff},
	}
	if cfg.Standby {
		addr, err := r.startListener()
		if err != nil {
			return err
		}
		rc.Addr = addr
	}
	if cfg.Standby || lease.ValidateName(cfg.Lease+election.StandbySuffix) == nil {
		sc := cfg.standbyConfig()
		rc.StandbyConfig = &sc
	}
	r.run = engine.NewRun(r.h.Core, r, m, rc)
	r.d = r.run.Driver()
	return nil
}

// startListener listens for wake-ups and renewal notices (with WakeAddr,
// or a Priority) and returns the address to publish; "" for none.
func (r *runner) startListener() (string, error) {
	cfg := &r.c.cfg
	listen := cfg.WakeAddr
	if listen == "" && cfg.Priority != 0 {
		listen = defaultWakeAddr(cfg.Store) // a preferred standby must be woken to be first at the release
	}
	if listen == "" || listen == NoWake {
		return "", nil
	}
	conn, addr, err := wakeNet(cfg.Store).Listen(listen, cfg.WakeAdvertise)
	if err != nil && cfg.WakeAddr != "" {
		return "", err
	}
	if err != nil { // not asked for: go on without, as with NoWake
		r.log(slog.LevelWarn, "no wake-ups: a hand-over's release is found at the next poll (set WakeAddr)", "err", err)
		return "", nil
	}
	r.conn = conn
	r.notices = newSender(conn, 1, r.log)
	r.h.Go(r.listen)
	r.h.Go(func() { r.notices.run(r.h.Quit()) })
	r.log(slog.LevelInfo, "listening for wake-ups", "addr", conn.Addr(), "advertised", addr)
	return addr, nil
}

// listen passes wake-ups and renewal notices for this lease to the loop
// until the listener is closed. Anything else that arrives is dropped.
func (r *runner) listen() {
	wake, notice := wakeMsg(r.c.cfg.Lease), noticeMsg(r.c.cfg.Lease)
	buf := make([]byte, max(len(wake), len(notice))+1)
	for {
		n, err := r.conn.Recv(buf)
		if err != nil {
			return // closed
		}
		var f func()
		switch string(buf[:n]) {
		case wake:
			f = r.wake
		case notice:
			f = r.noticed(lease.NoVersion) // a notice does not say which
		default:
			continue
		}
		if !r.h.Do(f) {
			return // the run is over
		}
	}
}

// noticed returns what takes a renewal notice of version v (NoVersion:
// unknown): the Machine rate-limits it.
func (r *runner) noticed(v lease.Version) func() { return func() { r.run.Noticed(v) } }

// wake takes a wake-up: read the lease now, within the rate limit.
func (r *runner) wake() {
	if !r.readWoken() {
		r.log(slog.LevelDebug, "wake-up dropped: over the rate limit")
	}
}

// readWoken reads the lease now for a wake-up, and reports whether it did:
// not over the rate limit, nor without a standby campaign.
func (r *runner) readWoken() bool {
	if !r.run.Woken() {
		return false
	}
	if o := r.c.obs; o != nil {
		o.Woken()
	}
	r.log(slog.LevelDebug, "woken: reading the lease")
	return true
}

// Notice queues a renewal notice to addr, dropping it if the one before
// is still on its way: the loop never waits on the network. Where the
// store's change feed tells of each renewal, it sends none.
func (r *runner) Notice(addr string) {
	if r.notices != nil && !r.feedNotices() {
		r.notices.send(addr, noticeMsg(r.c.cfg.Lease))
	}
}

// wakeStandby reads the standby's record now, and sends its holder a
// wake-up once released is closed: once the lease given back is
// confirmed. It gives up if the run ends first without that.
func (r *runner) wakeStandby(released <-chan struct{}) {
	cfg := &r.c.cfg
	r.h.Go(func() {
		// Not cancelled with the run: the release may well be confirmed
		// before this read is answered, and Run waits for it (OpTimeout).
		ctx, cancel := context.WithTimeout(seam.WakeRead(context.WithoutCancel(r.runCtx)), cfg.OpTimeout)
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
		if err := wakeNet(cfg.Store).Send(addr, []byte(wakeMsg(cfg.Lease))); err != nil {
			r.log(slog.LevelDebug, "wake-up not sent", "standby", rec.Holder, "err", err)
			return
		}
		r.log(slog.LevelDebug, "woke the standby", "standby", rec.Holder, "addr", addr)
	})
}
