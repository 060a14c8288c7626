package lockcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/scripttest"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A lock's rules are told as scripts in testdata/, one file per
// behaviour (internal/scripttest: a command, then what the locks did
// meanwhile, one line each). Every lock is on "job", on one memlease
// store that answers each call at once, with the default timing (a 10s
// lease, polls about every 2s). Commands:
//
//	lock ID [try] [fair]   a lock of holder ID starts (Lock, TryLock; fair:
//	                       in turn, through the queue)
//	advance D              let D pass: every timer due fires, every call is
//	                       answered, at the instant it is due
//	stop ID                Unlock (or give up waiting)
//	crash ID               ID stops answering and firing, its record left
//	                       as it is
//	forge HOLDER TOKEN     someone else writes the lock's record: held by
//	                       HOLDER at TOKEN
//
// Each output line is "T ID what": T the time since the script began, what
// a call (get, put; on the queue: queue get, queue put), or what the lock
// told its host (granted, busy, refused, ended, wake, retired).
//
// go test ./internal/lockcore -run Scripts -rewrite writes the outputs
// anew (internal/scripttest); read the diff before committing it.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func(t *testing.T) func(string) string {
		w := &scriptWorld{t: t, store: memlease.New(), clk: scripttest.NewClock(time.Unix(1_767_225_600, 0)), locks: map[string]*scriptLock{}}
		return func(cmd string) string {
			w.do(cmd)
			return w.clk.Step()
		}
	})
}

// scriptWorld runs the locks of a script on one store and one clock.
type scriptWorld struct {
	t     *testing.T
	store *memlease.Store
	clk   *scripttest.Clock
	locks map[string]*scriptLock
	order []string // the locks by their start
}

// scriptLock is one lock and its Host.
type scriptLock struct {
	w     *scriptWorld
	id    string
	lk    *Lock
	calls []call // in flight, answered in order
	dead  bool
}

func (w *scriptWorld) do(cmd string) {
	f := strings.Fields(cmd)
	switch f[0] {
	case "lock":
		s := &scriptLock{w: w, id: f[1], lk: new(Lock)}
		cfg := election.Config{ID: f[1], Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(uint64(len(w.locks)), 7)), Wall: func() time.Time { return w.clk.Now }}
		if err := s.lk.Init(s, "job", &cfg, slices.Contains(f, "try"), slices.Contains(f, "fair")); err != nil {
			w.t.Fatal(err)
		}
		w.locks[s.id] = s
		w.order = append(w.order, s.id)
		s.lk.Start()
		w.advance(w.clk.Now)
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			w.t.Fatal(err)
		}
		w.advance(w.clk.Now.Add(d))
	case "stop":
		w.locks[f[1]].lk.Stop()
		w.advance(w.clk.Now)
	case "crash":
		w.locks[f[1]].dead = true
	case "forge":
		_, ver, err := w.store.Get(context.Background(), "job")
		if err != nil && !errors.Is(err, lease.ErrNotFound) {
			w.t.Fatal(err)
		}
		tok, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			w.t.Fatal(err)
		}
		rec := lease.Record{Holder: f[1], Token: tok, Duration: 10 * time.Second, Nonce: "forged", WrittenAt: w.clk.Now}
		if _, err := w.store.Put(context.Background(), "job", rec, ver); err != nil {
			w.t.Fatal(err)
		}
	default:
		w.t.Fatalf("unknown command %q", cmd)
	}
}

// advance fires every timer due until until, earliest first, answering
// the calls each makes at its instant.
func (w *scriptWorld) advance(until time.Time) {
	w.clk.Advance(until, w.settle, func() []scripttest.Timed {
		var out []scripttest.Timed
		for _, id := range w.order {
			if s := w.locks[id]; !s.dead {
				out = append(out, s.lk)
			}
		}
		return out
	})
}

// settle answers every call in flight, at once, until none is left.
func (w *scriptWorld) settle() {
	for progress := true; progress; {
		progress = false
		for _, id := range w.order {
			s := w.locks[id]
			if s.dead || len(s.calls) == 0 {
				continue
			}
			c := s.calls[0]
			s.calls = s.calls[1:]
			s.answer(c)
			progress = true
		}
	}
}

func (s *scriptLock) answer(c call) {
	name := RecordName("job", c.rec)
	res := election.Result{ID: c.op.ID, Record: c.op.Record}
	ctx := context.Background()
	if c.op.Kind == election.OpGet {
		res.Record, res.Version, res.Err = s.w.store.Get(ctx, name)
	} else {
		res.Version, res.Err = s.w.store.Put(ctx, name, c.op.Record, c.op.Expect)
	}
	if c.rec == RecLock {
		s.lk.Result(res)
		return
	}
	s.lk.QueueResult(res, c.op.Kind == election.OpPut)
}

// The Host of a script's lock.

func (s *scriptLock) Now() time.Time { return s.w.clk.Now }

func (s *scriptLock) Call(op election.Op, rec int) {
	what := map[election.OpKind]string{election.OpGet: "get", election.OpPut: "put"}[op.Kind]
	switch {
	case rec != RecLock:
		what = "queue " + what
	case op.Kind == election.OpPut && op.Record.Released:
		what += " released"
	case op.Kind == election.OpPut:
		what += fmt.Sprintf(" token=%d", op.Record.Token)
	}
	s.w.clk.Note(s.id, "%s", what)
	s.calls = append(s.calls, call{op, rec})
}

func (s *scriptLock) Cancel()                                  { s.calls = nil }
func (s *scriptLock) Log(slog.Level, string, ...any)           {}
func (s *scriptLock) Granted(t election.Term)                  { s.w.clk.Note(s.id, "granted token=%d", t.Token) }
func (s *scriptLock) Busy(l election.Leader)                   { s.w.clk.Note(s.id, "busy: held by %s", l.Holder) }
func (s *scriptLock) Refused(err error)                        { s.w.clk.Note(s.id, "refused: %v", err) }
func (s *scriptLock) Publish(driver.Snapshot)                  {}
func (s *scriptLock) Ended(_ election.Term, r election.Reason) { s.w.clk.Note(s.id, "ended: %v", r) }
func (s *scriptLock) Reschedule()                              {}
func (s *scriptLock) WakeNext(addr string)                     { s.w.clk.Note(s.id, "wake %s", addr) }
func (s *scriptLock) Retired()                                 { s.w.clk.Note(s.id, "retired") }
