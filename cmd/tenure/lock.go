package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

const lockUsage = `usage: tenure lock [flags] NAME -- COMMAND [ARGS...]

Takes the lock NAME, runs COMMAND once under it, and gives the lock back
when COMMAND exits. With --wait 0 it gives up at once if another process
holds the lock.

With --once-per DURATION, the lock is that of the current wall-clock slot
of that length (aligned to the Unix epoch: 5m slots start at :00, :05...),
named NAME/ and the slot's start; it is not given back when COMMAND exits
but kept until the slot ends, so every replica whose cron fires later in
the same slot finds it taken and exits quietly (status 79). This is the
crontab recipe: the same line on every replica runs the job once per slot.
It assumes the replicas' clocks agree within a slot; beyond that a slot
may run twice or not at all. A replica that crashes mid-job leaves its slot
taken: at most once, not at least once.
COMMAND gets TENURE_NAME, TENURE_TOKEN (the lock's fencing token) and
TENURE_HOLDER in its environment, in a process group of its own, under a
supervisor that kills everything COMMAND started when COMMAND exits or
tenure dies (kill -9 included), and at the lock's deadline. If the lock is
lost while COMMAND runs (its renewals failed), COMMAND's tree gets SIGTERM,
then SIGKILL after --grace; the stop begins --grace before the lock's
deadline. --on-jeopardy SIGNAL sends COMMAND that signal as soon as a
renewal fails, as for run. Signals to tenure are passed on as for run:
SIGINT, SIGTERM and SIGQUIT to COMMAND's group, and they stop it; SIGHUP,
SIGUSR1 and SIGUSR2 to COMMAND itself, and it keeps running.

With --slots N, NAME is a semaphore of N slots: up to N processes run
COMMAND at once, each holding one slot, and COMMAND also gets TENURE_SLOT
(0 to N-1); TENURE_TOKEN is that slot's token. Every process taking NAME
must give the same N (the first fixes it in NAME::slots; another is
refused, status 2). --wait 0 reports every slot's holder when all are
taken. Each waiter reads the N slots every poll.

With --wake ADDR, tenure listens for wake-ups on that UDP address: while it
waits it names itself in the lock's wake record (NAME::wake), and when it
gives the lock back it wakes the waiter named there, which takes the lock
in a few round trips instead of up to a poll. Give it to every process that
takes the lock; a wake-up only makes a waiter read sooner.

exit status: COMMAND's (128+N if signal N killed it); 75 when another
process held the lock for all of --wait; 79 with --once-per when another
replica took the slot (--conflict-exit sets either); 76 when the lock was
lost while COMMAND ran; 69 when the store refuses for good; 2 for bad
flags or configuration.

examples:
  */5 * * * * tenure lock --once-per 5m nightly -- ./job.sh     # crontab, on every replica
  tenure lock --wait 30s --store 'dynamodb://leases?region=eu-west-1' migrate -- ./migrate.sh
  tenure lock --fair deploy -- ./deploy.sh                  # first come, first served
  tenure lock --wake 10.0.0.5:0 --fair deploy -- ./deploy.sh  # handed over in milliseconds
  tenure lock --slots 3 --fair encoder -- ./encode.sh        # at most 3 at once, in turn
`

// waitFlag is --wait: a duration, or "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		w.forever = true
		return nil
	}
	d, err := time.ParseDuration(s)
	if s == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return fmt.Errorf("want 0, a duration such as 30s, or forever")
	}
	w.d, w.forever = d, false
	return nil
}

// lockCommand implements "tenure lock".
func lockCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure lock", lockUsage, stderr)
	var c holder
	c.register(fs)
	wait := &waitFlag{forever: true}
	fs.Var(wait, "wait", "how long to wait for the lock: 0 (give up at once), a duration, or forever")
	fair := fs.Bool("fair", false, "wait in first-come order among fair waiters")
	oncePer := fs.Duration("once-per", 0, "run COMMAND at most once per wall-clock slot of this length (whole seconds, up to 24h), across replicas: never waits")
	quiet := fs.Bool("quiet", false, "say nothing when another holds the lock (cron mails no one)")
	conflictExit := &statusFlag{v: -1}
	fs.Var(conflictExit, "conflict-exit", "exit `status` when another holds the lock or took the slot (default 75, or 79 with --once-per)")
	wake := fs.String("wake", "", "listen for wake-ups on this UDP address, e.g. 10.0.0.5:7946 or 127.0.0.1:0: woken on release, a waiter takes the lock in a few round trips")
	wakeAdvertise := fs.String("wake-advertise", "", "the address others send wake-ups to, if not --wake's (NAT, containers)")
	slots := fs.Int("slots", 0, "take one of this many slots of NAME, a semaphore: at most this many hold it at once (1 to 64)")
	before, argv := splitArgs(args)
	if ok, status := parseFlags(fs, before, stderr); !ok {
		return status
	}
	name, ok := nameAndCommand(fs, argv, stderr)
	if !ok || !c.check(fs, stderr) {
		return exitUsage
	}
	if conflictExit.v > 255 || conflictExit.v < -1 {
		fmt.Fprintf(stderr, "tenure lock: --conflict-exit %d: want a status from 0 to 255\n", conflictExit.v)
		return exitUsage
	}
	conflict := exitLocked
	switch {
	case *oncePer == 0 && !isSet(fs, "once-per"):
	case *oncePer < time.Second || *oncePer > 24*time.Hour || *oncePer%time.Second != 0:
		fmt.Fprintf(stderr, "tenure lock: --once-per %v: want a whole number of seconds from 1s to 24h\n", *oncePer)
		return exitUsage
	case *fair:
		fmt.Fprintln(stderr, "tenure lock: --once-per and --fair do not go together: a slot is never waited for")
		return exitUsage
	case *slots != 0:
		fmt.Fprintln(stderr, "tenure lock: --once-per and --slots do not go together")
		return exitUsage
	}
	if isSet(fs, "slots") && (*slots < 1 || *slots > tenure.MaxSlots) {
		fmt.Fprintf(stderr, "tenure lock: --slots %d: want 1 to %d\n", *slots, tenure.MaxSlots)
		return exitUsage
	}
	if *slots != 0 && *wake != "" {
		fmt.Fprintln(stderr, "tenure lock: --slots and --wake do not go together yet: a semaphore's waiters find a free slot by polling")
		return exitUsage
	}
	if *oncePer != 0 {
		if isSet(fs, "wait") && (wait.forever || wait.d != 0) {
			fmt.Fprintln(stderr, "tenure lock: --once-per never waits: drop --wait")
			return exitUsage
		}
		*wait, conflict = waitFlag{}, exitSlotTaken
	}
	if conflictExit.v >= 0 {
		conflict = conflictExit.v
	}
	if !commandFound("tenure lock", argv, stderr) {
		return exitNoCommand
	}
	log := c.logger(stderr, "lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, status := c.open(ctx, "tenure lock", stderr)
	if store == nil {
		return status
	}
	if *oncePer == 0 {
		if msg := kindClash(ctx, store, name, *slots); msg != "" {
			fmt.Fprintf(stderr, "tenure lock: %s\n", msg)
			return exitUsage
		}
	}
	tel, err := newTelemetry(c.metricsAddr, c.serviceName, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tenure lock: %s\n", bare(err))
		return exitUsage
	}
	defer tel.close()
	l, err := tenure.NewLocker(tenure.LockerConfig{
		Store: store, Timing: tenure.Timing{LeaseDuration: c.lease},
		Runtime: tenure.Runtime{ID: c.id, Logger: c.libLogger(log), MeterProvider: tel.mp, WakeAddr: *wake, WakeAdvertise: *wakeAdvertise},
	})
	if err != nil {
		fmt.Fprintf(stderr, "tenure lock: %s\n", bare(err))
		return exitUsage
	}
	defer l.Close()
	tel.setProbes(l.Handler())
	log.Info("locking", "lock", name, "store", storeurl.Redact(c.store), "id", l.ID())
	early := warnGrace(log, c.lease, c.grace)

	// A signal while waiting gives up the wait.
	var stopSig atomic.Int32 // the signal that ended the wait
	sigs := newSignals(func(sig os.Signal) {
		if passOn(sig) {
			return
		}
		if s, ok := sig.(syscall.Signal); ok {
			stopSig.CompareAndSwap(0, int32(s))
		}
		cancel()
	})
	opts := []tenure.LockOption{tenure.WithPayload([]byte(c.payload))}
	if *fair {
		opts = append(opts, tenure.Fair())
	}
	if *oncePer != 0 {
		opts = append(opts, tenure.OncePer(*oncePer))
	}
	if *slots != 0 {
		opts = append(opts, tenure.Slots(*slots))
	}
	shedStartupPages() // set up: what the lock touches from here on maps back in
	// The store must answer within startupWait, or the wait ends.
	unreachable := make(chan struct{})
	go func() {
		t := time.NewTimer(startupWait(c.lease))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			if l.LastAnswer().IsZero() {
				close(unreachable)
				cancel()
			}
		}
	}()
	var h *tenure.Lock
	switch {
	case !wait.forever && wait.d == 0:
		h, err = l.TryLock(ctx, name, opts...)
	case wait.forever:
		h, err = l.Lock(ctx, name, opts...)
	default:
		wctx, wcancel := context.WithTimeout(ctx, wait.d)
		h, err = l.Lock(wctx, name, opts...)
		wcancel()
	}
	if err != nil {
		var le *tenure.LockedError
		switch {
		case isClosed(unreachable):
			fmt.Fprintf(stderr, "tenure lock: store %s: no answer within %v (check --store, the network and the credentials): %v\n", storeurl.Redact(c.store), startupWait(c.lease), err)
			return exitUnavailable
		case stopSig.Load() != 0: // a signal ended the wait
			return 128 + int(stopSig.Load())
		case errors.Is(err, tenure.ErrSlotTaken) && errors.As(err, &le):
			log.Info("the slot was taken: nothing to do", "lock", le.Name, "holder", le.Holder, "token", le.Token)
			return conflict
		case errors.As(err, &le) && le.Holders != nil:
			if !*quiet {
				during := ""
				if le.Err != nil {
					during = " for all of --wait " + wait.String()
				}
				fmt.Fprintf(stderr, "tenure lock: %q: all %d slots were held%s:%s\n", name, len(le.Holders), during, slotList(le.Holders))
			}
			return conflict
		case errors.As(err, &le):
			if !*quiet {
				if le.Err != nil {
					fmt.Fprintf(stderr, "tenure lock: %q was held by %q (token %d) for all of --wait %v\n", name, le.Holder, le.Token, wait)
				} else {
					fmt.Fprintf(stderr, "tenure lock: %q is held by %q (token %d)\n", name, le.Holder, le.Token)
				}
			}
			return conflict
		case errors.Is(err, context.DeadlineExceeded):
			if !*quiet {
				fmt.Fprintf(stderr, "tenure lock: %q was not taken within --wait %v: %v\n", name, wait, err)
			}
			return conflict
		case errors.Is(err, lease.ErrPermanent), errors.Is(err, lease.ErrInvalidRecord):
			return c.storeFailed("tenure lock", err, stderr)
		case errors.As(err, new(*election.FieldError)), errors.Is(err, lease.ErrInvalidName), errors.Is(err, tenure.ErrSlotsMismatch):
			fmt.Fprintf(stderr, "tenure lock: %s\n", bare(err))
			return exitUsage
		}
		fmt.Fprintf(stderr, "tenure lock: %s\n", bare(err))
		return exitUnavailable
	}
	name = h.Name() // with --once-per, the slot's
	log.Info("locked: starting the command", "lock", name, "token", h.Token())
	env := childEnv(name, l.ID(), uint64(h.Token()))
	if *slots != 0 {
		env = append(env, "TENURE_SLOT="+strconv.Itoa(h.Slot()))
		log.Info("holding a slot", "lock", name, "slot", h.Slot(), "of", *slots)
	}
	child, err := startChild(argv, env, stdout, stderr, early, c.grace)
	if err != nil {
		fmt.Fprintf(stderr, "tenure lock: %s\n", bare(err))
		_ = h.Unlock(context.Background())
		return exitNoCommand
	}
	logf := func(level slog.Level, format string, args ...any) {
		log.Log(context.Background(), level, fmt.Sprintf(format, args...), "lock", name, "token", h.Token())
	}
	tel.child.started()
	out := supervise(h.Context(), h.Deadline, child, early, c.grace, sigs, c.jeopardySig, logf)
	status = child.status()
	tel.child.exited(status)
	uctx, ucancel := context.WithTimeout(context.Background(), c.lease)
	defer ucancel()
	if err := h.Unlock(uctx); err != nil {
		log.Warn("unlock not confirmed: the lock expires by itself", "lock", name, "err", err)
	}
	if out == ended {
		fmt.Fprintf(stderr, "tenure lock: lost %q while the command ran: %v\n", name, context.Cause(h.Context()))
		return exitLost
	}
	return status
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// slotList says who holds each slot of a semaphore.
func slotList(hs []tenure.SlotHolder) string {
	var b strings.Builder
	for _, h := range hs {
		if h.Holder == "" {
			fmt.Fprintf(&b, " slot %d by nobody known;", h.Slot)
			continue
		}
		fmt.Fprintf(&b, " slot %d by %q (token %d);", h.Slot, h.Holder, h.Token)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// kindClash says why name cannot be taken as asked (slots: 0 a plain lock,
// else a semaphore of that many), or "": a semaphore's records are apart
// from a plain lock's, so that taking one name both ways would let a
// plain holder and the semaphore's run at once. A read that fails says
// nothing here: the lock's own calls report the store.
func kindClash(ctx context.Context, store lease.Store, name string, slots int) string {
	if slots == 0 {
		if n, err := semCount(ctx, store, name); err == nil && n > 0 {
			return fmt.Sprintf("%q is a semaphore of %d slots (%s): add --slots %d to take one of them (to make it a plain lock again, tenure release --force %s once no slot is held)", name, n, name+lockcore.SlotsSuffix, n, name+lockcore.SlotsSuffix)
		}
		return ""
	}
	if rec, _, err := store.Get(ctx, name); err == nil && !rec.Released {
		return fmt.Sprintf("%q is held as a plain lock by %q (token %d), which a semaphore of that name would not exclude: drop --slots, or use another name", name, rec.Holder, rec.Token)
	}
	return ""
}

// statusFlag is an exit status flag whose default is worked out later (v
// is -1 until set): its help names the default itself, so it prints none.
type statusFlag struct {
	v   int
	set bool
}

func (f *statusFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.v)
}

func (f *statusFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	f.v, f.set = n, true
	return nil
}
