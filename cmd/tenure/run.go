package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/kube"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/s3lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// common are the flags every command that reaches a store has: the store,
// and how much to log.
type common struct {
	store   string
	verbose bool
}

// holder are the flags of the commands that hold a lease or a lock: run
// and lock.
type holder struct {
	common
	lease       time.Duration
	grace       time.Duration
	id, payload string
	metricsAddr string
	serviceName string
	onJeopardy  string    // --on-jeopardy, as given
	jeopardySig os.Signal // and as parsed; nil: none
}

// defaultStore is a directory of this user's, the same whatever the
// environment (TMPDIR, systemd's PrivateTmp): leases for this user's
// processes on this host. Processes of other users, or of other hosts, need
// a store they share, named with --store.
func defaultStore() string {
	home := ""
	if u, err := user.Current(); err == nil {
		home = u.HomeDir
	}
	return "file://" + filepath.ToSlash(defaultStoreDir(home, os.Getuid(), os.TempDir()))
}

// defaultStoreDir is the default store's directory for a user whose home
// (from the password database) is home: under it, unless the user has no
// home to write in (none, "/", or one that does not exist, such as
// Debian's /nonexistent for daemons); then tenure-UID under tmp.
func defaultStoreDir(home string, uid int, tmp string) string {
	if home != "" && home != "/" {
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			return filepath.Join(home, ".local", "state", "tenure")
		}
	}
	return filepath.Join(tmp, fmt.Sprintf("tenure-%d", uid))
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", defaultStore(), "store URL: file:///DIR, dynamodb://TABLE?region=..., s3://BUCKET/PREFIX?region=..., postgres://HOST/DB, etcd://HOST:PORT/PREFIX, gs://BUCKET/PREFIX, azblob://ACCOUNT/CONTAINER/PREFIX, k8s://NAMESPACE")
	fs.BoolVar(&c.verbose, "v", false, "log every event, not only warnings")
}

func (h *holder) register(fs *flag.FlagSet) {
	h.common.register(fs)
	fs.DurationVar(&h.lease, "lease", 10*time.Second, "lease duration; the other timings derive from it")
	fs.DurationVar(&h.grace, "grace", 0, "from SIGTERM to SIGKILL when the command must stop (default: what fits before the term's deadline, 2.99s at a 10s lease)")
	fs.StringVar(&h.id, "id", "", "holder identity, unique per process (default: host-pid-random)")
	fs.StringVar(&h.payload, "payload", "", "stored with the lease for others to read, e.g. this host's address (at most 1 KiB)")
	fs.StringVar(&h.serviceName, "service-name", "tenure", "service.name in the metrics' resource, unless OTEL_SERVICE_NAME is set")
	fs.StringVar(&h.metricsAddr, "metrics-addr", "", "serve /metrics, /livez, /readyz and /leader on this address, e.g. 127.0.0.1:9464 (default: nothing listens)")
	fs.StringVar(&h.onJeopardy, "on-jeopardy", "", "send this signal (e.g. USR1) to the command when renewals begin to fail: it still holds the lease until the deadline, and may checkpoint")
}

// minLease is the shortest --lease: its op timeout (a fifth) is 100ms, a
// store's round trip with room for a slow answer, and the supervisor, told
// each new deadline within its 100ms tick (supervise), hears of a renewal
// before the old deadline's stop (0.4 × the lease after it). Below it
// calls time out, tenure spins, and commands are stopped mid-term.
const minLease = 500 * time.Millisecond

// check refuses durations that mean nothing (0 never silently means a
// default), and fills in the grace.
func (h *holder) check(fs *flag.FlagSet, stderr io.Writer) bool {
	if h.lease <= 0 {
		fmt.Fprintf(stderr, "%s: --lease %v: want a positive duration, e.g. 10s\n", fs.Name(), h.lease)
		return false
	}
	if h.lease < minLease {
		fmt.Fprintf(stderr, "%s: --lease %v is too short to work: a store call must fit in a fifth of it (the op timeout, %v) with a renewal and its retry inside the term; the shortest that works is %v (a second or more for a store across a network)\n",
			fs.Name(), h.lease, h.lease/5, minLease)
		return false
	}
	if h.grace < 0 || h.grace == 0 && isSet(fs, "grace") {
		fmt.Fprintf(stderr, "%s: --grace %v: want a positive duration (leave it out for the default)\n", fs.Name(), h.grace)
		return false
	}
	if h.grace == 0 {
		h.grace = defaultGrace(h.lease)
	}
	if h.onJeopardy != "" {
		sig, err := parseSignal(h.onJeopardy)
		if err != nil {
			fmt.Fprintf(stderr, "%s: --on-jeopardy %q: %v\n", fs.Name(), h.onJeopardy, err)
			return false
		}
		h.jeopardySig = sig
	}
	return true
}

// logger returns the command's logger: for run, a daemon, what it does
// (elected, running the command, stopping it) at info; for lock, run from
// cron, warnings only, so that a quiet run mails nothing; debug too with
// -v.
func (c *common) logger(stderr io.Writer, cmd string) *slog.Logger {
	level := slog.LevelWarn
	if cmd == "run" || cmd == "forward" { // long-running: say when it leads
		level = slog.LevelInfo
	}
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("cmd", cmd)
}

// libLogger returns the logger for the Candidate, Locker or Group the
// command runs: warnings and errors, and everything with -v. Their own
// information (elected, demoted) would repeat the command's.
func (c *common) libLogger(log *slog.Logger) *slog.Logger {
	if c.verbose {
		return log
	}
	return slog.New(atLeast{log.Handler(), slog.LevelWarn})
}

// atLeast passes on the records of its handler at min or above.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}
func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(as), h.min}
}
func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}

// open opens the store, or says why not and returns the exit status: 2 for
// a URL that is wrong, 69 for a store that refuses.
func (c *common) open(ctx context.Context, name string, stderr io.Writer) (lease.Store, int) {
	if strings.HasPrefix(c.store, "mem:") {
		fmt.Fprintf(stderr, "%s: --store %s: an in-memory store lives in one process and protects nothing between processes; use file:///DIR for processes on one host\n", name, c.store)
		return nil, exitUsage
	}
	st, err := storeurl.Open(ctx, c.store)
	if err != nil {
		if errors.Is(err, lease.ErrPermanent) {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return nil, exitUnavailable
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, exitUsage
	}
	return st, 0
}

// absentDir returns the directory of a file:// store that does not exist,
// or "": the commands that only read (and gc and release, which have
// nothing to do there) must not make one for a mistyped path.
func (c *common) absentDir() string {
	u, err := url.Parse(c.store)
	if err != nil || u.Scheme != "file" {
		return ""
	}
	dir := u.Path
	if u.Opaque != "" {
		dir = u.Opaque
	}
	if dir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.FromSlash(dir)); errors.Is(err, fs.ErrNotExist) {
		return dir
	}
	return ""
}

// storeFailed says why the store refused for good, with what to do, and
// returns exitUnavailable.
func (c *common) storeFailed(name string, err error, stderr io.Writer) int {
	hint := ""
	switch {
	case kube.Foreign(err):
		hint = " (pick another lease name; or, if nothing uses that Lease any more, tenure release --force NAME deletes it and writes a record of tenure's in its place, which whatever wrote it would then find replaced; tenure list shows such Leases as foreign)"
	case errors.Is(err, lease.ErrInvalidRecord):
		hint = " (the record cannot be read by anyone: see it with tenure list; tenure release --force NAME replaces it with one the next holder waits out)"
	case errors.Is(err, dynamolease.ErrTableNotFound), errors.Is(err, s3lease.ErrBucketNotFound):
		hint = " (create=true in the store URL creates it)"
	}
	fmt.Fprintf(stderr, "%s: store %s: %s%s\n", name, storeurl.Redact(c.store), bare(err), hint)
	return exitUnavailable
}

// usageError says what is wrong with a command's arguments, in one line,
// and where the help is.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "%s: %s\nsee %s -h\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
}

// bare is err's text without the library's "tenure: " prefix, which the
// command's own ("tenure lock: ") already says.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "tenure: ") }

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

// nameAndCommand checks what parsing left: NAME and a command.
func nameAndCommand(fs *flag.FlagSet, command []string, stderr io.Writer) (string, bool) {
	rest := fs.Args()
	switch {
	case len(command) == 0:
		usageError(fs, stderr, "want [flags] NAME -- COMMAND [ARGS...]")
		return "", false
	case len(rest) > 1:
		usageError(fs, stderr, "unexpected %q before \"--\": want [flags] NAME -- COMMAND [ARGS...]", rest[1])
		return "", false
	case len(rest) == 0:
		usageError(fs, stderr, "no NAME: want [flags] NAME -- COMMAND [ARGS...] (the processes that share NAME contend for it)")
		return "", false
	}
	if err := tenure.ValidateName(rest[0]); err != nil { // also refuses "::", tenure's own records
		usageError(fs, stderr, "%s", bare(err))
		return "", false
	}
	return rest[0], true
}

// commandFound reports whether the command can be found (as the supervisor
// will look it up: PATH, or a path), and says why not: checked before
// campaigning, so that a typo exits at once rather than at the failover.
func commandFound(name string, argv []string, stderr io.Writer) bool {
	if _, err := exec.LookPath(argv[0]); err != nil {
		fmt.Fprintf(stderr, "%s: %v (nothing was campaigned for)\n", name, err)
		return false
	}
	return true
}

const runUsage = `usage: tenure run [flags] NAME -- COMMAND [ARGS...]

Campaigns for the lease NAME and runs COMMAND while, and only while, this
process leads. The processes that run with the same NAME and store contend
for one lease. The command gets TENURE_NAME (the lease's name), TENURE_TOKEN
(the term's fencing token: pass it to what the command writes) and
TENURE_HOLDER in its environment, in a process group of its own.

The command runs under a supervisor (a second tenure process) that owns
everything it starts: when tenure dies, kill -9 included, the supervisor
kills the command's whole tree at once, on Linux even processes that left
its group (setsid); when the command exits, what it left running is
stopped too. The supervisor also holds the term's deadline, so a stopped
tenure (SIGSTOP, a debugger) cannot leave the command running past it.

When the term ends (lost, not renewed in time, or handed over) the
command's tree gets SIGTERM, then SIGKILL after --grace, or at once if the
deadline has passed. A leader whose standby has a higher priority (--priority
N; every leader looks, with or without one) hands the lease over once its
term is --priority-hold-off old: the command is stopped, then the lease given back and the standby
woken, and this process campaigns again, whatever --on-lost says. With
--priority, tenure listens for wake-ups on a free port of the address
this host sends from (its default route's; loopback with a file:// store)
unless --wake names another,
or --wake none turns the listener off. When renewals fail, the stop begins --grace before the term's
deadline, so that the command is gone before another process can take
over; the default --grace is what fits (2.99s at the default 10s lease).
With --on-jeopardy SIGNAL (USR1, HUP...), the command gets SIGNAL as soon
as a renewal fails: the term is in jeopardy, still held until its deadline
unless a renewal lands, and the command may checkpoint before it is
stopped. It gets it again at the next jeopardy of the term, never twice in
one.
SIGINT, SIGTERM and SIGQUIT to tenure are passed on to the command's
process group (SIGKILL after --grace); once it exits, the lease is
released and tenure exits with its status. SIGHUP, SIGUSR1 and SIGUSR2 are
passed on to the command itself, not its group, and it keeps running.
SIGTSTP (Ctrl-Z) stops the command's group, then tenure; SIGCONT resumes
both.

When the command exits on its own, --on-exit decides: exit (the default:
release the lease and exit with its status), restart (run it again while
still leading), or release (give the lease to another candidate and
campaign again). A non-zero exit is logged as a warning. Runs that end
within 30s are followed by a pause that doubles from 1s to 30s: before a
restart, or before campaigning again after a release. With restart, after
--max-restarts non-zero exits within 10 minutes tenure releases the lease
so that another replica tries, and campaigns again after the pause.

A store error that retrying cannot cure (access denied, a missing table or
bucket, a record no one can read) ends tenure at once with status 69; so
does a store that gives no answer within two leases at startup. Two
processes given the same --id never lead at once, but neither is right:
each logs an error once a minute.

With --group NAME --shards N (and no NAME before "--"), tenure joins the
group NAME instead: the N shards NAME/0 … NAME/N-1 are spread over the
processes that run with the same group, and tenure runs COMMAND once per
shard it holds, with TENURE_GROUP, TENURE_SHARD (0 to N-1), TENURE_SHARDS
and TENURE_TOKEN (the shard's fencing token). A shard's command is stopped
before the shard moves to another process, and run again if it exits while
the shard is held. SIGTERM hands every shard over, then tenure exits 0.
--weight W takes W times a weight-1 member's share. See docs/groups.md.

On Kubernetes, --label-pod labels this Pod (POD_NAME and POD_NAMESPACE, from
the Downward API) tenure.dev/leader=true while this process leads, and takes
the label off when the term ends, so that a Service selecting it reaches the
leader. The label lags the term: clients must still send the token. See
docs/kubernetes.md.

exit status: the command's (128+N if signal N killed it); 2 for bad flags or
configuration; 69 when the store refuses for good; 76 with --on-lost exit,
when the lease was lost.

examples:
  tenure run nightly-report -- ./report.sh
  tenure run --store 'dynamodb://leases?region=eu-west-1' --grace 3s writer -- ./writer --token-env TENURE_TOKEN
  TENURE_STORE=s3://my-leases/tenure/?region=eu-west-1 tenure run --on-exit restart api-singleton -- ./server
  tenure run --wake 10.0.0.5:7946 writer -- ./writer   # standby, woken on release
  tenure run --priority 2 writer -- ./writer   # preferred: leads once ready
  tenure run --group ingest --shards 64 -- ./consume   # a child per shard held
  tenure run --store k8s://jobs --label-pod writer -- ./writer   # in a Pod: a Service reaches the leader
`

// runCommand implements "tenure run".
func runCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure run", runUsage, stderr)
	var c holder
	c.register(fs)
	onExit := fs.String("on-exit", "exit", "when the command exits on its own: exit, restart or release")
	onLost := fs.String("on-lost", "campaign", "when the lease is lost: campaign (run the command again when elected) or exit")
	maxRestarts := fs.Int("max-restarts", 5, "with --on-exit restart: non-zero exits within 10 minutes before the lease is given to another replica")
	standby := fs.Bool("standby", false, "share the watching: one follower polls, the others every --cold-poll (every process of the lease should agree)")
	coldPoll := fs.Duration("cold-poll", 0, "with --standby: how often followers other than the standby read (default 10 × the poll interval)")
	wake := fs.String("wake", "", "listen for wake-ups on this UDP address, e.g. 10.0.0.5:7946 or 127.0.0.1:0 (turns on --standby): the standby takes over in a few round trips when the leader releases; with --priority, default the host's outbound address (loopback with a file:// store), port 0; none: no listener")
	wakeAdvertise := fs.String("wake-advertise", "", "the address others send wake-ups to, if not --wake's (NAT, containers)")
	addr := fs.String("addr", "", "publish where COMMAND serves (host:port others reach) in the lease's record while this replica leads: tenure status shows it, only while the term is known to be live")
	prio := fs.Int("priority", 0, "prefer this process to those of lower priority (higher wins; turns on --standby): a leader hands the lease to a live standby of higher priority, at most once per --priority-hold-off")
	prioHoldOff := fs.Duration("priority-hold-off", 0, "a leader hands over to a standby of higher --priority only once its term is this old (default 3 × --cold-poll: 1m)")
	strongPolls := fs.Bool("strong-polls", false, "poll with strongly consistent reads even where the store offers cheaper eventually consistent ones (DynamoDB)")
	labelPod := fs.Bool("label-pod", false, "on Kubernetes: label this Pod (POD_NAME, POD_NAMESPACE) "+kube.LeaderLabel+"=true while it leads, for a Service that selects the leader")
	var gf groupFlags
	fs.StringVar(&gf.name, "group", "", "join the group NAME instead of campaigning for one lease: run the command once per shard this process holds (needs --shards)")
	fs.IntVar(&gf.shards, "shards", 0, "with --group: the number of shards, NAME/0 … NAME/N-1 (every member must give the same)")
	fs.IntVar(&gf.weight, "weight", 1, "with --group: this member's capacity relative to the others' (1 to 9999)")
	fs.BoolVar(&gf.watch, "watch", false, "with --group: also wait on the shards this member would take over, so that a crashed member's shards fail over within a lock's bound (a read per shard per poll)")
	before, argv := splitArgs(args)
	if ok, status := parseFlags(fs, before, stderr); !ok {
		return status
	}
	if (gf.name != "" || isSet(fs, "shards")) && *labelPod {
		fmt.Fprintln(stderr, "tenure run: --label-pod labels the Pod of a lease's leader; a group has no one leader")
		return exitUsage
	}
	if gf.name != "" || isSet(fs, "shards") || isSet(fs, "weight") || isSet(fs, "watch") {
		gf.wake, gf.wakeAdvertise, gf.strongPolls = *wake, *wakeAdvertise, *strongPolls
		return groupCommand(fs, &c, gf, argv, stdout, stderr)
	}
	name, ok := nameAndCommand(fs, argv, stderr)
	if !ok || !c.check(fs, stderr) {
		return exitUsage
	}
	switch {
	case *onExit != "exit" && *onExit != "restart" && *onExit != "release":
		fmt.Fprintf(stderr, "tenure run: --on-exit %q: want exit, restart or release\n", *onExit)
		return exitUsage
	case *onLost != "campaign" && *onLost != "exit":
		fmt.Fprintf(stderr, "tenure run: --on-lost %q: want campaign or exit\n", *onLost)
		return exitUsage
	case *maxRestarts < 1:
		fmt.Fprintf(stderr, "tenure run: --max-restarts %d: want at least 1\n", *maxRestarts)
		return exitUsage
	case *coldPoll < 0 || *coldPoll == 0 && isSet(fs, "cold-poll"):
		fmt.Fprintf(stderr, "tenure run: --cold-poll %v: want a positive duration\n", *coldPoll)
		return exitUsage
	case *prioHoldOff < 0 || *prioHoldOff == 0 && isSet(fs, "priority-hold-off"):
		fmt.Fprintf(stderr, "tenure run: --priority-hold-off %v: want a positive duration\n", *prioHoldOff)
		return exitUsage
	}
	if !commandFound("tenure run", argv, stderr) {
		return exitNoCommand
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, log, tel, status := c.setUp(ctx, stderr)
	if store == nil {
		return status
	}
	defer tel.close()
	r := &runner{store: storeurl.Redact(c.store), holdOff: 2 * (c.lease / 5), argv: argv, grace: c.grace, jeopardySig: c.jeopardySig, onExit: *onExit, onLost: *onLost, maxRestarts: *maxRestarts,
		log: log, stdout: stdout, stderr: stderr, ending: ending{cancel: cancel}, child: tel.child}
	callbacks := tenure.Callbacks{OnElected: r.elected}
	if *labelPod {
		label, status := c.podLabel(ctx, log, stderr)
		if label == nil {
			return status
		}
		// The label's around the command: set as a term begins, taken off
		// before the next campaign.
		elected := callbacks.OnElected
		callbacks.OnElected = func(ctx context.Context, term tenure.Term) { label.Elected(ctx); elected(ctx, term) }
		callbacks.OnDemoted = func(tenure.Term, tenure.DemotionReason) { label.Demoted() }
	}
	cand, err := tenure.New(tenure.Config{
		Lease: name, Store: store, Payload: []byte(c.payload), Addr: *addr, Callbacks: callbacks,
		Timing:  tenure.Timing{LeaseDuration: c.lease, ColdPollInterval: *coldPoll},
		Runtime: tenure.Runtime{ID: c.id, Logger: c.libLogger(log), MeterProvider: tel.mp, WakeAddr: *wake, WakeAdvertise: *wakeAdvertise},
		Standby: *standby || *wake != "" && *wake != tenure.NoWake, Priority: *prio, PriorityHoldOff: *prioHoldOff,
		StrongPolls: *strongPolls,
	})
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %s\n", bare(err))
		return exitUsage
	}
	r.cand = cand
	tel.setProbes(cand.Handler())
	fmt.Fprintf(stderr, "tenure run: campaigning for %q in %s as %q\n", name, c.store, cand.ID())
	r.early = warnGrace(log, c.lease, c.grace)
	r.sigs = newSignals(func(sig os.Signal) { // no command running: just stop
		if passOn(sig) {
			return
		}
		log.Debug("stopping", "signal", sig)
		r.finish(0)
	})
	go r.watchStartup(ctx, startupWait(c.lease))
	shedStartupPages() // set up: what the campaign touches from here on maps back in
	err = cand.Run(ctx)
	switch {
	case errors.Is(err, lease.ErrPermanent), errors.Is(err, lease.ErrInvalidRecord):
		return c.storeFailed("tenure run", err, stderr)
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "tenure run: %s\n", bare(err))
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
			fmt.Fprintf(r.stderr, "tenure run: store %s: no answer within %v (check --store, the network and the credentials): %v\n", r.store, d, st.Err)
			r.finish(exitUnavailable)
		}
	}
}

// runner carries out `tenure run`'s rules in OnElected.
type runner struct {
	store          string        // its URL
	holdOff        time.Duration // the Candidate's ResignHoldOff: 2 × its poll interval
	argv           []string
	grace, early   time.Duration
	jeopardySig    os.Signal // --on-jeopardy; nil: none
	onExit, onLost string
	maxRestarts    int
	log            *slog.Logger
	stdout, stderr io.Writer
	cand           *tenure.Candidate
	sigs           *signals
	child          *childMetrics
	ending

	// OnElected's own (one at a time): the pause after short runs, and
	// the recent non-zero exits.
	backoff  backoff
	failures []time.Time
}

// ending is how run ends: the first status given, and the cancel that
// makes Run return.
type ending struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	status int
	done   bool
}

// finish ends tenure with status: Run releases what it holds and returns.
func (e *ending) finish(status int) {
	e.mu.Lock()
	if !e.done {
		e.done, e.status = true, status
	}
	e.mu.Unlock()
	e.cancel()
}

func (e *ending) exitStatus() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// setUp opens the store, the log and the telemetry of run, or says why
// not and returns a nil store and the exit status.
func (c *holder) setUp(ctx context.Context, stderr io.Writer) (lease.Store, *slog.Logger, *telemetry, int) {
	store, status := c.open(ctx, "tenure run", stderr)
	if store == nil {
		return nil, nil, nil, status
	}
	tel, err := newTelemetry(c.metricsAddr, c.serviceName, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: %s\n", bare(err))
		return nil, nil, nil, exitUsage
	}
	return store, c.logger(stderr, "run"), tel, 0
}

// resign gives the lease back once OnElected returned (Resign waits for
// that, so it runs on a goroutine of its own), and stays a follower for
// pause, or for the Candidate's ResignHoldOff if that is longer, so that
// another candidate's poll finds the lease free first.
func (r *runner) resign(pause time.Duration) {
	var opts []tenure.ResignOption
	if pause > r.holdOff {
		opts = append(opts, tenure.HoldOff(pause))
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.cand.Resign(ctx, opts...)
	}()
}

// Pauses after runs that end quickly: a command that keeps failing, or
// that exits at once, must not spin (restart) nor bounce the lease between
// replicas (release).
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	shortRun   = 30 * time.Second
	failWindow = 10 * time.Minute
)

// backoff is the pause after runs that end quickly.
type backoff struct{ d time.Duration }

// next returns the pause after a run that lasted ran: none after a long
// run, else the next of 1s, 2s, 4s... 30s.
func (b *backoff) next(ran time.Duration) time.Duration {
	if ran >= shortRun {
		b.d = 0
		return 0
	}
	b.d = min(max(2*b.d, minBackoff), maxBackoff)
	return b.d
}

// failed notes a non-zero exit and reports whether there were
// maxRestarts of them within failWindow.
func (r *runner) failed(now time.Time) bool {
	keep := r.failures[:0]
	for _, t := range r.failures {
		if now.Sub(t) < failWindow {
			keep = append(keep, t)
		}
	}
	r.failures = append(keep, now)
	return len(r.failures) >= r.maxRestarts
}

// elected runs the command for the term, as the flags say.
func (r *runner) elected(ctx context.Context, term tenure.Term) {
	for ctx.Err() == nil {
		r.log.Info(fmt.Sprintf("elected, token %d, running %s", term.Token, strings.Join(r.argv, " ")), "token", term.Token)
		c, err := startChild(r.argv, childEnv(term.Lease, term.Holder, uint64(term.Token)), r.stdout, r.stderr, r.early, r.grace)
		if err != nil {
			fmt.Fprintf(r.stderr, "tenure run: %v\n", err)
			r.finish(exitNoCommand)
			return
		}
		r.child.started()
		shedStartupPages() // the campaign's first calls, which set up its clients, are over
		started := time.Now()
		deadline := func() time.Time {
			if st := r.cand.Status(); st.Leading && st.Token == term.Token {
				return st.Deadline
			}
			return time.Time{} // the term is over
		}
		logf := func(level slog.Level, format string, args ...any) {
			r.log.Log(context.Background(), level, fmt.Sprintf(format, args...), "token", term.Token)
		}
		out := supervise(ctx, deadline, c, r.early, r.grace, r.sigs, r.jeopardySig, logf)
		status := c.status()
		r.child.exited(status)
		switch out {
		case signaled:
			r.finish(status)
			return
		case ended:
			var te *tenure.TermEndedError
			if errors.As(context.Cause(ctx), &te) && te.Reason == tenure.ReasonHandedOver {
				// Given back already, for a candidate of higher priority:
				// campaign again, as a follower.
				r.log.Info("handed over to a candidate of higher priority", "token", term.Token)
				return
			}
			if r.onLost == "exit" {
				r.finish(exitLost)
				return
			}
			// Give the lease up if it is still ours (the stop began before
			// the deadline), and campaign again.
			r.resign(0)
			return
		}
		ran := time.Since(started)
		if status != 0 {
			r.log.Warn("the command exited", "status", status, "ran", ran.Round(time.Millisecond).String(), "token", term.Token)
		} else {
			r.log.Info("the command exited", "status", status, "ran", ran.Round(time.Millisecond).String())
		}
		pause := r.backoff.next(ran)
		switch r.onExit {
		case "exit":
			r.finish(status)
			return
		case "release":
			if pause > 0 {
				r.log.Warn("the command exited within "+shortRun.String()+": releasing the lease and waiting before campaigning again", "pause", pause)
			}
			r.resign(pause)
			return
		}
		if status != 0 && r.failed(time.Now()) {
			r.log.Warn(fmt.Sprintf("the command failed %d times within %v: releasing the lease so that another replica tries", len(r.failures), failWindow), "pause", pause)
			r.failures = nil
			r.resign(max(pause, minBackoff))
			return
		}
		if pause > 0 {
			r.log.Warn("restarting the command after a pause", "pause", pause)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// podLabel returns the labeller of --label-pod: the Pod from POD_NAME and
// POD_NAMESPACE, the API server as the store's URL reaches it (k8s://),
// else as the Pod's ServiceAccount does. A Pod that cannot be labelled
// fails at once: 2 for the environment, 69 for the API server's refusal.
func (c *holder) podLabel(ctx context.Context, log *slog.Logger, stderr io.Writer) (*kube.PodLabel, int) {
	pod, err := kube.PodFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: --label-pod: %v\n", err)
		return nil, exitUsage
	}
	var kubeconfig, kubecontext string
	if u, err := url.Parse(c.store); err == nil && u.Scheme == "k8s" {
		kubeconfig, kubecontext = u.Query().Get("kubeconfig"), u.Query().Get("context")
	}
	cfg, err := kube.RESTConfig(kubeconfig, kubecontext)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: --label-pod: %v\n", err)
		return nil, exitUsage
	}
	cfg.UserAgent = "tenure"
	client, err := kube.NewClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: --label-pod: %v\n", err)
		return nil, exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, startupWait(c.lease))
	defer cancel()
	label, err := kube.NewPodLabel(ctx, client, pod, log)
	if err != nil {
		fmt.Fprintf(stderr, "tenure run: --label-pod: %v\n", err)
		return nil, exitUnavailable
	}
	return label, 0
}
