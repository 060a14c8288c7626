package election

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// The protocol's rules are told as scripts in testdata/, one file per
// behaviour, in the manner of etcd-io/raft's interaction tests. A script is
// a sequence of steps:
//
//	command args...
//	----
//	the Machine's output, as the script shows it
//
// separated by blank lines; lines starting with # are comments. Times are
// offsets from the test's epoch; "+d" is d after the previous step. Commands:
//
//	config key=value...    before the first input: id, lease, renew, poll,
//	                       cold-poll, stale=on, clock-tokens=on, op,
//	                       retry-min, retry-max, drift, margin, wall (the
//	                       wall clock's reading at the epoch)
//	start|tick|stop|release|callbacks-done [at=T]
//	                       an input (tick with no time: at the wake-up)
//	resign [at=T] hold=D   Resign, staying a follower for D
//	gate [at=T] closed|open
//	cold [at=T] [off]      SetCold: a cold follower, or (off) the standby
//	hint [at=T]            Wake: a hint that the lease changed
//	reply [at=T] OUTCOME   answer the call in flight, where OUTCOME is
//	                       ok ver=V | notfound | error MESSAGE |
//	                       record RECORD ver=V | conflict RECORD ver=V |
//	                       conflict absent | conflict plain |
//	                       invalid FIELD
//	                       and RECORD is holder=H token=N [ttl=D]
//	                       [nonce=S] [released], or written=#ID, the
//	                       record that put #ID wrote
//	poll until=T OUTCOME   answer every read with OUTCOME and tick at every
//	                       wake-up, until a write or until T; show the end
//	answer until=T [after=D] OUTCOME
//	                       answer every call, D after it was sent, and tick
//	                       at every wake-up, until an event or until T
//	leading [at=T] | term | err
//	                       ask the Machine
//
// go test ./election -run Scripts -rewrite writes the outputs anew; read
// the diff before committing it.
var rewrite = flag.Bool("rewrite", false, "write the scripts' expected outputs anew")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScript(t, file) })
	}
}

type step struct {
	comments []string
	cmd      string
	want     string
}

func parseScript(t *testing.T, file string) []step {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	var cur step
	inOut := false
	var out []string
	flush := func() {
		if cur.cmd != "" {
			cur.want = strings.Join(out, "\n")
			steps = append(steps, cur)
		}
		cur, out, inOut = step{}, nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case inOut && line == "":
			flush()
		case inOut:
			out = append(out, line)
		case line == "----":
			inOut = true
		case strings.HasPrefix(line, "#") || line == "" && cur.cmd == "":
			if cur.cmd != "" {
				t.Fatalf("%s: comment after %q, before its output", file, cur.cmd)
			}
			cur.comments = append(cur.comments, line)
		case cur.cmd != "":
			t.Fatalf("%s: %q follows %q without output", file, line, cur.cmd)
		default:
			cur.cmd = line
		}
	}
	flush()
	return steps
}

func runScript(t *testing.T, file string) {
	steps := parseScript(t, file)
	s := &scripted{t: t, cfg: testConfig("a")}
	var b strings.Builder
	failed := false
	for _, st := range steps {
		got := strings.TrimRight(s.do(st.cmd), "\n")
		for _, c := range st.comments {
			b.WriteString(c + "\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n\n", st.cmd, got)
		if got != st.want && !*rewrite {
			t.Errorf("%s: %s\n got:\n%s\n want:\n%s", file, st.cmd, indent(got), indent(st.want))
			failed = true
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("after checking the new outputs: go test ./election -run Scripts -rewrite")
	}
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// scripted runs one script's Machine.
type scripted struct {
	t       *testing.T
	cfg     Config
	m       *Machine
	now     time.Time
	out     Output
	op      *Op // in flight
	written map[uint64]lease.Record
	view    string // Leader, Term and Err after the last Output
}

func (s *scripted) do(line string) string {
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	if cmd == "config" {
		s.configure(args)
		return "ok"
	}
	if s.m == nil {
		m, err := New(s.cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		s.m, s.now, s.written = m, t0, map[uint64]lease.Record{}
	}
	at, args := s.at(args)
	switch cmd {
	case "start":
		return s.show(s.m.Start(s.time(at)))
	case "tick":
		if at == "" && !s.out.Wake.IsZero() {
			s.now = s.out.Wake
			return s.show(s.m.Tick(s.now))
		}
		return s.show(s.m.Tick(s.time(at)))
	case "stop":
		return s.show(s.m.Stop(s.time(at)))
	case "release":
		return s.show(s.m.Release(s.time(at)))
	case "callbacks-done":
		return s.show(s.m.CallbacksDone(s.time(at)))
	case "resign":
		var hold time.Duration
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "hold="); ok {
				hold, _ = time.ParseDuration(v)
			}
		}
		return s.show(s.m.Resign(s.time(at), hold))
	case "gate":
		closed := len(args) > 0 && args[0] == "closed"
		return s.show(s.m.Gate(s.time(at), closed))
	case "cold":
		cold := len(args) == 0 || args[0] != "off"
		return s.show(s.m.SetCold(s.time(at), cold))
	case "hint":
		return s.show(s.m.Wake(s.time(at)))
	case "notice":
		v := lease.NoVersion
		for _, a := range args {
			if s, ok := strings.CutPrefix(a, "ver="); ok {
				v = lease.Version(s)
			}
		}
		return s.show(s.m.Notice(s.time(at), v))
	case "reply":
		return s.reply(s.time(at), args)
	case "poll":
		return s.poll(args)
	case "answer":
		return s.answer(args)
	case "leading":
		return fmt.Sprintf("leading: %t", s.m.Leading(s.time(at)))
	case "term":
		if tm, ok := s.m.Term(); ok {
			return fmt.Sprintf("term: token=%d deadline=%v", tm.Token, tm.Deadline.Sub(t0))
		}
		return "term: none"
	case "err":
		if err := s.m.Err(); err != nil {
			return "err: " + err.Error()
		}
		return "err: none"
	}
	s.t.Fatalf("unknown command %q", line)
	return ""
}

func (s *scripted) configure(args []string) {
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		d, _ := time.ParseDuration(v)
		switch k {
		case "id":
			s.cfg.ID = v
		case "lease":
			s.cfg.LeaseDuration = d
		case "renew":
			s.cfg.RenewInterval = d
		case "poll":
			s.cfg.PollInterval = d
		case "cold-poll":
			s.cfg.ColdPollInterval = d
		case "stale":
			s.cfg.StaleReads = v == "on"
		case "clock-tokens":
			s.cfg.ClockTokens = v == "on"
		case "op":
			s.cfg.OpTimeout = d
		case "retry-min":
			s.cfg.RetryMin = d
		case "retry-max":
			s.cfg.RetryMax = d
		case "margin":
			s.cfg.Margin = d
		case "drift":
			s.cfg.MaxDrift, _ = strconv.ParseFloat(v, 64)
		case "wall":
			w, err := time.Parse(time.RFC3339, v)
			if err != nil {
				s.t.Fatal(err)
			}
			s.cfg.Wall = func() time.Time { return w.Add(s.now.Sub(t0)) } // w at the epoch, running with it
		default:
			s.t.Fatalf("unknown config key %q", k)
		}
	}
}

// at takes an at=T argument out of args.
func (s *scripted) at(args []string) (string, []string) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "at="); ok {
			return v, append(args[:i:i], args[i+1:]...)
		}
	}
	return "", args
}

// time resolves a script time: "" is the time of the last step, "+d" is d
// after it, "d" is d after the epoch.
func (s *scripted) time(v string) time.Time {
	if v == "" {
		return s.now
	}
	rel := strings.HasPrefix(v, "+")
	d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
	if err != nil {
		s.t.Fatalf("time %q: %v", v, err)
	}
	at := t0.Add(d)
	if rel {
		at = s.now.Add(d)
	}
	if at.Before(s.now) {
		s.t.Fatalf("time %q runs backwards from %v", v, s.now.Sub(t0))
	}
	s.now = at
	return at
}

func (s *scripted) reply(now time.Time, args []string) string {
	if s.op == nil {
		s.t.Fatalf("reply at %v: no call in flight", now.Sub(t0))
	}
	res := s.outcome(args)
	res.ID = s.op.ID
	return s.show(s.m.Done(now, res))
}

// outcome builds a Result from a script's words.
func (s *scripted) outcome(args []string) Result {
	if len(args) == 0 {
		s.t.Fatal("reply without an outcome")
	}
	kw := map[string]string{}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		kw[k] = v
	}
	ver := lease.Version(kw["ver"])
	switch args[0] {
	case "ok":
		return Result{Version: ver}
	case "notfound":
		return Result{Err: lease.NotFound("l")}
	case "error":
		return Result{Err: errors.New(strings.Join(args[1:], " "))}
	case "invalid":
		return Result{Err: &lease.RecordError{Name: "l", Field: args[1], Reason: "garbage"}}
	case "record":
		return Result{Record: s.record(kw), Version: ver}
	case "conflict":
		switch {
		case len(args) > 1 && args[1] == "absent":
			return Result{Err: &lease.ConflictError{Name: "l"}}
		case len(args) > 1 && args[1] == "plain":
			return Result{Err: lease.Conflict("l")}
		}
		return Result{Err: &lease.ConflictError{Name: "l", Current: s.record(kw), Version: ver, Found: true}}
	}
	s.t.Fatalf("unknown outcome %q", args[0])
	return Result{}
}

func (s *scripted) record(kw map[string]string) lease.Record {
	if w, ok := kw["written"]; ok {
		id, _ := strconv.ParseUint(strings.TrimPrefix(w, "#"), 10, 64)
		rec, ok := s.written[id]
		if !ok {
			s.t.Fatalf("no put #%d", id)
		}
		return rec
	}
	tok, _ := strconv.ParseUint(kw["token"], 10, 64)
	ttl := 10 * time.Second
	if v, ok := kw["ttl"]; ok {
		ttl, _ = time.ParseDuration(v)
	}
	nonce := kw["nonce"]
	if nonce == "" {
		nonce = "n"
	}
	_, released := kw["released"]
	return lease.Record{Holder: kw["holder"], Token: tok, Duration: ttl, Nonce: nonce, Released: released}
}

// poll answers reads and ticks until a write, or until the wake-up passes
// until.
func (s *scripted) poll(args []string) string {
	var until time.Time
	if v, ok := strings.CutPrefix(args[0], "until="); ok {
		d, _ := time.ParseDuration(v)
		until = t0.Add(d)
	} else {
		s.t.Fatal("poll needs until=T")
	}
	res := s.outcome(args[1:])
	reads := 0
	var last string
	for range 10000 {
		switch {
		case s.op != nil && s.op.Kind == OpPut:
			return fmt.Sprintf("read %d times; at %v:\n%s", reads, s.now.Sub(t0), last)
		case s.op != nil:
			reads++
			r := res
			r.ID = s.op.ID
			last = s.show(s.m.Done(s.now, r))
		case s.out.Wake.IsZero() || s.out.Wake.After(until):
			return fmt.Sprintf("read %d times; at %v, next wake-up %v", reads, s.now.Sub(t0), s.wake())
		default:
			s.now = s.out.Wake
			last = s.show(s.m.Tick(s.now))
		}
	}
	s.t.Fatal("poll does not end")
	return ""
}

// answer answers every call with an outcome, after a delay, and ticks,
// until an event or until the wake-up passes until.
func (s *scripted) answer(args []string) string {
	var until time.Time
	var after time.Duration
	for len(args) > 0 {
		if v, ok := strings.CutPrefix(args[0], "until="); ok {
			d, _ := time.ParseDuration(v)
			until = t0.Add(d)
		} else if v, ok := strings.CutPrefix(args[0], "after="); ok {
			after, _ = time.ParseDuration(v)
		} else {
			break
		}
		args = args[1:]
	}
	res := s.outcome(args)
	reads, writes := 0, 0
	for range 10000 {
		var last string
		switch {
		case s.op != nil && !s.out.Wake.IsZero() && s.out.Wake.Before(s.now.Add(after)) && !s.out.Wake.After(until):
			s.now = s.out.Wake // a wake-up (a deadline, a timeout) comes before the answer
			last = s.show(s.m.Tick(s.now))
		case s.op != nil && !s.now.Add(after).After(until):
			if s.op.Kind == OpPut {
				writes++
			} else {
				reads++
			}
			r := res
			r.ID = s.op.ID
			s.now = s.now.Add(after)
			last = s.show(s.m.Done(s.now, r))
		case s.out.Wake.IsZero() || s.out.Wake.After(until):
			return fmt.Sprintf("answered %d reads, %d writes; at %v, next wake-up %v", reads, writes, s.now.Sub(t0), s.wake())
		default:
			s.now = s.out.Wake
			last = s.show(s.m.Tick(s.now))
		}
		if len(s.out.Events) > 0 {
			return fmt.Sprintf("answered %d reads, %d writes; at %v:\n%s", reads, writes, s.now.Sub(t0), last)
		}
	}
	s.t.Fatal("answer does not end")
	return ""
}

func (s *scripted) wake() string {
	if s.out.Wake.IsZero() {
		return "none"
	}
	return s.out.Wake.Sub(t0).String()
}

// show prints an Output, and remembers the call it starts.
// checkUnchanged fails the test when an Output says Unchanged while
// Leader, Term or Err report something else than after the last one: a
// driver would not publish it.
func (s *scripted) checkUnchanged(o Output) {
	s.t.Helper()
	term, leading := s.m.Term()
	view := fmt.Sprintf("%+v %+v %v %v", s.m.Leader(), term, leading, s.m.Err())
	if o.Unchanged && view != s.view {
		s.t.Errorf("an Output says Unchanged, but what the Machine reports changed:\n was %s\n now %s", s.view, view)
	}
	s.view = view
}

func (s *scripted) show(o Output) string {
	s.out = o
	s.checkUnchanged(o)
	var b strings.Builder
	if o.Abandon != 0 {
		fmt.Fprintf(&b, "abandon #%d\n", o.Abandon)
		if s.op != nil && s.op.ID == o.Abandon {
			s.op = nil
		}
	}
	if s.op != nil && o.Op == nil && !s.inFlight() {
		s.op = nil
	}
	if o.Op != nil {
		op := *o.Op
		s.op = &op
		if op.Kind == OpGet {
			if op.Stale {
				fmt.Fprintf(&b, "get #%d stale\n", op.ID)
			} else {
				fmt.Fprintf(&b, "get #%d\n", op.ID)
			}
		} else {
			s.written[op.ID] = op.Record
			r := op.Record
			expect := string(op.Expect)
			if expect == "" {
				expect = "none"
			}
			fmt.Fprintf(&b, "put #%d holder=%s token=%d ttl=%v expect=%s", op.ID, r.Holder, r.Token, r.Duration, expect)
			if r.Released {
				b.WriteString(" released")
			}
			b.WriteString("\n")
		}
	}
	for _, e := range o.Events {
		switch e.Kind {
		case EventElected:
			fmt.Fprintf(&b, "elected token=%d deadline=%v\n", e.Term.Token, e.Term.Deadline.Sub(t0))
		case EventDemoted:
			fmt.Fprintf(&b, "demoted token=%d: %v\n", e.Term.Token, e.Reason)
		case EventLeaderChanged:
			if e.Leader.Holder == "" {
				b.WriteString("leader: none\n")
			} else {
				fmt.Fprintf(&b, "leader: %s token=%d\n", e.Leader.Holder, e.Leader.Token)
			}
		case EventAnomaly:
			fmt.Fprintf(&b, "anomaly: %v\n", e.Err)
		}
	}
	switch {
	case o.Done:
		b.WriteString("done")
	case o.Wake.IsZero():
		b.WriteString("idle")
	default:
		fmt.Fprintf(&b, "wake %v", o.Wake.Sub(t0))
	}
	return b.String()
}

// inFlight reports whether the Machine still waits for the call s.op: it
// does while its timeout lies ahead.
func (s *scripted) inFlight() bool { return s.m.op != nil && s.m.op.op.ID == s.op.ID }
