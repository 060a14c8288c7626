//go:build unix

// Command redislocks measures tenure's Locker on Redis (lease/redislease)
// beside the locks Go services run on Redis today, go-redsync/redsync and
// bsm/redislock, on one Redis server, every client its own process, with
// the same lock TTL: how long a lock takes to pass on Unlock, what a holder
// paused past its TTL does when it resumes (writes a resource accepted
// from a holder that had lost the lock, and how long it kept acting), the
// commands per hour of a holder and its waiters, and how long after a
// holder's crash the next one holds the lock. docs/performance.md has the
// figures.
//
//	scripts/testservers.sh run -- go run ./bench/redislocks
//	go run ./bench/redislocks -redis redis://127.0.0.1:6379/0 -ttl 3s -trials 20
//
// Each lock client is this program again, in -role locker (locker.go).
// The resource is the coordinator: it knows who holds the lock (the last
// to say "locked"), and accepts a write as a fenced resource would for
// tenure (a token below the highest it has accepted is refused) and as an
// unfenced one for the others, which have no token to check.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/benchkit"
)

func main() {
	var (
		role    = flag.String("role", "bench", "bench, or locker (internal)")
		url     = flag.String("redis", os.Getenv("TENURE_REDIS_URL"), "the Redis server (default $TENURE_REDIS_URL)")
		ttl     = flag.Duration("ttl", 3*time.Second, "the lock TTL, the same for all (tenure's LeaseDuration)")
		trials  = flag.Int("trials", 20, "handoffs, crashes and pauses to time, of each system")
		window  = flag.Duration("window", 60*time.Second, "how long to count commands, per number of waiters")
		waiters = flag.String("waiters", "3,10", "numbers of waiters for the command counts")
		systems = flag.String("systems", "tenure,tenure-wake,redsync,redislock", "the systems compared, trial by trial")
		system  = flag.String("system", "", "locker: the library")
		name    = flag.String("name", "", "locker: the lock's name")
		id      = flag.String("id", "", "locker: its ID")
	)
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "redislocks: no Redis: -redis URL, or run under scripts/testservers.sh run --")
		os.Exit(2)
	}
	if *role == "locker" {
		if err := locker(*url, *system, *name, *id, *ttl); err != nil {
			fmt.Fprintln(os.Stderr, "locker:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(*url, strings.Split(*systems, ","), *ttl, *trials, *window, *waiters); err != nil {
		fmt.Fprintln(os.Stderr, "redislocks:", err)
		os.Exit(1)
	}
}

type proc struct {
	id  string
	cmd *exec.Cmd
	in  *bufio.Writer
	inf *os.File
}

type event struct {
	p    *proc
	at   time.Time
	what string
	arg  string
}

// group is the processes of one system on one lock name.
type group struct {
	sys     string
	procs   []*proc
	ch      chan event
	backlog []event // events wait passed over (writes aside), for the next wait
}

func start(self, url, sys, name string, n int, ttl time.Duration) (*group, error) {
	g := &group{sys: sys, ch: make(chan event, 1<<16)}
	for i := range n {
		cmd := exec.Command(self, "-role", "locker", "-redis", url, "-system", sys, "-name", name, "-id", fmt.Sprintf("p%d", i), "-ttl", ttl.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			r.Close()
			w.Close()
			g.stop()
			return nil, err
		}
		r.Close()
		p := &proc{id: fmt.Sprintf("p%d", i), cmd: cmd, in: bufio.NewWriter(w), inf: w}
		g.procs = append(g.procs, p)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) < 2 {
					continue
				}
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				e := event{p: p, at: time.Unix(0, ns), what: f[1]}
				if len(f) > 2 {
					e.arg = f[2]
				}
				g.ch <- e
			}
			g.ch <- event{p: p, at: time.Now(), what: "exit"}
		}()
		// Started one after another, so that the first holds the lock.
		if _, err := g.wait(30*time.Second, func(e event) bool { return e.p == p && e.what == "started" }); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

func (p *proc) tell(s string) {
	p.in.WriteString(s + "\n")
	p.in.Flush()
}

func (g *group) wait(d time.Duration, pred func(event) bool) (event, error) {
	for i, e := range g.backlog {
		if pred(e) {
			g.backlog = slices.Delete(g.backlog, i, i+1)
			return e, nil
		}
	}
	timeout := time.After(d)
	for {
		select {
		case e := <-g.ch:
			if pred(e) {
				return e, nil
			}
			if e.what != "write" {
				g.backlog = append(g.backlog, e)
			}
		case <-timeout:
			var seen []string
			for _, e := range g.backlog {
				seen = append(seen, e.p.id+" "+e.what)
			}
			return event{}, fmt.Errorf("%s: nothing awaited within %v (passed over: %v)", g.sys, d, seen)
		}
	}
}

// next delivers the backlog's events first, then the channel's.
func (g *group) next() <-chan event {
	if len(g.backlog) == 0 {
		return g.ch
	}
	ch := make(chan event, 1)
	ch <- g.backlog[0]
	g.backlog = g.backlog[1:]
	return ch
}

func (g *group) stop() {
	for _, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.inf.Close()
	}
	for _, p := range g.procs {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

func locked(e event) bool { return e.what == "locked" }

func bench(url string, systems []string, ttl time.Duration, trials int, window time.Duration, waiters string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("Redis %s; lock TTL %v; %d trials each, interleaved\n\n", url, ttl, trials)
	handoff := map[string][]time.Duration{}
	crash := map[string][]time.Duration{}
	type pauseResult struct {
		stale, accepted int
		acting          time.Duration
	}
	pause := map[string][]pauseResult{}
	for i := range trials {
		for _, sys := range systems {
			name := fmt.Sprintf("lock-%d-%d", time.Now().UnixNano(), i)
			h, c, err := handoffThenCrash(self, url, sys, name, ttl)
			if err != nil {
				return fmt.Errorf("%s trial %d: %w", sys, i+1, err)
			}
			handoff[sys], crash[sys] = append(handoff[sys], h), append(crash[sys], c)
			st, acc, acting, err := pauseTrial(self, url, sys, name+"-pause", ttl)
			if err != nil {
				return fmt.Errorf("%s pause %d: %w", sys, i+1, err)
			}
			pause[sys] = append(pause[sys], pauseResult{st, acc, acting})
			fmt.Printf("%-11s trial %2d: handoff %v, crash → next holder %.2f TTL, paused holder: %d stale writes (%d accepted), acted %v after SIGCONT\n",
				sys, i+1, h.Round(time.Millisecond), float64(c)/float64(ttl), st, acc, acting.Round(time.Millisecond))
		}
	}
	fmt.Println()
	for _, sys := range systems {
		fmt.Printf("%s:\n", sys)
		summary("handoff on Unlock", handoff[sys], func(d time.Duration) string { return d.Round(time.Millisecond).String() })
		summary("crash → next ÷ TTL", crash[sys], func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(ttl)) })
		var stale, accepted, with int
		var acting []time.Duration
		for _, p := range pause[sys] {
			stale, accepted = stale+p.stale, accepted+p.accepted
			if p.accepted > 0 {
				with++
			}
			acting = append(acting, p.acting)
		}
		fmt.Printf("  %-22s %d stale writes, %d accepted by the resource, in %d of %d trials\n", "paused past its TTL", stale, accepted, with, len(pause[sys]))
		summary("acting after SIGCONT", acting, func(d time.Duration) string { return d.Round(time.Millisecond).String() })
	}
	fmt.Printf("\ncommands per hour (a holder and its waiters, counted at each client over %v):\n", window)
	for _, f := range strings.Split(waiters, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-waiters %q", waiters)
		}
		for _, sys := range systems {
			perHour, err := commands(self, url, sys, fmt.Sprintf("cost-%d-%d", time.Now().UnixNano(), n), n, ttl, window)
			if err != nil {
				return err
			}
			fmt.Printf("  %-11s %2d waiters: %8.0f commands/h\n", sys, n, perHour)
		}
	}
	return nil
}

// handoffThenCrash runs three processes on one lock: the holder unlocks,
// and the next to say "locked" times the handoff; then that holder is
// killed (-9) at a random moment, and the next times the crash failover.
func handoffThenCrash(self, url, sys, name string, ttl time.Duration) (handoff, crash time.Duration, err error) {
	g, err := start(self, url, sys, name, 3, ttl)
	if err != nil {
		return 0, 0, err
	}
	defer g.stop()
	first, err := g.wait(3*ttl+10*time.Second, locked)
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(ttl/3 + rand.N(ttl/3)) // the waiters are waiting
	first.p.tell("u")
	un, err := g.wait(10*time.Second, func(e event) bool { return e.p == first.p && e.what == "unlocking" })
	if err != nil {
		return 0, 0, err
	}
	next, err := g.wait(3*ttl+10*time.Second, func(e event) bool { return locked(e) && e.p != first.p })
	if err != nil {
		return 0, 0, err
	}
	handoff = next.at.Sub(un.at)
	time.Sleep(ttl/2 + rand.N(ttl)) // a crash at a random moment of its keeping
	t0 := time.Now()
	_ = next.p.cmd.Process.Kill()
	after, err := g.wait(3*ttl+10*time.Second, func(e event) bool { return locked(e) && e.p != next.p })
	if err != nil {
		return 0, 0, err
	}
	return handoff, after.at.Sub(t0), nil
}

// pauseTrial stops the holder (SIGSTOP) for 2 TTL, while the waiter takes
// the lock and writes, and resumes it: it returns the holder's writes
// after that (stale: the lock is another's), those a resource accepted,
// and how long after SIGCONT the holder said its lock was over.
func pauseTrial(self, url, sys, name string, ttl time.Duration) (stale, accepted int, acting time.Duration, err error) {
	g, err := start(self, url, sys, name, 2, ttl)
	if err != nil {
		return 0, 0, 0, err
	}
	defer g.stop()
	first, err := g.wait(3*ttl+10*time.Second, locked)
	if err != nil {
		return 0, 0, 0, err
	}
	var highest uint64 // the fence: the highest token accepted
	holder := first.p
	time.Sleep(ttl/3 + rand.N(ttl/3))
	paused := time.Now()
	_ = first.p.cmd.Process.Signal(syscall.SIGSTOP)
	resume := paused.Add(2 * ttl)
	var over time.Time
	var cont time.Time
	deadline := resume.Add(3*ttl + 10*time.Second)
	for over.IsZero() && time.Now().Before(deadline) {
		var e event
		select {
		case e = <-g.next():
		case <-time.After(time.Until(resume)):
			if cont.IsZero() {
				cont = time.Now()
				_ = first.p.cmd.Process.Signal(syscall.SIGCONT)
			}
			resume = deadline // no more SIGCONT
			continue
		}
		switch e.what {
		case "locked":
			holder = e.p
		case "write":
			tok, _ := strconv.ParseUint(e.arg, 10, 64)
			fenced := strings.HasPrefix(sys, "tenure")
			ok := !fenced || tok >= highest
			if ok && fenced {
				highest = tok
			}
			if e.p != holder {
				stale++
				if ok {
					accepted++
				}
			}
		case "over":
			if e.p == first.p {
				over = e.at
			}
		case "exit":
			return 0, 0, 0, errors.New("a locker exited")
		}
	}
	if holder == first.p {
		return 0, 0, 0, errors.New("the waiter never took the lock from the paused holder")
	}
	if over.IsZero() {
		return 0, 0, 0, errors.New("the paused holder never said its lock was over")
	}
	return stale, accepted, over.Sub(cont), nil
}

// commands runs a holder and n waiters for window and returns the
// commands all of them sent, per hour.
func commands(self, url, sys, name string, n int, ttl, window time.Duration) (float64, error) {
	g, err := start(self, url, sys, name, n+1, ttl)
	if err != nil {
		return 0, err
	}
	defer g.stop()
	if _, err := g.wait(3*ttl+10*time.Second, locked); err != nil {
		return 0, err
	}
	time.Sleep(ttl) // settled: every waiter waiting
	before, err := g.stats()
	if err != nil {
		return 0, err
	}
	time.Sleep(window)
	after, err := g.stats()
	if err != nil {
		return 0, err
	}
	return float64(after-before) * float64(time.Hour) / float64(window), nil
}

// stats sums every process's command count (SIGUSR1).
func (g *group) stats() (int64, error) {
	var sum int64
	for _, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
		e, err := g.wait(5*time.Second, func(e event) bool { return e.p == p && e.what == "stats" })
		if err != nil {
			return 0, err
		}
		n, _ := strconv.ParseInt(e.arg, 10, 64)
		sum += n
	}
	return sum, nil
}

func summary(what string, ds []time.Duration, f func(time.Duration) string) {
	if q := benchkit.Quantiles(ds, f); q != "" {
		fmt.Printf("  %-22s %s\n", what, q)
	}
}
