package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// common are the flags run, lock and status share.
type common struct {
	store   string
	lease   time.Duration
	id      string
	payload string
	verbose bool

	metricsAddr string
}

// defaultStore is a directory every user of this host can reach: leases for
// processes on one machine. Name a store for anything wider.
func defaultStore() string {
	return "file://" + filepath.ToSlash(filepath.Join(os.TempDir(), "tenure"))
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", defaultStore(), "store URL: file:///DIR, dynamodb://TABLE?region=..., s3://BUCKET/PREFIX?region=..., mem:")
	fs.DurationVar(&c.lease, "lease", 10*time.Second, "lease duration; the other timings derive from it")
	fs.StringVar(&c.id, "id", "", "holder identity, unique per process (default: host-pid-random)")
	fs.StringVar(&c.payload, "payload", "", "stored with the lease for others to read, e.g. this host's address (at most 1 KiB)")
	fs.BoolVar(&c.verbose, "v", false, "log every event, not only warnings")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve /metrics (Prometheus) and /healthz on this address, e.g. 127.0.0.1:9464 (default: nothing listens)")
}

func (c *common) logger(stderr io.Writer, cmd string) *slog.Logger {
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("cmd", cmd)
}

func (c *common) open(ctx context.Context) (lease.Store, error) {
	return storeurl.Open(ctx, c.store)
}

// splitArgs takes [FLAGS] [NAME] -- COMMAND [ARGS...] apart at the first
// "--": what comes before is parsed as flags and the name.
func splitArgs(args []string) (before, command []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// nameAndCommand checks what parsing left: NAME (optional when def is
// given) and a command.
func nameAndCommand(fs *flag.FlagSet, command []string, def func() string, stderr io.Writer) (string, bool) {
	rest := fs.Args()
	switch {
	case len(command) == 0:
		fmt.Fprintf(stderr, "%s: want [flags] NAME -- COMMAND [ARGS...]\n", fs.Name())
		return "", false
	case len(rest) > 1:
		fmt.Fprintf(stderr, "%s: unexpected %q before \"--\": want [flags] NAME -- COMMAND [ARGS...]\n", fs.Name(), rest[1])
		return "", false
	case len(rest) == 0 && def == nil:
		fmt.Fprintf(stderr, "%s: no lock NAME: want [flags] NAME -- COMMAND [ARGS...]\n", fs.Name())
		return "", false
	}
	name := ""
	if len(rest) == 1 {
		name = rest[0]
	} else {
		name = def()
	}
	if err := lease.ValidateName(name); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return "", false
	}
	return name, true
}

// defaultLeaseName names the lease of a run given none: run/ and the
// command's base name, its bytes outside a lease name's alphabet as '_'.
func defaultLeaseName(command []string) string {
	b := []byte(filepath.Base(command[0]))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' || b[0] == '_' || b[0] == '-' {
		b = append([]byte("cmd"), b...)
	}
	return "run/" + string(b[:min(len(b), lease.MaxNameLen-4)])
}

const runUsage = `usage: tenure run [flags] [NAME] -- COMMAND [ARGS...]

Campaigns for the lease NAME and runs COMMAND while, and only while, this
process leads. Without NAME (or --name) the lease is run/ and COMMAND's base
name: the processes that run the same command contend for one lease. The command gets TENURE_LEASE (the lease name), TENURE_TOKEN
(the term's fencing token: pass it to what the command writes) and
TENURE_HOLDER in its environment, in a process group of its own.

The command runs under a supervisor (a second tenure process) that owns
everything it starts: when tenure dies, kill -9 included, the supervisor
kills the command's whole tree at once, on Linux even processes that left
its group (setsid); when the command exits, what it left running is
stopped too. The supervisor also holds the term's deadline, so a stopped
tenure (SIGSTOP, a debugger) cannot leave the command running past it.

When the term ends (lost, or not renewed in time) the command's tree gets
SIGTERM, then SIGKILL after --grace, or at once if the deadline has
passed. When renewals fail, the stop begins --grace before the term's
deadline, so that the command is gone before another process can take
over; a grace too long for that (longer than the lead window less a
renewal interval and two operation timeouts: 2.99s at the default 10s
lease) is said at startup, and the command may then run past the deadline
by the difference.
SIGINT, SIGTERM and SIGQUIT to tenure are passed on to the command's
process group (SIGKILL after --grace); once it exits, the lease is
released and tenure exits with its status. SIGHUP, SIGUSR1 and SIGUSR2 are
passed on to the command itself, not its group, and it keeps running.
SIGTSTP (Ctrl-Z) stops the command's group, then tenure; SIGCONT resumes
both. When the command exits on its own, --on-exit decides: exit (the
default: release the lease and exit with its status), restart (run it again
while still leading), or release (give the lease to another candidate and
campaign again).

exit status: the command's (128+N if signal N killed it); 2 for bad flags or
configuration; 69 when the store refuses for good (missing table or bucket,
access denied); 76 with --on-lost exit, when the lease was lost.

examples:
  tenure run nightly-report -- ./report.sh
  tenure run --store 'dynamodb://leases?region=eu-west-1' --grace 3s writer -- ./writer --token-env TENURE_TOKEN
  TENURE_STORE=s3://my-leases/tenure/ tenure run --on-exit restart api-singleton -- ./server
  tenure run --wake 10.0.0.5:7946 writer -- ./writer   # standby, woken on release
`

// runCommand implements "tenure run".
func runCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure run", runUsage, stderr)
	var c common
	c.register(fs)
	grace := fs.Duration("grace", 2*time.Second, "from SIGTERM to SIGKILL when the command must stop")
	onExit := fs.String("on-exit", "exit", "when the command exits on its own: exit, restart or release")
	onLost := fs.String("on-lost", "campaign", "when the lease is lost: campaign (run the command again when elected) or exit")
	leaseName := fs.String("name", "", "the lease's name, if not given as NAME (default: run/ and the command's base name)")
	standby := fs.Bool("standby", false, "share the watching: one follower polls, the others every --cold-poll (every process of the lease should agree)")
	coldPoll := fs.Duration("cold-poll", 0, "with --standby: how often followers other than the standby read (default 10 × the poll interval)")
	wake := fs.String("wake", "", "listen for wake-ups on this UDP address, e.g. 10.0.0.5:7946 or 127.0.0.1:0 (turns on --standby): the standby takes over in a few round trips when the leader releases")
	wakeAdvertise := fs.String("wake-advertise", "", "the address others send wake-ups to, if not --wake's (NAT, containers)")
	strongPolls := fs.Bool("strong-polls", false, "poll with strongly consistent reads even where the store offers cheaper eventually consistent ones (DynamoDB)")
	before, argv := splitArgs(args)
	if ok, status := parseFlags(fs, before, stderr); !ok {
		return status
	}
	if *leaseName != "" && fs.NArg() > 0 && fs.Arg(0) != *leaseName {
		fmt.Fprintf(stderr, "tenure run: NAME %q and --name %q differ\n", fs.Arg(0), *leaseName)
		return exitUsage
	}
	name, ok := nameAndCommand(fs, argv, func() string {
		if *leaseName != "" {
			return *leaseName
		}
		return defaultLeaseName(argv)
	}, stderr)
	if !ok {
		return exitUsage
	}
	if *onExit != "exit" && *onExit != "restart" && *onExit != "release" {
		fmt.Fprintf(stderr, "tenure run: --on-exit %q: want exit, restart or release\n", *onExit)
		return exitUsage
	}
	if *onLost != "campaign" && *onLost != "exit" {
		fmt.Fprintf(stderr, "tenure run: --on-lost %q: want campaign or exit\n", *onLost)
		return exitUsage
	}
	if *grace <= 0 {
		fmt.Fprintf(stderr, "tenure run: --grace %v: want a positive duration\n", *grace)
		return exitUsage
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := c.open(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %v\n", err)
		return exitUsage
	}
	log := c.logger(stderr, "run")
	tel, err := newTelemetry(c.metricsAddr, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %v\n", err)
		return exitUsage
	}
	defer tel.close()
	r := &runner{argv: argv, grace: *grace, onExit: *onExit, onLost: *onLost, log: log, stdout: stdout, stderr: stderr, cancel: cancel}
	cand, err := tenure.New(tenure.Config{
		Lease: name, Store: store, ID: c.id, LeaseDuration: c.lease, Payload: []byte(c.payload), Logger: log,
		MeterProvider: tel.mp, Callbacks: tenure.Callbacks{OnElected: r.elected},
		Standby: *standby || *wake != "", ColdPollInterval: *coldPoll, WakeAddr: *wake, WakeAdvertise: *wakeAdvertise,
		StrongPolls: *strongPolls,
	})
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %v\n", err)
		return exitUsage
	}
	r.cand = cand
	tel.setHealth(cand.Handler())
	r.early = warnGrace(log, c.lease, *grace)
	r.sigs = newSignals(func(sig os.Signal) { // no command running: just stop
		if passOn(sig) {
			return
		}
		log.Debug("stopping", "signal", sig)
		r.finish(0)
	})
	go r.watchStartup(ctx, startupWait(c.lease))
	err = cand.Run(ctx)
	switch {
	case errors.Is(err, lease.ErrPermanent):
		fmt.Fprintf(stderr, "tenure run: %v\n", err)
		return exitUnavailable
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "tenure run: %v\n", err)
	}
	return r.exitStatus()
}

// warnGrace says when the grace cannot end by a term's deadline, and
// returns how long before the deadline the stop begins.
func warnGrace(log *slog.Logger, ttl, grace time.Duration) time.Duration {
	early, overrun := stopTiming(ttl, grace)
	if overrun > 0 {
		log.Warn("--grace does not fit before the term's deadline: when renewals fail, the command gets SIGTERM "+
			early.String()+" before the deadline and may run up to "+overrun.String()+" past it (shorten --grace or lengthen --lease)",
			"grace", grace, "lease", ttl)
	}
	return early
}

// startupWait is how long run and lock wait for the store's first answer
// before they give up with exitUnavailable: two leases, at least 5s.
func startupWait(ttl time.Duration) time.Duration { return max(2*ttl, 5*time.Second) }

// watchStartup ends tenure (exitUnavailable) if the store has not answered
// within d: a wrong endpoint or a network that is down, which retrying
// could cure but which an operator must hear of. Later outages are waited
// out (the term ends; the campaign goes on).
func (r *runner) watchStartup(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		if st := r.cand.Status(); st.LastAnswer.IsZero() {
			fmt.Fprintf(r.stderr, "tenure run: no answer from the store within %v: %v\n", d, st.Err)
			r.finish(exitUnavailable)
		}
	}
}

// runner carries out `tenure run`'s rules in OnElected.
type runner struct {
	argv           []string
	grace, early   time.Duration
	onExit, onLost string
	log            *slog.Logger
	stdout, stderr io.Writer
	cand           *tenure.Candidate
	sigs           *signals
	cancel         context.CancelFunc

	mu     sync.Mutex
	status int
	done   bool
}

// finish ends tenure with status: Run releases the lease and returns.
func (r *runner) finish(status int) {
	r.mu.Lock()
	if !r.done {
		r.done, r.status = true, status
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *runner) exitStatus() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// resign gives the lease back once OnElected returned (Resign waits for
// that, so it runs on a goroutine of its own).
func (r *runner) resign() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.cand.Resign(ctx)
	}()
}

// elected runs the command for the term, as the flags say.
func (r *runner) elected(ctx context.Context, term tenure.Term) {
	backoff := time.Second
	for ctx.Err() == nil {
		r.log.Info("elected: starting the command", "token", term.Token)
		c, err := startChild(r.argv, childEnv(term.Lease, term.Holder, uint64(term.Token)), r.stdout, r.stderr, r.early, r.grace)
		if err != nil {
			fmt.Fprintf(r.stderr, "tenure run: %v\n", err)
			r.finish(127)
			return
		}
		started := time.Now()
		deadline := func() time.Time {
			if st := r.cand.Status(); st.Leading && st.Token == term.Token {
				return st.Deadline
			}
			return time.Time{} // the term is over
		}
		logf := func(format string, args ...any) { r.log.Warn(fmt.Sprintf(format, args...), "token", term.Token) }
		switch supervise(ctx, deadline, c, r.early, r.grace, r.sigs, logf) {
		case signaled:
			r.finish(c.status())
			return
		case ended:
			if r.onLost == "exit" {
				r.finish(exitLost)
				return
			}
			// Give the lease up if it is still ours (the stop began before
			// the deadline), and campaign again.
			r.resign()
			return
		case exited:
			status := c.status()
			r.log.Info("the command exited", "status", status)
			switch r.onExit {
			case "exit":
				r.finish(status)
				return
			case "release":
				r.resign()
				return
			}
			// restart: at once if it ran a while, else after a growing pause
			if time.Since(started) > 30*time.Second {
				backoff = time.Second
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}
