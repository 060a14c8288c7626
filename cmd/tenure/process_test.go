//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/tenure-go/tenure/internal/plan"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/filelease"
)

// Real processes: the tenure binary, built once, runs children that are
// this test binary in helper mode. They log what they do to a file, and
// write their token to a fenced resource (a file holding the highest token
// accepted, under flock) every 20ms.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// It also marks the processes t starts, to wait for them all before t ends
// (see ownProcesses).
func tenureBinary(t *testing.T) string {
	t.Helper()
	ownProcesses(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tenure-bin")
		if err != nil {
			buildErr = err
			return
		}
		afterTests = append(afterTests, func() { _ = os.RemoveAll(dir) })
		binPath = filepath.Join(dir, "tenure")
		// Static, as make image builds it: the same compile as the image's
		// test and the simulator's pass in make test (CGO_ENABLED=0 all).
		build := exec.Command("go", "build", "-o", binPath, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// procEnv is a test's directory of logs and the resource.
type procEnv struct {
	t       *testing.T
	dir     string
	store   string
	env     []string
	lease   time.Duration
	changed chan struct{} // a child logged something
}

func newProcEnv(t *testing.T, store string, env ...string) *procEnv {
	dir := t.TempDir()
	if store == "" {
		store = "file://" + filepath.Join(dir, "leases")
	}
	return &procEnv{t: t, dir: dir, store: store, env: env, lease: 2 * time.Second, changed: make(chan struct{}, 1)}
}

// watch reads what a tenure process and its children print, and says so
// on e.changed.
func (e *procEnv) watch(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		select {
		case e.changed <- struct{}{}:
		default:
		}
	}
}

// tenure starts the tenure binary with args, the helper child after "--".
func (e *procEnv) tenure(args ...string) *exec.Cmd {
	e.t.Helper()
	return e.tenureLog(os.Stderr, args...)
}

// tenureLog is tenure with its log (stderr) going to w.
func (e *procEnv) tenureLog(w io.Writer, args ...string) *exec.Cmd {
	e.t.Helper()
	self, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	full := append([]string{}, args...)
	full = append(full, "--", self, "-test.run=^TestHelperChild$")
	return e.start(w, full, "TENURE_GRACE=5s")
}

// start starts the tenure binary with args, its log (stderr) going to w,
// and watches its and its children's output.
func (e *procEnv) start(w io.Writer, args []string, env ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(tenureBinary(e.t), args...)
	cmd.Env = append(os.Environ(), e.env...)
	cmd.Env = append(cmd.Env, "TENURE_STORE="+e.store, "TENURE_LEASE="+e.lease.String(), "TENURE_TEST_CHILD="+e.dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = w
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go e.watch(out)
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// event is a line of the children's log: what, holder, token, pid.
type event struct {
	what, holder string
	token        uint64
	pid          int
}

func (e *procEnv) events() []event {
	b, _ := os.ReadFile(filepath.Join(e.dir, "log"))
	var out []event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		tok, _ := strconv.ParseUint(f[2], 10, 64)
		pid, _ := strconv.Atoi(f[3])
		out = append(out, event{f[0], f[1], tok, pid})
	}
	return out
}

// await reads the log each time a child logs, until one event passes ok,
// for at most within.
func (e *procEnv) await(within time.Duration, what string, ok func(event) bool) event {
	e.t.Helper()
	var found event
	e.awaitLog(within, what, func(evs []event) bool {
		for _, ev := range evs {
			if ok(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// awaitLog reads the log each time a child logs, until done accepts it,
// for at most within.
func (e *procEnv) awaitLog(within time.Duration, what string, done func([]event) bool) {
	e.t.Helper()
	timeout := time.After(within)
	for !done(e.events()) {
		select {
		case <-e.changed:
		case <-timeout:
			e.t.Fatalf("no %s within %v; log:\n%v", what, within, e.events())
		}
	}
}

// awaitAfter waits for an event that then accepts, logged after one that
// first accepts.
func (e *procEnv) awaitAfter(within time.Duration, what string, first, then func(event) bool) {
	e.t.Helper()
	e.awaitLog(within, what, func(evs []event) bool {
		seen := false
		for _, ev := range evs {
			if seen && then(ev) {
				return true
			}
			seen = seen || first(ev)
		}
		return false
	})
}

// alive reports whether pid runs: it exists and is not a zombie that its
// parent has yet to reap.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func (e *procEnv) crashBound() time.Duration {
	p, err := plan.New(election.Timing{LeaseDuration: e.lease}, 2, 50*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.CrashFailover + time.Second // and process start-up
}

// TestHelperChild is the child tenure runs in these tests.
func TestHelperChild(t *testing.T) {
	dir := os.Getenv("TENURE_TEST_CHILD")
	if dir == "" || os.Getenv("TENURE_TOKEN") == "" {
		t.Skip("helper process")
	}
	holder, token := os.Getenv("TENURE_HOLDER"), os.Getenv("TENURE_TOKEN")
	tok, _ := strconv.ParseUint(token, 10, 64)
	resource := filepath.Join(dir, "resource")
	if shard := os.Getenv("TENURE_SHARD"); shard != "" { // a group's: a resource per shard
		holder += "@" + shard
		resource += "." + shard
	}
	logf := func(what string, pid ...int) {
		f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
		if err == nil {
			fmt.Fprintf(f, "%s %s %s %d\n", what, holder, token, append(pid, os.Getpid())[0])
			f.Close()
		}
		fmt.Println(what) // wakes the test's await
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	logf("start")
	if os.Getenv("TENURE_TEST_SPAWN") != "" {
		spawnDescendants(logf)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	for {
		select {
		case <-term:
			logf("term")
			os.Exit(0)
		case <-hup:
			logf("hup")
		case <-tick.C:
			if fencedWrite(resource, tok) {
				logf("accepted")
			} else {
				logf("refused")
			}
		}
	}
}

// spawnDescendants starts what a script's helpers and daemons do, and logs
// each one's pid as "spawn" (the event's pid): a process in the child's
// group, one that called setsid, and one that called setsid and lost its
// parent (a double fork).
func spawnDescendants(logf func(string, ...int)) {
	inGroup := exec.Command("sleep", "1001")
	session := exec.Command("sleep", "1002")
	session.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	daemon := exec.Command("sh", "-c", "sleep 1003 >/dev/null 2>&1 & echo $!")
	daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	for _, c := range []*exec.Cmd{inGroup, session} {
		if err := c.Start(); err == nil {
			logf("spawn", c.Process.Pid)
		}
	}
	if out, err := daemon.Output(); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			logf("spawn", pid)
		}
	}
}

// fencedWrite is the resource: it accepts a token at or above the highest
// it accepted.
func fencedWrite(path string, tok uint64) bool {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return false
	}
	var high uint64
	if s, err := bufio.NewReader(f).ReadString('\n'); err == nil {
		high, _ = strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	}
	if tok < high {
		return false
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.FormatUint(tok, 10)+"\n"), 0)
	return true
}

func onStores(t *testing.T, f func(t *testing.T, e *procEnv)) {
	t.Run("file", func(t *testing.T) { f(t, newProcEnv(t, "")) })
	t.Run("dynamodb-local", func(t *testing.T) {
		testservers.DynamoDB(t) // skips without the server, fails under CI
		store := "dynamodb://" + testservers.UniqueName("tenure-cli") + "?region=us-east-1&create=true&endpoint=" + os.Getenv(testservers.EnvDynamoDBEndpoint)
		f(t, newProcEnv(t, store, "AWS_ACCESS_KEY_ID=tenure", "AWS_SECRET_ACCESS_KEY=tenure"))
	})
}

// TestProcessKillLeader: kill -9 the leading tenure: its child dies with it,
// and the other's child starts within the failover bound; on every store.
func TestProcessKillLeader(t *testing.T) {
	every := func(t *testing.T, f func(t *testing.T, e *procEnv)) {
		onStores(t, f)
		onServerStores(t, f)
	}
	every(t, func(t *testing.T, e *procEnv) {
		a := e.tenure("run", "--id", "a", "job")
		first := e.await(20*time.Second, "first child", func(ev event) bool { return ev.what == "start" })
		b := e.tenure("run", "--id", "b", "job")
		leader, follower := a, b
		if first.holder == "b" {
			leader, follower = b, a
		}
		_ = follower
		e.killFailsOver(leader, first, "a new leader's child", func(ev event) bool { return ev.what == "start" && ev.holder != first.holder })
	})
}

// killFailsOver kills holder with SIGKILL, whose child first started, and
// checks that the next holder's child (what, matched by next) starts within
// the failover bound, at a higher token, and that the killed child died
// with its tenure.
func (e *procEnv) killFailsOver(holder *exec.Cmd, first event, what string, next func(event) bool) {
	e.t.Helper()
	if err := holder.Process.Kill(); err != nil {
		e.t.Fatal(err)
	}
	killed := time.Now()
	ev := e.await(e.crashBound()+2*time.Second, what, next)
	if took := time.Since(killed); took > e.crashBound() {
		e.t.Errorf("%s started %v after the kill; the failover bound is %v", what, took, e.crashBound())
	}
	if ev.token <= first.token {
		e.t.Errorf("%s has token %d, not above %d", what, ev.token, first.token)
	}
	if alive(first.pid) {
		e.t.Errorf("the killed holder's child %d is still running", first.pid)
	}
}

// TestProcessSIGTERM: SIGTERM to the leading tenure reaches its child, the
// lease is released, tenure exits with the child's status, and the other's
// child starts within a poll.
func TestProcessSIGTERM(t *testing.T) {
	onStores(t, func(t *testing.T, e *procEnv) {
		var errb strings.Builder
		a := e.tenureLog(io.MultiWriter(&errb, os.Stderr), "run", "--id", "a", "job")
		e.await(20*time.Second, "first child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
		// b follows before a is stopped: the bound is from a follower's
		// poll, not from a process start (a -race binary under load took
		// most of a second to start and read).
		w := &logWatch{want: "leader changed", seen: make(chan struct{})}
		e.tenureLog(w, "run", "-v", "--id", "b", "job")
		select {
		case <-w.seen:
		case <-time.After(10 * time.Second):
			t.Fatal("b did not read the lease")
		}
		if err := a.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		e.await(5*time.Second, "SIGTERM at the child", func(ev event) bool { return ev.what == "term" && ev.holder == "a" })
		if err := a.Wait(); err != nil {
			t.Errorf("tenure after SIGTERM: %v, want exit 0 (the child's status)", err)
		}
		// At the default verbosity a run says that it leads and what it
		// runs; a shutdown that was asked for is no warning.
		if log := errb.String(); !strings.Contains(log, `level=INFO msg="elected, token `) || !strings.Contains(log, `level=INFO msg="got terminated`) {
			t.Errorf("a's log at the default verbosity:\n%s\nwant the election and the asked-for shutdown at INFO", log)
		}
		p, _ := plan.New(election.Timing{LeaseDuration: e.lease}, 2, 50*time.Millisecond)
		e.await(p.ReleaseFailover+2*time.Second, "b's child", func(ev event) bool { return ev.what == "start" && ev.holder == "b" })
		if took := time.Since(sent); took > p.ReleaseFailover+time.Second {
			t.Errorf("b's child started %v after the SIGTERM; want within a poll (%v) and a second", took, p.ReleaseFailover)
		}
	})
}

// logWatch passes a log on to stderr and closes seen at the first line
// that contains want.
type logWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (l *logWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return os.Stderr.Write(b)
}

// TestProcessWake: with --wake, a follower of `tenure run` is the standby,
// and a waiting `tenure lock` names itself in the lock's wake record; when
// the holder gets SIGTERM it gives the lease back and wakes it: the
// waiter's child starts long before its next poll could have found the
// lease free. The lease is 60s, so polls are 10.8s to 13.2s apart.
func TestProcessWake(t *testing.T) {
	for _, c := range []struct{ cmd, ready, what string }{
		{"run", "standby: reading the lease every PollInterval", "become the standby"},
		{"lock", "waiting for a wake-up", "name itself in the wake record"},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			e := newProcEnv(t, "")
			e.lease = time.Minute
			a := e.tenure(c.cmd, "--id", "a", "--wake", "127.0.0.1:0", "job")
			e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
			w := &logWatch{want: c.ready, seen: make(chan struct{})}
			e.tenureLog(w, c.cmd, "-v", "--id", "b", "--wake", "127.0.0.1:0", "job")
			select {
			case <-w.seen:
			case <-time.After(10 * time.Second):
				t.Fatalf("b did not %s", c.what)
			}
			if err := a.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			e.await(8*time.Second, "b's child, woken", func(ev event) bool { return ev.what == "start" && ev.holder == "b" })
			if err := a.Wait(); err != nil {
				t.Errorf("tenure %s after SIGTERM: %v", c.cmd, err)
			}
		})
	}
}

// TestProcessOnJeopardy: with --on-jeopardy HUP, the child gets SIGHUP once
// the leader's renewals begin to fail (the lease's current version file
// made unreadable), and keeps running and leading; once the store reads
// again a renewal lands and nothing more is sent.
func TestProcessOnJeopardy(t *testing.T) {
	e := newProcEnv(t, "")
	e.lease = 10 * time.Second // 7s from the first failed renewal to the deadline
	safe := &logWatch{want: "out of jeopardy: a renewal landed", seen: make(chan struct{})}
	a := e.tenureLog(safe, "run", "-v", "--id", "a", "--on-jeopardy", "HUP", "job")
	first := e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" })
	dir := filepath.Join(strings.TrimPrefix(e.store, "file://"), "job.lease")
	latest := func() string {
		names, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		top := -1
		for _, n := range names {
			if v, err := strconv.Atoi(n.Name()); err == nil && v > top {
				top = v
			}
		}
		return filepath.Join(dir, strconv.Itoa(top))
	}
	// The record's version file becomes a directory: reads and writes of
	// the lease fail (for root too) until it is put back.
	cur := latest()
	if err := os.Rename(cur, cur+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cur, 0o755); err != nil {
		t.Fatal(err)
	}
	e.await(10*time.Second, "SIGHUP at the child", func(ev event) bool { return ev.what == "hup" && ev.pid == first.pid })
	if err := os.Remove(cur); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cur+".saved", cur); err != nil {
		t.Fatal(err)
	}
	// Still leading, the same child: a renewal lands, and it writes on.
	select {
	case <-safe.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal landed once the store read again")
	}
	e.awaitAfter(5*time.Second, "a write after the outage",
		func(ev event) bool { return ev.what == "hup" && ev.pid == first.pid },
		func(ev event) bool { return ev.what == "accepted" && ev.pid == first.pid })
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("tenure after SIGTERM: %v", err)
	}
}

// TestProcessSIGHUP: SIGHUP to tenure reaches the child, which keeps
// running and leading; SIGTERM then stops it.
func TestProcessSIGHUP(t *testing.T) {
	e := newProcEnv(t, "")
	a := e.tenure("run", "--id", "a", "job")
	first := e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" })
	if err := a.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The child got it, and wrote again after it: still running, still leading.
	e.awaitAfter(5*time.Second, "a write after SIGHUP at the child",
		func(ev event) bool { return ev.what == "hup" && ev.pid == first.pid },
		func(ev event) bool { return ev.what == "accepted" && ev.pid == first.pid })
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("tenure after SIGTERM: %v", err)
	}
}

// TestProcessStoppedLeader: SIGSTOP the leading tenure past its lease. Its
// supervisor stops the child at the term's deadline all the same, before
// the other can take over: the fenced resource never has to refuse a
// write of the stopped leader's child. On SIGCONT tenure finds its term
// over and campaigns again.
func TestProcessStoppedLeader(t *testing.T) {
	onStores(t, func(t *testing.T, e *procEnv) {
		a := e.tenure("run", "--id", "a", "job")
		first := e.await(20*time.Second, "first child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
		e.tenure("run", "--id", "b", "job")
		if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		e.await(e.crashBound()+2*time.Second, "b's child", func(ev event) bool { return ev.what == "start" && ev.holder == "b" })
		if err := a.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		stopped := false
		for _, ev := range e.events() {
			switch {
			case ev.what == "term" && ev.pid == first.pid:
				stopped = true
			case ev.what == "start" && ev.holder == "b" && !stopped:
				t.Errorf("b's child started while a's child %d, its tenure stopped, still ran", first.pid)
			case ev.what == "refused" && ev.holder == "a":
				t.Errorf("a's child wrote after b's took over (refused by the fence)")
			}
		}
		if !stopped {
			t.Errorf("a's child %d never got SIGTERM", first.pid)
		}
	})
}

// pidGone waits until pid has exited (a pidfd becomes readable), for at
// most within, and reports whether it did.
func pidGone(pid int, within time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH) // gone already
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(within)
	for {
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return n > 0
	}
}

// TestProcessKillTree: kill -9 of tenure run or tenure lock takes every
// process its command started with it: one in the command's group, one
// that called setsid, one that called setsid and lost its parent.
func TestProcessKillTree(t *testing.T) {
	for _, cmd := range []string{"run", "lock"} {
		t.Run(cmd, func(t *testing.T) {
			e := newProcEnv(t, "", "TENURE_TEST_SPAWN=1")
			a := e.tenure(cmd, "--id", "a", "job")
			first := e.await(20*time.Second, "the child", func(ev event) bool { return ev.what == "start" })
			var spawned []int
			e.awaitLog(10*time.Second, "three descendants", func(evs []event) bool {
				spawned = spawned[:0]
				for _, ev := range evs {
					if ev.what == "spawn" {
						spawned = append(spawned, ev.pid)
					}
				}
				return len(spawned) == 3
			})
			if err := a.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			for _, pid := range append(spawned, first.pid) {
				if !pidGone(pid, 5*time.Second) {
					t.Errorf("process %d of the command still runs 5s after kill -9 of tenure", pid)
				}
			}
			t.Logf("kill -9 of tenure %s: the last of its command's processes gone after %v", cmd, time.Since(killed))
		})
	}
}

// TestProcessSignalsReachCommandOnly: SIGHUP to tenure reaches the command
// itself, not the helpers in its group.
func TestProcessSignalsReachCommandOnly(t *testing.T) {
	e := newProcEnv(t, "", "TENURE_TEST_SPAWN=1")
	a := e.tenure("run", "--id", "a", "job")
	first := e.await(20*time.Second, "the child", func(ev event) bool { return ev.what == "start" })
	helper := e.await(10*time.Second, "a helper", func(ev event) bool { return ev.what == "spawn" })
	if err := a.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	e.awaitAfter(5*time.Second, "a write after SIGHUP at the child",
		func(ev event) bool { return ev.what == "hup" && ev.pid == first.pid },
		func(ev event) bool { return ev.what == "accepted" && ev.pid == first.pid })
	if !alive(helper.pid) {
		t.Errorf("SIGHUP to tenure killed the command's helper %d", helper.pid)
	}
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("tenure after SIGTERM: %v", err)
	}
	if !pidGone(helper.pid, 5*time.Second) {
		t.Errorf("the helper %d outlived tenure", helper.pid)
	}
}

// TestProcessLockHeld: `tenure lock --wait 0` while another holds the lock
// exits 75 at once; after it, the lock is free again.
func TestProcessLockHeld(t *testing.T) {
	onStores(t, func(t *testing.T, e *procEnv) {
		holder := e.tenure("lock", "--id", "a", "nightly")
		e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
		self, _ := os.Executable()
		cmd := exec.Command(tenureBinary(t), "lock", "--wait", "0", "--id", "b", "nightly", "--", self, "-test.run=^TestHelperChild$")
		cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store, "TENURE_TEST_CHILD="+e.dir)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitLocked || !strings.Contains(string(out), `held by "a"`) {
			t.Fatalf("lock --wait 0 while held: %v, %s; want exit %d naming a", err, out, exitLocked)
		}
		quiet := func(args ...string) (int, string) {
			cmd := exec.Command(tenureBinary(t), append(args, "nightly", "--", "true")...)
			cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), string(out)
			}
			return 0, string(out)
		}
		if code, out := quiet("lock", "--wait", "0", "--quiet", "--conflict-exit", "0"); code != 0 || out != "" {
			t.Errorf("--quiet --conflict-exit 0 while held: exit %d, %q; want 0 and nothing said", code, out)
		}
		if code, out := quiet("lock", "--wait", "1s", "--id", "d"); code != exitLocked || !strings.Contains(out, `held by "a"`) {
			t.Errorf("--wait 1s while held: exit %d, %q; want %d naming a", code, out, exitLocked)
		}
		status := func() int {
			cmd := exec.Command(tenureBinary(t), "status", "nightly")
			cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store)
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			}
			return 0
		}
		if code := status(); code != 0 {
			t.Errorf("status while held: exit %d, want 0", code)
		}
		if err := holder.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := holder.Wait(); err != nil {
			t.Fatalf("the holder after SIGTERM: %v, want the child's status 0; log:\n%v", err, e.events())
		}
		if code := status(); code != exitFree {
			t.Errorf("status once released: exit %d, want %d", code, exitFree)
		}
		cmd = exec.Command(tenureBinary(t), "lock", "--wait", "0", "--id", "c", "nightly", "--", "true")
		cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("lock after the release: %v, %s", err, out)
		}
	})
}

// TestProcessRestart: with --on-exit restart a command that exits is run
// again while tenure leads, and SIGTERM then ends tenure with the status
// of the command it stopped.
func TestProcessRestart(t *testing.T) {
	e := newProcEnv(t, "")
	cmd := exec.Command(tenureBinary(t), "run", "--on-exit", "restart", "--id", "a", "job", "--",
		"sh", "-c", `echo "run $TENURE_TOKEN"; sleep 0.1; exit 3`)
	cmd.Env = append(os.Environ(), "TENURE_STORE="+e.store, "TENURE_LEASE=2s")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	runs := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "run" {
				runs <- f[1]
			}
		}
	}()
	var tokens []string
	timeout := time.After(15 * time.Second)
	for len(tokens) < 2 {
		select {
		case tok := <-runs:
			tokens = append(tokens, tok)
		case <-timeout:
			t.Fatalf("the command ran %d times, want a restart", len(tokens))
		}
	}
	if tokens[0] != tokens[1] {
		t.Fatalf("restarted under token %s, then %s: want one term", tokens[0], tokens[1])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The command's status: killed by the SIGTERM passed on (143), or its
	// own 3 if it was exiting anyway; 0 if the signal came between runs.
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	if code != 143 && code != 3 && code != 0 {
		t.Fatalf("tenure after SIGTERM: exit %d", code)
	}
}

// get fetches url, or returns "" if nothing answers yet (or within 20s).
func get(url string) (int, string) {
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProcessMetricsAddr: run and lock serve /metrics and the probes on
// --metrics-addr (port 0: the bound address is logged), with the
// instruments of what they run and of the command.
func TestProcessMetricsAddr(t *testing.T) {
	e := newProcEnv(t, "")
	for _, c := range []struct {
		args    []string
		metrics []string
		health  string
	}{
		{[]string{"run", "--id", "a", "job"}, []string{`tenure_leader{lease="job"`, `tenure_term{lease="job"`, "tenure_terms_total", "tenure_store_calls_total", "tenure_child_running", "go_goroutines"}, `"leading":true`},
		{[]string{"lock", "--id", "b", "nightly"}, []string{`tenure_locks_held{locker="b"`, "tenure_store_duration_seconds", "tenure_child_exit_status", "process_open_fds"}, `"held":1`},
	} {
		addr := make(chan string, 1)
		w := &addrWatch{addr: addr}
		cmd := e.tenureLog(w, append([]string{c.args[0], "--metrics-addr", "127.0.0.1:0"}, c.args[1:]...)...)
		id := c.args[2]
		e.await(20*time.Second, id+"'s child", func(ev event) bool { return ev.what == "start" && ev.holder == id })
		base := "http://" + <-addr
		for _, p := range []string{"/livez", "/readyz", "/leader", "/healthz"} {
			if code, b := get(base + p); code != 200 || !strings.Contains(b, c.health) {
				t.Errorf("%s: %s while the command runs: %d %s", c.args[0], p, code, b)
			}
		}
		if code, _ := get(base + "/"); code != 404 {
			t.Errorf("%s: / answers %d, want 404", c.args[0], code)
		}
		_, m := get(base + "/metrics")
		for _, want := range c.metrics {
			if !strings.Contains(m, want) {
				t.Errorf("%s: /metrics lacks %s:\n%s", c.args[0], want, m)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// addrWatch passes a log on to stderr and sends the address tenure says it
// serves on.
type addrWatch struct {
	addr chan string
	once sync.Once
}

func (a *addrWatch) Write(b []byte) (int, error) {
	if _, rest, ok := strings.Cut(string(b), " on http://"); ok {
		a.once.Do(func() { a.addr <- strings.Fields(rest)[0] })
	}
	return os.Stderr.Write(b)
}

// state returns pid's state letter from /proc (R, S, T, Z...), or 0.
func state(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// awaitState waits until every pid is in state want, as /proc shows it:
// the kernel sends no event for a stop that another process can wait on.
func awaitState(t *testing.T, want byte, within time.Duration, pids ...int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(within)
	for {
		ok := true
		for _, p := range pids {
			ok = ok && state(p) == want
		}
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			for _, p := range pids {
				t.Errorf("process %d: state %q, want %q", p, state(p), want)
			}
			t.FailNow()
		}
	}
}

// TestProcessSIGTSTP: Ctrl-Z (SIGTSTP) stops the command's group first,
// then tenure, as a shell stops a job; SIGCONT resumes both.
func TestProcessSIGTSTP(t *testing.T) {
	e := newProcEnv(t, "", "TENURE_TEST_SPAWN=1")
	e.lease = time.Minute // the term outlasts the stop
	a := e.tenure("run", "--id", "a", "job")
	first := e.await(20*time.Second, "the child", func(ev event) bool { return ev.what == "start" })
	helper := e.await(10*time.Second, "a helper", func(ev event) bool { return ev.what == "spawn" })
	// All three helpers started: a SIGTSTP that stops one still between
	// fork and exec leaves the child waiting on it in state D, not T.
	e.awaitLog(10*time.Second, "the three helpers", func(evs []event) bool {
		n := 0
		for _, ev := range evs {
			if ev.what == "spawn" {
				n++
			}
		}
		return n == 3
	})
	if err := a.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, 'T', 5*time.Second, a.Process.Pid, first.pid, helper.pid)
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	n := len(e.events())
	e.awaitLog(5*time.Second, "a write after SIGCONT", func(evs []event) bool {
		for _, ev := range evs[n:] {
			if ev.what == "accepted" && ev.pid == first.pid {
				return true
			}
		}
		return false
	})
}

// TestProcessOncePer: three replicas' crons fire 0, 0.8 and 1.6s into each
// 3s slot, each running `tenure lock --once-per 3s` of a 0.2s job: the job
// runs exactly once per slot, and the replicas that find the slot taken
// exit 79, saying nothing.
func TestProcessOncePer(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "leases")
	const every, slots = 3 * time.Second, 3
	bin := tenureBinary(t)                             // built before the crons fire
	first := time.Now().Truncate(every).Add(2 * every) // slots are aligned to the epoch
	type result struct {
		slot   int
		code   int
		stderr string
	}
	results := make(chan result, 3*slots)
	var wg sync.WaitGroup
	for k := range slots {
		for i, late := range []time.Duration{0, 800 * time.Millisecond, 1600 * time.Millisecond} {
			wg.Go(func() {
				<-time.After(time.Until(first.Add(time.Duration(k)*every + late))) // this replica's cron fires
				cmd := exec.Command(bin, "lock", "--once-per", "3s", "--id", fmt.Sprintf("r%d", i), "nightly", "--",
					"sh", "-c", `echo "$TENURE_NAME $TENURE_TOKEN" >> "$RUNS"; sleep 0.2`)
				cmd.Env = append(os.Environ(), "TENURE_STORE="+store, "RUNS="+filepath.Join(dir, "runs"))
				var errb strings.Builder
				cmd.Stderr = &errb
				err := cmd.Run()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Error(err)
				}
				results <- result{k, code, errb.String()}
			})
		}
	}
	wg.Wait()
	close(results)
	ran := map[int]int{}
	for r := range results {
		switch {
		case r.code == 0:
			ran[r.slot]++
		case r.code == exitSlotTaken && r.stderr == "":
		default:
			t.Errorf("slot %d: exit %d, stderr %q; want 0 or %d and nothing said", r.slot, r.code, r.stderr, exitSlotTaken)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "runs"))
	names := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		names[strings.Fields(l)[0]] = true
	}
	for k := range slots {
		name := "nightly/" + first.Add(time.Duration(k)*every).UTC().Format("20060102T150405Z")
		if ran[k] != 1 || !names[name] {
			t.Errorf("slot %d (%s) ran %d times; runs:\n%s", k, name, ran[k], b)
		}
	}
}

// asUser returns how to run a process that the store directory dir does
// not let write: as root (tests run as root in CI), as the user nobody,
// with dir made nobody's and read-only; otherwise as ourselves, with dir
// read-only.
func asUser(t *testing.T, dir string) *syscall.SysProcAttr {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	const nobody = 65534
	for _, p := range []string{filepath.Dir(tenureBinary(t)), filepath.Dir(dir)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
}

// TestProcessStoreRefusesForGood: a store that refuses for good (writes
// denied; a record no one can decode) ends run and lock at once, in every
// mode, with status 69, naming the store and the cause.
func TestProcessStoreRefusesForGood(t *testing.T) {
	denied := filepath.Join(t.TempDir(), "denied")
	if err := os.Mkdir(denied, 0o755); err != nil {
		t.Fatal(err)
	}
	attr := asUser(t, denied)
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.Mkdir(corrupt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "job.lease"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		attr *syscall.SysProcAttr
		args []string
		want string
	}{
		{denied, attr, []string{"run", "job", "--", "true"}, "permission denied"},
		{denied, attr, []string{"lock", "job", "--", "true"}, "permission denied"},
		{corrupt, nil, []string{"run", "job", "--", "true"}, "invalid record"},
		{corrupt, nil, []string{"lock", "--wait", "5s", "job", "--", "true"}, "invalid record"},
		{corrupt, nil, []string{"lock", "--wait", "0", "job", "--", "true"}, "invalid record"},
		{corrupt, nil, []string{"lock", "--fair", "job", "--", "true"}, "invalid record"},
		{corrupt, nil, []string{"status", "job"}, "invalid record"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, tenureBinary(t), c.args...)
		cmd.Env = append(os.Environ(), "TENURE_STORE=file://"+c.dir, "TENURE_LEASE=10s")
		cmd.SysProcAttr = c.attr
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitUnavailable || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "file://"+c.dir) {
			t.Errorf("%q on %s: %v after %v\n%s\nwant exit %d naming the store and %q", c.args, filepath.Base(c.dir), err, took, out, exitUnavailable, c.want)
			continue
		}
		if took > 3*time.Second {
			t.Errorf("%q on %s: exit %d after %v; want it at once", c.args, filepath.Base(c.dir), exitUnavailable, took)
		}
	}
}

// TestProcessProbeFlood: 200 connections opened and held on the probe port
// of a leader that may open 48 files cannot touch its lease: its command
// keeps running through three leases, and the probes answer again after.
func TestProcessProbeFlood(t *testing.T) {
	e := newProcEnv(t, "")
	e.lease = time.Second
	addr := make(chan string, 1)
	self, _ := os.Executable()
	cmd := exec.Command("sh", "-c", `ulimit -n 48 && exec "$@"`, "sh", tenureBinary(t), "run", "--id", "a", "--metrics-addr", "127.0.0.1:0", "job", "--", self, "-test.run=^TestHelperChild$")
	cmd.Env = append(os.Environ(), "TENURE_STORE="+e.store, "TENURE_LEASE=1s", "TENURE_TEST_CHILD="+e.dir)
	cmd.Stderr = &addrWatch{addr: addr}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go e.watch(out)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	first := e.await(20*time.Second, "the child", func(ev event) bool { return ev.what == "start" })
	target := <-addr
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", target)
		if err != nil {
			break // the backlog is full: the flood is as large as it gets
		}
		fmt.Fprint(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n") // then hold it, never reading
		conns = append(conns, c)
	}
	n := len(e.events())
	e.awaitLog(10*time.Second, "three leases of writes under the flood", func(evs []event) bool {
		writes := 0
		for _, ev := range evs[n:] {
			if ev.what == "accepted" && ev.pid == first.pid {
				writes++
			}
		}
		return writes >= 150 // 20ms apart: 3s
	})
	for _, ev := range e.events() {
		if ev.what == "term" || ev.what == "start" && ev.pid != first.pid {
			t.Fatalf("the flood cost the lease: %+v", ev)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if code, _ := get("http://" + target + "/livez"); code != 200 {
		t.Errorf("/livez after the flood: %d", code)
	}
}

// tenureSh starts tenure with args and, after "--", sh -c script, which
// may log events as the helper child does: `log WHAT` appends "WHAT
// $TENURE_HOLDER $TENURE_TOKEN $$" to the log and wakes the test.
func (e *procEnv) tenureSh(stderr io.Writer, script string, args ...string) *exec.Cmd {
	e.t.Helper()
	full := append(append([]string{}, args...), "--", "sh", "-c",
		`log() { echo "$1 $TENURE_HOLDER $TENURE_TOKEN $$" >> "$TENURE_TEST_CHILD/log"; echo "$1"; }; `+script)
	return e.start(stderr, full, "TENURE_BIN="+tenureBinary(e.t))
}

// TestProcessNestedTenure: a job's own tenure commands work: the child's
// environment names the lease TENURE_NAME, while TENURE_LEASE stays the
// operator's duration. At a 3s lease the default --grace fits: no warning.
func TestProcessNestedTenure(t *testing.T) {
	e := newProcEnv(t, "")
	e.lease = 3 * time.Second
	var errb strings.Builder
	a := e.tenureSh(&errb, `"$TENURE_BIN" status "$TENURE_NAME" >/dev/null; log "status$?"`, "run", "--id", "a", "job")
	ev := e.await(20*time.Second, "the nested status", func(ev event) bool { return strings.HasPrefix(ev.what, "status") })
	if ev.what != "status0" {
		t.Errorf("tenure status inside the job: %s, want exit 0 (held)", ev.what)
	}
	if err := a.Wait(); err != nil {
		t.Errorf("tenure run: %v", err)
	}
	if strings.Contains(errb.String(), "--grace") {
		t.Errorf("a warning at the default grace:\n%s", errb.String())
	}
}

// TestProcessRestartLimit: a command that keeps failing under --on-exit
// restart is restarted after pauses, each failure logged at WARN, and after
// --max-restarts failures the lease goes to the other replica.
func TestProcessRestartLimit(t *testing.T) {
	e := newProcEnv(t, "")
	var errb strings.Builder
	a := e.tenureSh(&errb, `log start; exit 3`, "run", "--id", "a", "--on-exit", "restart", "--max-restarts", "2", "job")
	e.await(20*time.Second, "a's first run", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
	e.tenureSh(os.Stderr, `log start; exec sleep 1000`, "run", "--id", "b", "job")
	e.await(20*time.Second, "b's run, after a's failures", func(ev event) bool { return ev.what == "start" && ev.holder == "b" })
	runs := 0
	for _, ev := range e.events() {
		if ev.holder == "a" {
			runs++
		}
	}
	if runs < 2 {
		t.Errorf("a ran %d times before giving the lease up, want 2", runs)
	}
	_ = a.Process.Signal(syscall.SIGTERM)
	_ = a.Wait() // its log is all copied
	if n := strings.Count(errb.String(), `level=WARN msg="the command exited" cmd=run status=3`); n < 2 {
		t.Errorf("%d failures logged at WARN, want one per failure:\n%s", n, errb.String())
	}
}

// TestProcessReleaseBackoff: two replicas whose command exits at once under
// --on-exit release do not bounce the lease between them: each waits
// longer before campaigning again after each short run (1s, 2s, 4s...).
func TestProcessReleaseBackoff(t *testing.T) {
	e := newProcEnv(t, "")
	for _, id := range []string{"a", "b"} {
		e.tenureSh(os.Stderr, `log start`, "run", "--id", id, "--on-exit", "release", "job")
	}
	var starts []time.Time
	e.awaitLog(30*time.Second, "a's fourth run", func(evs []event) bool {
		n := 0
		for _, ev := range evs {
			if ev.what == "start" && ev.holder == "a" {
				n++
				if n > len(starts) {
					starts = append(starts, time.Now())
				}
			}
		}
		return n >= 4
	})
	// a's pauses before its third and fourth runs are 2s and 4s at least.
	if gap := starts[3].Sub(starts[2]); gap < 3*time.Second {
		t.Errorf("a's third and fourth runs %v apart, want the pause to grow to 4s; runs at %v", gap, starts)
	}
}

// TestProcessSquattedStore: a store directory that another user owns, or
// that others may write, is refused (exit 69, saying why): whoever can
// write it can forge every lease in it. shared=true takes it on purpose.
func TestProcessSquattedStore(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	dirs := map[string]string{open: "writable by group or others"}
	if os.Geteuid() == 0 {
		other := filepath.Join(t.TempDir(), "other")
		if err := os.Mkdir(other, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		dirs[other] = "belongs to uid 65534"
	}
	for dir, want := range dirs {
		cmd := exec.Command(tenureBinary(t), "lock", "--store", "file://"+dir, "job", "--", "true")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUnavailable || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v\n%s\nwant exit %d and %q", dir, err, out, exitUnavailable, want)
		}
		cmd = exec.Command(tenureBinary(t), "lock", "--store", "file://"+dir+"?shared=true", "job", "--", "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s with shared=true: %v\n%s", dir, err, out)
		}
	}
}

// TestProcessOperatorTools: version names the build; list shows what the
// store holds; release --force ends a holder's term by a fenced takeover
// (its command stopped, the next holder's token above) and replaces a
// record no one can read; gc removes only what is no longer needed.
func TestProcessOperatorTools(t *testing.T) {
	e := newProcEnv(t, "")
	tool := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(tenureBinary(t), args...)
		cmd.Env = append(os.Environ(), "TENURE_STORE="+e.store)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := tool("version"); code != 0 || !strings.HasPrefix(out, "tenure ") || !strings.Contains(out, "go1.") {
		t.Errorf("version: %d %s", code, out)
	}
	e.tenure("run", "--id", "a", "job")
	first := e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
	e.tenure("run", "--id", "b", "job")
	if code, out := tool("list"); code != 0 || !strings.Contains(out, `job: held by "a"`) {
		t.Errorf("list: %d %s", code, out)
	}
	if code, out := tool("release", "job"); code != exitUsage || !strings.Contains(out, "--force") {
		t.Errorf("release without --force: %d %s", code, out)
	}
	if code, out := tool("release", "--force", "job"); code != 0 || !strings.Contains(out, `released from "a"`) {
		t.Fatalf("release --force: %d %s", code, out)
	}
	// Not free: held by the release, to be waited out as a silent holder.
	if code, out := tool("status", "job"); !strings.Contains(out, forceHolder) {
		t.Errorf("status after release --force: %d %s; want it held by %s", code, out, forceHolder)
	}
	e.await(10*time.Second, "SIGTERM at a's child", func(ev event) bool { return ev.what == "term" && ev.pid == first.pid })
	next := e.await(10*time.Second, "the next holder's child", func(ev event) bool { return ev.what == "start" && ev.pid != first.pid })
	if next.token <= first.token+1 {
		t.Errorf("the next holder's token %d is not above the release's %d", next.token, first.token+1)
	}
	// At most one believes: a's child was told to stop, and did, before
	// the next holder's child started (the taker waited the forced record
	// out, as a silent holder's).
	ended := false
	for _, ev := range e.events() {
		switch {
		case ev.pid == first.pid && ev.what == "term":
			ended = true
		case ev.pid == first.pid && ended:
			t.Errorf("a's child %s after its SIGTERM", ev.what)
		case ev.pid == next.pid && ev.what == "start" && !ended:
			t.Errorf("the next holder's child started while a's child still ran: %v", e.events())
		}
	}
	if !pidGone(first.pid, 5*time.Second) {
		t.Errorf("a's child %d still runs", first.pid)
	}
	// --now on a holder that renews: refused, saying so, unless asked.
	if code, out := tool("release", "--force", "--now", "job"); code != exitUsage || !strings.Contains(out, "renewed job just now") || !strings.Contains(out, "--accept-overlap") {
		t.Errorf("release --force --now of a renewing holder: %d %s; want it refused", code, out)
	}
	if code, out := tool("release", "--force", "job"); code != 0 || !strings.Contains(out, "stops at its next renewal") || !strings.Contains(out, "once 2.002s has passed unrenewed") {
		t.Errorf("release --force of the next holder: %d %s", code, out)
	}
	if code, out := tool("release", "--force", "job"); code != 0 || !strings.Contains(out, "already released by force") {
		t.Errorf("release --force again: %d %s", code, out)
	}
	// --now less than a lease after a forced release: its old holder may
	// still believe. Refused, unless asked.
	if code, out := tool("release", "--force", "--now", "job"); code != exitUsage || !strings.Contains(out, "released by force") || !strings.Contains(out, "--accept-overlap") {
		t.Errorf("release --force --now after --force: %d %s; want it refused", code, out)
	}
	if code, out := tool("release", "--force", "--now", "--accept-overlap", "job"); code != 0 || !strings.Contains(out, "at once: the next holder may start before it stops") {
		t.Errorf("release --force --now --accept-overlap: %d %s", code, out)
	}

	// A record no one can read: release --force replaces it.
	dir := strings.TrimPrefix(e.store, "file://")
	if err := os.WriteFile(filepath.Join(dir, "broken.lease"), []byte("\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := tool("lock", "--wait", "0", "broken", "--", "true"); code != exitUnavailable || !strings.Contains(out, "release --force") {
		t.Errorf("lock of a broken record: %d %s", code, out)
	}
	if code, out := tool("release", "--force", "broken"); code != 0 {
		t.Errorf("release --force of a broken record: %d %s", code, out)
	}
	if code, out := tool("lock", "--wait", "0", "broken", "--", "true"); code != exitLocked || !strings.Contains(out, forceHolder) {
		t.Errorf("lock at once after the repair, before a lease has passed: %d %s", code, out)
	}
	if code, out := tool("release", "--force", "--now", "--accept-overlap", "broken"); code != 0 {
		t.Errorf("release --force --now: %d %s", code, out)
	}
	if code, out := tool("lock", "--wait", "0", "broken", "--", "true"); code != 0 {
		t.Errorf("lock after the repair: %d %s", code, out)
	}

	// gc: old released records and past slots go; held and recent ones stay.
	store, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour)
	for name, rec := range map[string]lease.Record{
		"old-released": {Holder: "x", Token: uint64(old.UnixMilli()), Duration: time.Second, Released: true, Nonce: "n1", WrittenAt: old},
		"nightly/" + old.UTC().Format("20060102T150405Z"): {Holder: "x", Token: uint64(old.UnixMilli()), Duration: time.Hour, Nonce: "n2", WrittenAt: old},
		"old-held":      {Holder: "x", Token: uint64(old.UnixMilli()), Duration: time.Second, Nonce: "n3", WrittenAt: old},
		"fair::queue.7": {Holder: "w", Token: 12, Duration: time.Second, Nonce: "n4", WrittenAt: old}, // a dead waiter's slot
		"fair::wake":    {Holder: "w", Token: uint64(old.UnixMilli()), Duration: time.Second, Nonce: "n5", WrittenAt: old},
	} {
		if _, err := store.Put(context.Background(), name, rec, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
	}
	code, out := tool("gc")
	if code != 0 || !strings.Contains(out, "removed old-released") || !strings.Contains(out, "removed nightly/") || !strings.Contains(out, "removed fair::queue.7") || !strings.Contains(out, "removed fair::wake") {
		t.Errorf("gc: %d %s", code, out)
	}
	for _, kept := range []string{"old-held", "job", "broken"} {
		if _, _, err := store.Get(context.Background(), kept); err != nil {
			t.Errorf("gc removed %s: %v", kept, err)
		}
	}
}

// TestProcessStoreDirDeleted: the file store's directory deleted under
// running processes is recreated, under the lost-record rule: the leader
// demotes at its next renewal, and a leader runs again once a lease has
// been waited out, with a token above the last.
func TestProcessStoreDirDeleted(t *testing.T) {
	e := newProcEnv(t, "")
	e.lease = time.Second
	e.tenure("run", "--id", "a", "job")
	first := e.await(20*time.Second, "a child", func(ev event) bool { return ev.what == "start" })
	w := &logWatch{want: "leader changed", seen: make(chan struct{})}
	e.tenureLog(w, "run", "-v", "--id", "b", "job")
	select { // b is up and following: it will not create the directory again at its start
	case <-w.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not see the leader")
	}
	if err := os.RemoveAll(strings.TrimPrefix(e.store, "file://")); err != nil {
		t.Fatal(err)
	}
	e.await(5*time.Second, "the leader's child stopped", func(ev event) bool { return ev.what == "term" && ev.pid == first.pid })
	next := e.await(e.crashBound()+5*time.Second, "a child after the loss", func(ev event) bool { return ev.what == "start" && ev.pid != first.pid })
	if next.token <= first.token {
		t.Errorf("token %d after the loss, not above %d", next.token, first.token)
	}
	if _, err := os.Stat(strings.TrimPrefix(e.store, "file://")); err != nil {
		t.Errorf("the store's directory was not recreated: %v", err)
	}
}

// TestProcessMissingTable: a missing table ends lock and run at once with
// 69, saying that create=true creates it.
func TestProcessMissingTable(t *testing.T) {
	testservers.DynamoDB(t) // skips without the server, fails under CI
	store := "dynamodb://" + testservers.UniqueName("missing") + "?region=us-east-1&endpoint=" + os.Getenv(testservers.EnvDynamoDBEndpoint)
	for _, c := range []string{"run", "lock"} {
		cmd := exec.Command(tenureBinary(t), c, "--store", store, "job", "--", "true")
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=tenure", "AWS_SECRET_ACCESS_KEY=tenure")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUnavailable || !strings.Contains(string(out), "create=true") {
			t.Errorf("%s on a missing table: %v\n%s", c, err, out)
		}
	}
}

// TestProcessSemaphore: `tenure lock --slots 2` runs two commands at once,
// each with its own TENURE_SLOT; a third with --wait 0 exits 75 naming both
// holders; --slots 3 is refused (exit 2); a stopped holder's slot is the
// next one's.
func TestProcessSemaphore(t *testing.T) {
	onStores(t, func(t *testing.T, e *procEnv) {
		hold := `log "slot$TENURE_SLOT"; trap 'exit 0' TERM; while :; do sleep 0.1; done`
		a := e.tenureSh(os.Stderr, hold, "lock", "--slots", "2", "--id", "a", "pool")
		b := e.tenureSh(os.Stderr, hold, "lock", "--slots", "2", "--id", "b", "pool")
		slotOf := func(id string) string {
			ev := e.await(20*time.Second, id+"'s command", func(ev event) bool { return strings.HasPrefix(ev.what, "slot") && ev.holder == id })
			return strings.TrimPrefix(ev.what, "slot")
		}
		sa, sb := slotOf("a"), slotOf("b")
		if sa == sb || sa+sb != "01" && sa+sb != "10" {
			t.Fatalf("a holds slot %q, b slot %q", sa, sb)
		}
		run := func(args ...string) (int, string) {
			cmd := exec.Command(tenureBinary(t), args...)
			cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), string(out)
			}
			return 0, string(out)
		}
		if code, out := run("lock", "--slots", "2", "--wait", "0", "--id", "c", "pool", "--", "true"); code != exitLocked ||
			!strings.Contains(out, `by "a"`) || !strings.Contains(out, `by "b"`) {
			t.Errorf("--wait 0 with both slots held: exit %d, %q; want %d naming a and b", code, out, exitLocked)
		}
		if code, out := run("lock", "--slots", "3", "--wait", "0", "--id", "c", "pool", "--", "true"); code != exitUsage || !strings.Contains(out, "2 slots") {
			t.Errorf("--slots 3 on a pool of 2: exit %d, %q; want %d", code, out, exitUsage)
		}
		if err := a.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := a.Wait(); err != nil {
			t.Fatalf("a after SIGTERM: %v", err)
		}
		if code, out := run("lock", "--slots", "2", "--wait", "0", "--id", "c", "pool", "--", "sh", "-c", `echo "slot=$TENURE_SLOT token=$TENURE_TOKEN"`); code != 0 || !strings.Contains(out, "slot="+sa+" ") {
			t.Errorf("after a's release: exit %d, %q; want a's slot %s", code, out, sa)
		}
		if err := b.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatalf("b after SIGTERM: %v", err)
		}
		// release --force of a held slot's record is a lease's: written
		// held by the release, waited out, not released at once.
		d := e.tenureSh(os.Stderr, hold, "lock", "--slots", "2", "--id", "d", "pool")
		slot := "pool::slot." + slotOf("d")
		if code, out := run("release", "--force", slot); code != 0 || !strings.Contains(out, `released from "d"`) || !strings.Contains(out, "stops at its next renewal") {
			t.Errorf("release --force %s: exit %d, %q", slot, code, out)
		}
		if code, out := run("status", slot); !strings.Contains(out, forceHolder) || strings.Contains(out, "released") {
			t.Errorf("status %s after release --force: exit %d, %q; want it held by %s", slot, code, out, forceHolder)
		}
		if err := d.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = d.Wait() // it may have exited on losing its slot
	})
}

// A process of higher priority joins: the leader's command is stopped, the
// lease handed over, and the preferred process's command runs; the old
// leader keeps campaigning, --on-lost exit notwithstanding (a hand-over is
// no loss), and exits 0 on SIGTERM later.
func TestProcessPriority(t *testing.T) {
	onStores(t, func(t *testing.T, e *procEnv) {
		// The trap first: the test signals b as soon as it logs "run".
		script := `trap 'log "stop"; exit 0' TERM; log "run"; while :; do sleep 0.1; done`
		quick := []string{"--lease", "2s", "--cold-poll", "1s", "--priority-hold-off", "2s"}
		a := e.tenureSh(os.Stderr, script, append([]string{"run", "--id", "a", "--standby", "--on-lost", "exit"}, append(quick, "job")...)...)
		e.await(20*time.Second, "a's command", func(ev event) bool { return ev.what == "run" && ev.holder == "a" })
		b := e.tenureSh(os.Stderr, script, append([]string{"run", "--id", "b", "--priority", "5"}, append(quick, "job")...)...)
		e.await(30*time.Second, "a's command stopped", func(ev event) bool { return ev.what == "stop" && ev.holder == "a" })
		e.await(10*time.Second, "b's command", func(ev event) bool { return ev.what == "run" && ev.holder == "b" })
		for _, p := range []*exec.Cmd{b, a} {
			if err := p.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("%v: %v (exited after the hand-over?)", p.Args, err)
			}
			if err := p.Wait(); err != nil {
				t.Fatalf("%v after SIGTERM: %v", p.Args, err)
			}
		}
	})
}
