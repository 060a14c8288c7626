package tenure

import (
	"log/slog"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
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
	r.g = engine.NewCandidate(r.h.Core, m, engine.CandidateConfig{
		Run: rc, Payload: cfg.Payload, LeaseDuration: cfg.LeaseDuration, OpTimeout: cfg.OpTimeout, Margin: cfg.Margin,
		Parent: r.runCtx, Clock: cfg.Clock, Logger: cfg.Logger, Meter: r.c.ms, Observer: r.c.obs,
		Ended: func(lease string, token fencing.Token, reason election.Reason) error {
			return &TermEndedError{Lease: lease, Token: token, Reason: reason}
		},
		OnElected: cfg.Callbacks.OnElected != nil, OnDemoted: cfg.Callbacks.OnDemoted != nil, OnLeaderChange: cfg.Callbacks.OnLeaderChange != nil,
	}, r)
	r.run = r.g.Run()
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
			f = func() { r.g.Woken() }
		case notice:
			f = func() { r.g.Noticed(lease.NoVersion) } // a notice does not say which
		default:
			continue
		}
		if !r.h.Do(f) {
			return // the run is over
		}
	}
}
