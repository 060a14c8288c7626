package tenure_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// lines is a slog.Handler that keeps what it is given, as text.
type lines struct {
	mu  *sync.Mutex
	out *[]string
}

func newLines() lines { return lines{mu: new(sync.Mutex), out: new([]string)} }

func (l lines) Enabled(context.Context, slog.Level) bool { return true }
func (l lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	*l.out = append(*l.out, b.String())
	l.mu.Unlock()
	return nil
}
func (l lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l lines) WithGroup(string) slog.Handler      { return l }

func (l lines) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range *l.out {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// A store gone for a minute mid-run, each error's text a little different
// (as a dial error's port or a request ID is): the errors are counted, not
// repeated, at most one line of a kind per 10s, and one line says when
// the store answers again.
func TestStoreOutageDoesNotFloodTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := newLines()
		faults := leasetest.NewFaults(memlease.New())
		c := newCandidate(t, tenure.Config{Store: faults, Runtime: tenure.Runtime{ID: "a", Logger: slog.New(out)}, Timing: tenure.Timing{LeaseDuration: 3 * time.Second}})
		run(t, c, context.Background())
		wait(5 * time.Second)
		n := 0
		faults.SetHook(func(op, name string) error {
			n++
			return fmt.Errorf("dial tcp 127.0.0.1:%d: connect: connection refused", 40000+n)
		})
		wait(time.Minute)
		if got := out.count("WARN store error"); got < 2 || got > 7 {
			t.Errorf("%d store error lines in a minute of outage (%d calls failed); want one per 10s at most:\n%s", got, n, strings.Join(*out.out, "\n"))
		}
		if out.count("WARN store error") > 1 && !strings.Contains(strings.Join(*out.out, "\n"), "repeated=") {
			t.Errorf("no line counts the errors held back:\n%s", strings.Join(*out.out, "\n"))
		}
		faults.SetHook(nil)
		wait(10 * time.Second)
		if got := out.count("WARN store answers again"); got != 1 {
			t.Errorf("%d lines say the store answers again; want 1:\n%s", got, strings.Join(*out.out, "\n"))
		}
	})
}

// A duplicate ID is one error, logged as an anomaly, not also as a store
// error.
func TestDuplicateIDLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := newLines()
		mem := memlease.New()
		a := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "same"}})
		run(t, a, context.Background())
		wait(time.Second)
		b := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "same", Logger: slog.New(out), Rand: nil}})
		run(t, b, context.Background())
		wait(time.Minute)
		all := strings.Join(*out.out, "\n")
		if out.count("ERROR lease anomaly") == 0 || strings.Contains(all, "store error") {
			t.Errorf("the duplicate ID, logged as:\n%s", all)
		}
	})
}

// A preferred standby beside a leader that never hands it the lease (one
// of equal priority) says so once it has not been handed the lease for
// three hold-offs.
func TestPreferredButNotHandedOverSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		a := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "a", WakeAddr: tenure.NoWake}, Priority: 10})
		run(t, a, context.Background())
		wait(time.Second)
		out := newLines()
		b := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "b", WakeAddr: tenure.NoWake, Logger: slog.New(out)}, Priority: 10})
		run(t, b, context.Background())
		wait(10 * time.Minute)
		if st := a.Status(); !st.Leading {
			t.Fatalf("a: %+v, want leading: equal priorities never hand over", st)
		}
		if got := out.count("WARN preferred, but not handed the lease"); got != 1 {
			t.Fatalf("%d lines say why b never led; want 1:\n%s", got, strings.Join(*out.out, "\n"))
		}
	})
}
