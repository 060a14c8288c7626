package election

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// Timings used throughout: window = 10s - 10ms - 1s = 8.99s, takeover wait
// = 10.01s.
func testConfig(id string) Config {
	return Config{
		ID: id,
		Timing: Timing{
			LeaseDuration: 10 * time.Second,
			RenewInterval: 2 * time.Second,
			PollInterval:  2 * time.Second,
			OpTimeout:     2 * time.Second,
			RetryMin:      100 * time.Millisecond,
			RetryMax:      time.Second,
			MaxDrift:      1e-3,
			Margin:        time.Second,
		},
		Rand: rand.New(rand.NewPCG(1, 2)),
	}
}

// t0 predates the Unix epoch, so that a record created in these tests gets
// token 1, as a created record's token is at least the writer's Unix time in
// milliseconds (TestMintAboveWallClock covers that floor).
var t0 = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// h drives one Machine by hand.
type h struct {
	t   *testing.T
	now time.Time // time of the last input
	m   *Machine
	out Output
	all []Event // every event so far
}

func newH(t *testing.T, cfg Config) *h {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &h{t: t, m: m}
}

func (x *h) take(o Output) Output {
	x.out = o
	x.all = append(x.all, o.Events...)
	return o
}

func (x *h) start(now time.Time) Output { x.now = now; return x.take(x.m.Start(now)) }
func (x *h) tick(now time.Time) Output  { x.now = now; return x.take(x.m.Tick(now)) }

// callbacksDone reports that the ended term's callbacks returned.
func (x *h) callbacksDone(now time.Time) Output { x.now = now; return x.take(x.m.CallbacksDone(now)) }

// reply answers the op in flight.
func (x *h) reply(now time.Time, op *Op, rec lease.Record, ver lease.Version, err error) Output {
	x.t.Helper()
	if op == nil {
		x.t.Fatalf("reply at %v: no op", now.Sub(t0))
	}
	if now.Before(x.now) {
		x.t.Fatalf("reply at %v: time runs backwards from %v", now.Sub(t0), x.now.Sub(t0))
	}
	x.now = now
	return x.take(x.m.Done(now, Result{ID: op.ID, Record: rec, Version: ver, Err: err}))
}

func (x *h) wantOp(kind OpKind) *Op {
	x.t.Helper()
	if x.out.Op == nil || x.out.Op.Kind != kind {
		x.t.Fatalf("want a %v op, got %+v", kind, x.out.Op)
	}
	return x.out.Op
}

func (x *h) wantNoOp() {
	x.t.Helper()
	if x.out.Op != nil {
		x.t.Fatalf("want no op, got %+v", x.out.Op)
	}
}

func kinds(es []Event) string {
	var b strings.Builder
	for _, e := range es {
		switch e.Kind {
		case EventElected:
			b.WriteString("elected ")
		case EventDemoted:
			b.WriteString("demoted(" + e.Reason.String() + ") ")
		case EventLeaderChanged:
			b.WriteString("leader(" + e.Leader.Holder + ") ")
		case EventAnomaly:
			b.WriteString("anomaly ")
		}
	}
	return strings.TrimSpace(b.String())
}

func (x *h) wantEvents(want string) {
	x.t.Helper()
	if got := kinds(x.out.Events); got != want {
		x.t.Fatalf("events = %q, want %q", got, want)
	}
}

func other(token uint64, nonce string) lease.Record {
	return lease.Record{Holder: "b", Token: token, Duration: 10 * time.Second, Nonce: nonce}
}

// elect makes x the leader with token 1, the acquiring write sent at `sent`
// and confirmed at `confirmed`; the record's version is "v1".
func (x *h) elect(sent, confirmed time.Time) *Op {
	x.t.Helper()
	x.start(sent)
	get := x.wantOp(OpGet)
	x.reply(sent, get, lease.Record{}, "", lease.NotFound("l"))
	put := x.wantOp(OpPut)
	if put.Expect != lease.NoVersion || put.Record.Token != 1 || put.Record.Holder != x.m.cfg.ID {
		x.t.Fatalf("acquiring put = %+v", put)
	}
	x.reply(confirmed, put, lease.Record{}, "v1", nil)
	x.wantEvents("leader(a) elected")
	return put
}

func TestBoundaries(t *testing.T) {
	if got, want := WaitBeforeTakeover(10*time.Second, 1e-3), 10010*time.Millisecond; got != want {
		t.Errorf("WaitBeforeTakeover = %v, want %v", got, want)
	}
	if got, want := LeadWindow(10*time.Second, 1e-3, time.Second), 8990*time.Millisecond; got != want {
		t.Errorf("LeadWindow = %v, want %v", got, want)
	}
	// Rounding is toward safety: up for the wait, so down for the window.
	if got, want := Drift(3, 0.5), time.Duration(2); got != want {
		t.Errorf("Drift(3ns, 0.5) = %v, want %v", got, want)
	}
	if got := Drift(lease.MaxDuration, MaxMaxDrift); got != lease.MaxDuration/10 {
		t.Errorf("Drift(max, max) = %v, want %v (no overflow)", got, lease.MaxDuration/10)
	}
}

func TestFirstElection(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(5*time.Millisecond))
	term, ok := x.m.Term()
	if !ok || term.Token != 1 || term.Holder != "a" {
		t.Fatalf("term = %+v, %v", term, ok)
	}
	// The deadline counts from the send, not the response.
	if want := at(8990 * time.Millisecond); !term.Deadline.Equal(want) {
		t.Fatalf("deadline = %v, want %v", term.Deadline.Sub(t0), want.Sub(t0))
	}
	if want := at(2 * time.Second); !x.out.Wake.Equal(want) {
		t.Fatalf("wake = %v, want renewal at %v", x.out.Wake.Sub(t0), want.Sub(t0))
	}
}

// TestTakeoverInstant pins the first instant a follower may take over:
// a + ttl×(1+ρ), a being when the response showing the version arrived.
func TestTakeoverInstant(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration // stored in the record, not the follower's config
		wait time.Duration
	}{
		{"same ttl", 10 * time.Second, 10010 * time.Millisecond},
		{"longer ttl in record", 30 * time.Second, 30030 * time.Millisecond},
		{"shorter ttl in record", 3 * time.Second, 3003 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newH(t, testConfig("a"))
			x.start(at(0))
			rec := other(7, "n1")
			rec.Duration = tc.ttl
			a := at(40 * time.Millisecond) // response arrival
			x.reply(a, x.wantOp(OpGet), rec, "v7", nil)
			x.wantEvents("leader(b)")
			first := a.Add(tc.wait)
			// Answer every poll with the same version until the wake-up lands
			// on the takeover instant.
			for x.out.Op == nil || x.out.Op.Kind == OpGet {
				if x.out.Op != nil {
					x.reply(x.now, x.out.Op, rec, "v7", nil)
					continue
				}
				if x.out.Wake.After(first) {
					t.Fatalf("wake %v after the takeover instant %v", x.out.Wake.Sub(t0), first.Sub(t0))
				}
				if x.out.Wake.Equal(first) {
					x.tick(first.Add(-1))
					x.wantNoOp()
				}
				x.tick(x.out.Wake)
			}
			put := x.wantOp(OpPut)
			if !x.now.Equal(first) {
				t.Fatalf("acquire sent at %v, want %v", x.now.Sub(t0), first.Sub(t0))
			}
			if put.Expect != "v7" || put.Record.Token != 8 || put.Record.Duration != 10*time.Second {
				t.Fatalf("acquire = %+v, want CAS(v7, token 8, own ttl)", put)
			}
		})
	}
}

// TestChangeRestartsWait: a renewal seen by the follower restarts its wait.
func TestChangeRestartsWait(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), other(3, "n1"), "v1", nil)
	x.tick(x.out.Wake)
	seen := x.out.Wake
	x.reply(seen, x.wantOp(OpGet), other(3, "n2"), "v2", nil) // renewed
	for x.out.Op == nil || x.out.Op.Kind == OpGet {
		if x.out.Op != nil {
			x.reply(x.now, x.out.Op, other(3, "n2"), "v2", nil)
			continue
		}
		x.tick(x.out.Wake)
	}
	if !x.now.Equal(seen.Add(10010 * time.Millisecond)) {
		t.Fatalf("acquire at %v, want %v", x.now.Sub(t0), seen.Add(10010*time.Millisecond).Sub(t0))
	}
}

func TestReleasedOrAbsentTakenAtOnce(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	rec := other(41, "n1")
	rec.Released = true
	x.reply(at(time.Millisecond), x.wantOp(OpGet), rec, "v41", nil)
	x.wantEvents("") // a released lease has no leader
	put := x.wantOp(OpPut)
	if put.Expect != "v41" || put.Record.Token != 42 {
		t.Fatalf("acquire = %+v, want CAS(v41, token 42)", put)
	}
}

// TestLastInstantToLead pins the last instant a leader may act:
// s + ttl×(1-ρ) - margin - 1ns, s being the send time of its last
// confirmed write.
func TestLastInstantToLead(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(300*time.Millisecond))
	deadline := at(8990 * time.Millisecond)
	if !x.m.Leading(deadline.Add(-1)) || x.m.Leading(deadline) {
		t.Fatalf("Leading must hold until %v exclusive", deadline.Sub(t0))
	}
	// The driver was paused and misses the renewal: nothing in flight fails,
	// the deadline simply passes.
	x.tick(deadline.Add(-1))
	x.wantEvents("")
	renew := x.wantOp(OpPut) // late renewal, still in flight at the deadline
	x.tick(deadline)
	x.wantEvents("demoted(deadline passed without renewal)")
	if x.out.Abandon != 0 {
		t.Fatalf("the renewal is not abandoned by demotion")
	}
	// The renewal lands after the deadline: too late to save the term.
	x.reply(deadline.Add(time.Millisecond), renew, lease.Record{}, "v2", nil)
	x.wantEvents("")
	if x.m.Leading(deadline.Add(time.Millisecond)) {
		t.Fatal("leading after a late confirmation")
	}
}

func TestRenewalExtendsFromSendTime(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(10*time.Millisecond))
	x.tick(at(2 * time.Second))
	renew := x.wantOp(OpPut)
	if renew.Expect != "v1" || renew.Record.Token != 1 || renew.Record.Released {
		t.Fatalf("renewal = %+v, want CAS(v1, same token)", renew)
	}
	x.reply(at(2500*time.Millisecond), renew, lease.Record{}, "v2", nil)
	term, _ := x.m.Term()
	if want := at(2*time.Second + 8990*time.Millisecond); !term.Deadline.Equal(want) {
		t.Fatalf("deadline = %v, want %v", term.Deadline.Sub(t0), want.Sub(t0))
	}
	if want := at(4 * time.Second); !x.out.Wake.Equal(want) {
		t.Fatalf("next renewal at %v, want %v", x.out.Wake.Sub(t0), want.Sub(t0))
	}
}

// TestStoreErrorsDemoteAtDeadline: failing renewals retry until the deadline
// and demote exactly at it, not earlier.
func TestStoreErrorsDemoteAtDeadline(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	deadline := at(8990 * time.Millisecond)
	down := errors.New("connection refused")
	var writes int
	for now := at(0); now.Before(deadline); {
		if op := x.out.Op; op != nil {
			if op.Kind == OpPut {
				writes++
			}
			now = x.now.Add(50 * time.Millisecond)
			x.reply(now, op, lease.Record{}, "", down)
		} else {
			now = x.out.Wake
			x.tick(now)
		}
		if now.Before(deadline) && len(x.out.Events) > 0 {
			t.Fatalf("event %q at %v, before the deadline", kinds(x.out.Events), now.Sub(t0))
		}
	}
	x.wantEvents("demoted(store unavailable)")
	if writes < 3 {
		t.Fatalf("only %d renewal attempts before the deadline", writes)
	}
	if !errors.Is(x.m.Err(), down) {
		t.Fatalf("Err() = %v, want the store error", x.m.Err())
	}
}

func TestRenewConflictDemotesAtOnce(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	renew := x.wantOp(OpPut)
	cur := other(2, "n9")
	x.reply(at(2001*time.Millisecond), renew, lease.Record{}, "", &lease.ConflictError{Name: "l", Current: cur, Version: "v9", Found: true})
	x.wantEvents("demoted(lost to another holder) leader(b)")
	if x.m.Leading(at(2001 * time.Millisecond)) {
		t.Fatal("still leading")
	}
	// Without the current record in the error, a read tells who holds it.
	y := newH(t, testConfig("a"))
	y.elect(at(0), at(time.Millisecond))
	y.tick(at(2 * time.Second))
	y.reply(at(2001*time.Millisecond), y.wantOp(OpPut), lease.Record{}, "", lease.Conflict("l"))
	y.wantEvents("")
	y.reply(at(2002*time.Millisecond), y.wantOp(OpGet), cur, "v9", nil)
	y.wantEvents("demoted(lost to another holder) leader(b)")
}

// TestLostRenewalResponse: the renewal applied but its answer was lost; the
// read-back finds our nonce and the term goes on, timed from that send.
func TestLostRenewalResponse(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	renew := x.wantOp(OpPut)
	x.reply(at(2100*time.Millisecond), renew, lease.Record{}, "", errors.New("EOF"))
	get := x.wantOp(OpGet)
	landed := renew.Record
	x.reply(at(2200*time.Millisecond), get, landed, "v2", nil)
	x.wantEvents("")
	term, ok := x.m.Term()
	if !ok || !term.Deadline.Equal(at(2*time.Second+8990*time.Millisecond)) {
		t.Fatalf("term = %+v, %v; want deadline from the lost write's send", term, ok)
	}
	x.tick(x.out.Wake)
	if next := x.wantOp(OpPut); next.Expect != "v2" {
		t.Fatalf("next renewal expects %q, want v2", next.Expect)
	}
}

// TestLostTakeoverResponse: the acquiring write applied but its answer was
// lost; the read-back finds our nonce and we are elected.
func TestLostTakeoverResponse(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	put := x.wantOp(OpPut)
	x.tick(at(2 * time.Second)) // timed out
	if x.out.Abandon != put.ID {
		t.Fatalf("abandon = %d, want %d", x.out.Abandon, put.ID)
	}
	x.reply(at(2010*time.Millisecond), x.wantOp(OpGet), put.Record, "v1", nil)
	x.wantEvents("leader(a) elected")
	term, _ := x.m.Term()
	if !term.Deadline.Equal(at(8990 * time.Millisecond)) {
		t.Fatalf("deadline %v, want from the acquire's send", term.Deadline.Sub(t0))
	}
}

// TestDelayedWrite: a renewal times out and the read-back shows no change, so
// it is retried; meanwhile the first one lands, the retry conflicts, and the
// conflict shows our earlier nonce: still leader.
func TestDelayedWrite(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	first := x.wantOp(OpPut)
	x.tick(at(4 * time.Second)) // timeout
	x.reply(at(4001*time.Millisecond), x.wantOp(OpGet), lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Nonce: "old"}, "v1", nil)
	x.wantNoOp()
	x.tick(x.out.Wake)
	retry := x.wantOp(OpPut)
	if retry.Expect != "v1" || retry.Record.Nonce == first.Record.Nonce {
		t.Fatalf("retry = %+v", retry)
	}
	x.reply(x.now.Add(100*time.Millisecond), retry, lease.Record{}, "",
		&lease.ConflictError{Name: "l", Current: first.Record, Version: "v2", Found: true})
	x.wantEvents("")
	term, ok := x.m.Term()
	if !ok || !term.Deadline.Equal(at(2*time.Second+8990*time.Millisecond)) {
		t.Fatalf("term = %+v, %v; want deadline from the delayed write's send", term, ok)
	}
}

func TestLostAcquireToAnother(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	put := x.wantOp(OpPut)
	x.reply(at(time.Millisecond), put, lease.Record{}, "", &lease.ConflictError{Name: "l", Current: other(1, "n"), Version: "v1", Found: true})
	x.wantEvents("leader(b)")
	x.wantNoOp()
	if x.m.Leading(at(time.Millisecond)) {
		t.Fatal("leading after losing the race")
	}
}

func TestShutdownReleases(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.now = at(time.Second)
	x.take(x.m.Stop(at(time.Second)))
	x.wantEvents("demoted(shut down)")
	x.wantNoOp()
	x.take(x.m.Release(at(1100 * time.Millisecond)))
	rel := x.wantOp(OpPut)
	if !rel.Record.Released || rel.Record.Token != 1 || rel.Expect != "v1" {
		t.Fatalf("release = %+v, want CAS(v1, released, token 1)", rel)
	}
	x.reply(at(1101*time.Millisecond), rel, lease.Record{}, "v2", nil)
	if !x.out.Done {
		t.Fatal("not done after release")
	}
}

func TestShutdownAfterLosingReleasesNothing(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), other(1, "n"), "v1", nil)
	x.take(x.m.Stop(at(time.Second)))
	x.wantEvents("")
	if o := x.take(x.m.Release(at(time.Second))); !o.Done || o.Op != nil {
		t.Fatalf("release of a lease not held = %+v", o)
	}
}

// TestShutdownWithAcquireInFlight: the acquiring write lands after Stop; the
// term is never announced and the lease is given back.
func TestShutdownWithAcquireInFlight(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	put := x.wantOp(OpPut)
	x.now = at(time.Millisecond)
	x.take(x.m.Stop(at(time.Millisecond)))
	x.take(x.m.Release(at(time.Millisecond)))
	x.wantNoOp()
	x.reply(at(2*time.Millisecond), put, lease.Record{}, "v1", nil)
	for _, e := range x.all {
		if e.Kind == EventElected {
			t.Fatal("elected while stopping")
		}
	}
	rel := x.wantOp(OpPut)
	if !rel.Record.Released || rel.Expect != "v1" {
		t.Fatalf("release = %+v", rel)
	}
}

// TestShutdownResolvesPendingWrite: a renewal of unknown outcome at shutdown
// is read back, and the version it wrote is the one released.
func TestShutdownResolvesPendingWrite(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	renew := x.wantOp(OpPut)
	x.reply(at(2100*time.Millisecond), renew, lease.Record{}, "", errors.New("EOF"))
	get := x.wantOp(OpGet) // read-back in flight
	x.take(x.m.Stop(at(2150 * time.Millisecond)))
	x.wantEvents("demoted(shut down)")
	x.take(x.m.Release(at(2150 * time.Millisecond)))
	x.reply(at(2200*time.Millisecond), get, renew.Record, "v2", nil)
	if rel := x.wantOp(OpPut); rel.Expect != "v2" || !rel.Record.Released {
		t.Fatalf("release = %+v, want CAS(v2, released)", rel)
	}
}

func TestPollTimeoutAndErrorsKeepPolling(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	get := x.wantOp(OpGet)
	x.tick(at(2 * time.Second))
	if x.out.Abandon != get.ID {
		t.Fatalf("poll not abandoned after OpTimeout")
	}
	if !errors.Is(x.m.Err(), ErrTimeout) {
		t.Fatalf("Err() = %v", x.m.Err())
	}
	x.tick(x.out.Wake)
	x.reply(x.out.Wake, x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if put := x.wantOp(OpPut); put.Record.Token != 1 {
		t.Fatalf("put = %+v", put)
	}
}

func TestDeterministic(t *testing.T) {
	run := func() []Op {
		x := newH(t, testConfig("a"))
		var ops []Op
		x.start(at(0))
		for i := 0; i < 50; i++ {
			if op := x.out.Op; op != nil {
				ops = append(ops, *op)
				x.reply(x.now.Add(time.Millisecond), op, other(1, "n"), "v1", nil)
			} else {
				x.tick(x.out.Wake)
			}
		}
		return ops
	}
	a, b := run(), run()
	if len(a) != len(b) {
		t.Fatalf("runs differ in length")
	}
	for i := range a {
		if a[i].Record.Nonce != b[i].Record.Nonce || a[i].Kind != b[i].Kind {
			t.Fatalf("op %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", func(*Config) {}, ""},
		{"no id", func(c *Config) { c.ID = "" }, "ID is empty"},
		{"control char id", func(c *Config) { c.ID = "a\nb" }, "printable"},
		{"short lease", func(c *Config) { c.LeaseDuration = time.Microsecond }, "LeaseDuration"},
		{"drift", func(c *Config) { c.MaxDrift = 0.5 }, "MaxDrift"},
		{"zero renew", func(c *Config) { c.RenewInterval = 0 }, "RenewInterval 0s must be positive"},
		{"retry order", func(c *Config) { c.RetryMax = time.Millisecond }, "RetryMax"},
		{"margin eats window", func(c *Config) { c.Margin = 10 * time.Second }, "no lead window"},
		{"no room to retry", func(c *Config) { c.RenewInterval = 7 * time.Second }, "no room to retry"},
		{"payload", func(c *Config) { c.Payload = make([]byte, lease.MaxPayloadLen+1) }, "Payload"},
		{"rand", func(c *Config) { c.Rand = nil }, "Rand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig("a")
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestNoIdleAfterDemotionDuringReadBack: a renewal fails, its read-back is
// in flight when the deadline demotes the leader, and the read-back fails
// too. The retry it would schedule is a renewal, which no longer applies: the
// machine must go on as a follower, not fall idle (found by TestRandomFaults).
func TestNoIdleAfterDemotionDuringReadBack(t *testing.T) {
	for _, readBack := range []struct {
		name string
		rec  lease.Record
		ver  lease.Version
		err  error
	}{
		{"read-back fails", lease.Record{}, "", errors.New("EOF")},
		{"read-back shows no change", lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Nonce: "n1"}, "v1", nil},
	} {
		t.Run(readBack.name, func(t *testing.T) {
			x := newH(t, testConfig("a"))
			x.elect(at(0), at(time.Millisecond))
			x.tick(at(8 * time.Second)) // late renewal
			x.reply(at(8100*time.Millisecond), x.wantOp(OpPut), lease.Record{}, "", errors.New("EOF"))
			get := x.wantOp(OpGet)
			x.tick(at(8990 * time.Millisecond))
			x.wantEvents("demoted(store unavailable)")
			x.callbacksDone(at(8990 * time.Millisecond))
			x.reply(at(9*time.Second), get, readBack.rec, readBack.ver, readBack.err)
			for i := 0; i < 5 && x.out.Op == nil; i++ {
				if x.out.Wake.IsZero() {
					t.Fatalf("idle at %v: no op and nothing scheduled", x.now.Sub(t0))
				}
				x.tick(x.out.Wake)
			}
			// As a follower it waits out its own record like anyone's: seen
			// at 1ms, taken with the next token at 1ms + 10.01s, after a read
			// if the last one is older than a poll interval.
			if x.out.Op != nil && x.out.Op.Kind == OpGet && x.now.Equal(at(10011*time.Millisecond)) {
				x.reply(x.now, x.out.Op, lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Nonce: "n1"}, "v1", nil)
			}
			put := x.wantOp(OpPut)
			if !x.now.Equal(at(10011*time.Millisecond)) || put.Record.Token != 2 || put.Expect != "v1" {
				t.Fatalf("at %v: %+v, want CAS(v1, token 2) at 10.011s", x.now.Sub(t0), put)
			}
		})
	}
}
