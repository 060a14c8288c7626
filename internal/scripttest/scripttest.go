// Package scripttest runs the data-driven tests that tell a package's
// rules as stories (internal/lockcore/testdata, internal/groupcore/
// testdata). A script is steps separated by blank lines:
//
//	# comments
//	command args...
//	----
//	what happened meanwhile, one line each
//
// The package's test runs each command and returns what happened; the
// step passes when that equals what the script says. With -rewrite the
// outputs are written anew: read the diff before committing it.
package scripttest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "write the scripts' expected outputs anew")

// Run runs every script of testdata/ as a subtest: newRun makes the world
// of one script and returns its step, which runs a command and returns
// what happened.
func Run(t *testing.T, newRun func(t *testing.T) func(cmd string) string) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runFile(t, file, newRun(t)) })
	}
}

type step struct {
	text, cmd, want string
}

func parse(t *testing.T, file string) []step {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for _, block := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		head, out, _ := strings.Cut(block, "----\n")
		head = strings.TrimSuffix(head, "----")
		var cmd string
		for _, l := range strings.Split(strings.TrimSpace(head), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				cmd = l
			}
		}
		if cmd == "" {
			t.Fatalf("%s: a step without a command:\n%s", file, block)
		}
		steps = append(steps, step{text: strings.TrimRight(head, "\n"), cmd: cmd, want: strings.TrimSpace(out)})
	}
	return steps
}

func runFile(t *testing.T, file string, do func(cmd string) string) {
	var out strings.Builder
	for i, st := range parse(t, file) {
		got := do(st.cmd)
		if *rewrite {
			if i > 0 {
				out.WriteString("\n\n")
			}
			out.WriteString(st.text + "\n----")
			if got != "" {
				out.WriteString("\n" + got)
			}
			continue
		}
		if got != st.want {
			t.Fatalf("%s: step %d, %q:\ngot\n%s\nwant\n%s", file, i+1, st.cmd, got, st.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Clock is a script's time and what happened at it: the log of a step.
type Clock struct {
	Epoch, Now time.Time
	Log        []string
}

// NewClock returns a Clock at epoch.
func NewClock(epoch time.Time) *Clock { return &Clock{Epoch: epoch, Now: epoch} }

// Note logs what actor did now, as "T actor what", T the time since the
// epoch.
func (c *Clock) Note(actor, format string, args ...any) {
	c.Log = append(c.Log, fmt.Sprintf("%v %s %s", c.Now.Sub(c.Epoch).Round(time.Millisecond), actor, fmt.Sprintf(format, args...)))
}

// Step returns what was logged since the last Step.
func (c *Clock) Step() string {
	out := strings.Join(c.Log, "\n")
	c.Log = nil
	return out
}

// Timed is an actor of a script with timers: a lock, a group's member.
type Timed interface {
	Due() time.Time
	Fire(now time.Time)
}

// Advance lets time pass until until: settle answers whatever is in
// flight, then the earliest timer due among actors (nil: an actor that
// does not fire, a crashed one) fires at its instant, and so on.
func (c *Clock) Advance(until time.Time, settle func(), actors func() []Timed) {
	for {
		settle()
		var next Timed
		for _, a := range actors() {
			if a == nil {
				continue
			}
			if due := a.Due(); !due.IsZero() && !due.After(until) && (next == nil || due.Before(next.Due())) {
				next = a
			}
		}
		if next == nil {
			c.Now = until
			return
		}
		c.Now = next.Due()
		next.Fire(c.Now)
	}
}
