package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// groupFlags are run's flags for a group (--group).
type groupFlags struct {
	name          string
	shards        int
	weight        int
	wake          string
	wakeAdvertise string
	strongPolls   bool
	watch         bool
}

// runGroup runs `tenure run --group NAME --shards N -- COMMAND`: one
// child per shard this member holds, each under its own supervisor, with
// the shard in its environment, stopped when the shard moves away.
func runGroup(c *holder, gf groupFlags, argv []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, log, tel, status := c.setUp(ctx, stderr)
	if store == nil {
		return status
	}
	defer tel.close()
	r := &groupRunner{argv: argv, shards: gf.shards, grace: c.grace, jeopardySig: c.jeopardySig, log: log, stdout: stdout, stderr: stderr,
		ending: ending{cancel: cancel}, child: tel.child, running: map[*signals]struct{}{}}
	g, err := tenure.NewGroup(tenure.GroupConfig{
		Store: store, Name: gf.name, Shards: gf.shards, Weight: gf.weight, Timing: tenure.Timing{LeaseDuration: c.lease},
		Runtime:     tenure.Runtime{ID: c.id, WakeAddr: gf.wake, WakeAdvertise: gf.wakeAdvertise, Logger: c.libLogger(log), MeterProvider: tel.mp},
		StrongPolls: gf.strongPolls, Watch: gf.watch,
		OnAssigned: r.assigned,
	})
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %s\n", bare(err))
		return exitUsage
	}
	r.id = g.ID()
	tel.setProbes(g.Handler())
	fmt.Fprintf(stderr, "tenure run: joining group %q (%d shards) in %s as %q\n", gf.name, gf.shards, storeurl.Redact(c.store), g.ID())
	r.early = warnGrace(log, c.lease, c.grace)
	stopSignals := r.signals()
	defer stopSignals()
	go func() {
		t := time.NewTimer(startupWait(c.lease))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			if g.LastAnswer().IsZero() {
				fmt.Fprintf(stderr, "tenure run: store %s: no answer within %v (check --store, the network and the credentials): %v\n", storeurl.Redact(c.store), startupWait(c.lease), g.Status().Err)
				r.finish(exitUnavailable)
			}
		}
	}()
	shedStartupPages() // set up: what the group touches from here on maps back in
	err = g.Run(ctx)
	switch {
	case errors.Is(err, lease.ErrPermanent), errors.Is(err, lease.ErrInvalidRecord):
		return c.storeFailed("tenure run", err, stderr)
	case err != nil:
		fmt.Fprintf(stderr, "tenure run: %s\n", bare(err))
		return exitUnavailable
	}
	return r.exitStatus()
}

// groupCommand checks run's flags for a group, and runs it.
func groupCommand(fs *flag.FlagSet, c *holder, gf groupFlags, argv []string, stdout, stderr io.Writer) int {
	const want = "want --group NAME --shards N [flags] -- COMMAND [ARGS...]"
	switch {
	case gf.name == "":
		usageError(fs, stderr, "--shards, --weight and --watch go with --group: %s", want)
		return exitUsage
	case len(argv) == 0:
		usageError(fs, stderr, "no command: %s", want)
		return exitUsage
	case fs.NArg() > 0:
		usageError(fs, stderr, "unexpected %q before \"--\": with --group, the group's name is --group's: %s", fs.Arg(0), want)
		return exitUsage
	case gf.shards < 1 || gf.shards > 4096:
		fmt.Fprintf(stderr, "tenure run: --shards %d: want 1 to 4096, the same on every member\n", gf.shards)
		return exitUsage
	case gf.weight < 1 || gf.weight > 9999:
		fmt.Fprintf(stderr, "tenure run: --weight %d: want 1 to 9999\n", gf.weight)
		return exitUsage
	}
	for _, f := range []string{"on-exit", "on-lost", "max-restarts", "standby", "cold-poll", "priority", "priority-hold-off", "payload"} {
		if isSet(fs, f) {
			fmt.Fprintf(stderr, "tenure run: --%s does not go with --group: a shard's command runs again when it exits, while the shard is held, and stops when the shard moves\n", f)
			return exitUsage
		}
	}
	if err := tenure.ValidateName(gf.name); err != nil {
		fmt.Fprintf(stderr, "tenure run: --group: %v\n", err)
		return exitUsage
	}
	if !c.check(fs, stderr) {
		return exitUsage
	}
	if !commandFound("tenure run", argv, stderr) {
		return exitNoCommand
	}
	return runGroup(c, gf, argv, stdout, stderr)
}

// groupRunner runs a group member's children.
type groupRunner struct {
	argv           []string
	id             string
	shards         int
	grace, early   time.Duration
	jeopardySig    os.Signal
	log            *slog.Logger
	stdout, stderr io.Writer
	child          *childMetrics
	ending

	mu      sync.Mutex            // guards running
	running map[*signals]struct{} // each running child's signals
}

// signals takes tenure's signals: one that stops tenure leaves the group
// (each child is stopped as its shard is handed over); one that a command
// takes while it runs (HUP, USR1, USR2) goes to every child.
func (r *groupRunner) signals() (stop func()) {
	ch := make(chan os.Signal, 4)
	notifyGroup(ch)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				if !passOn(sig) {
					r.log.Debug("leaving the group", "signal", sig)
					r.finish(0)
					continue
				}
				r.mu.Lock()
				for s := range r.running {
					s.mu.Lock()
					if s.cur != nil {
						select {
						case s.cur <- sig:
						default:
						}
					}
					s.mu.Unlock()
				}
				r.mu.Unlock()
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// assigned runs the command for a shard's term: again after it exits (a
// pause that doubles from 1s to 30s after runs shorter than 30s), until the
// term ends; then it is stopped (SIGTERM, SIGKILL after --grace, or at
// once past the deadline) before the shard is released.
func (r *groupRunner) assigned(ctx context.Context, s tenure.Shard) {
	var b backoff
	for ctx.Err() == nil {
		r.log.Info("shard assigned: starting the command", "shard", s.ID, "token", s.Token)
		env := append(childEnv(s.Lease, r.id, uint64(s.Token)), "TENURE_GROUP="+s.Group, "TENURE_SHARD="+strconv.Itoa(s.ID), "TENURE_SHARDS="+strconv.Itoa(r.shards))
		c, err := startChild(r.argv, env, r.stdout, r.stderr, r.early, r.grace)
		if err != nil {
			fmt.Fprintf(r.stderr, "tenure run: %v\n", err)
			r.finish(exitNoCommand)
			return
		}
		r.child.started()
		started := time.Now()
		sigs := &signals{}
		r.mu.Lock()
		r.running[sigs] = struct{}{}
		r.mu.Unlock()
		deadline := func() time.Time {
			if ctx.Err() != nil {
				return time.Time{}
			}
			d, _ := tenure.DeadlineOf(ctx)
			return d
		}
		// A shard handed over (a rebalance) or given back at shutdown is
		// routine (supervise says so at info); one lost is worth a warning.
		logf := func(level slog.Level, format string, args ...any) {
			r.log.Log(context.Background(), level, fmt.Sprintf(format, args...), "shard", s.ID, "token", s.Token)
		}
		out := supervise(ctx, deadline, c, r.early, r.grace, sigs, r.jeopardySig, logf)
		r.mu.Lock()
		delete(r.running, sigs)
		r.mu.Unlock()
		status := c.status()
		r.child.exited(status)
		if out != exited {
			return
		}
		ran := time.Since(started)
		pause := b.next(ran)
		r.log.Warn("the command exited: running it again while the shard is held", "shard", s.ID, "status", status,
			"ran", ran.Round(time.Millisecond).String(), "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}
