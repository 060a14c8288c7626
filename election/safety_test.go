package election

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// poll answers reads with rec (found) or NotFound until the machine sends a
// write or now reaches until; it returns the write, or nil.
func (x *h) pollUntil(until time.Time, found bool, rec lease.Record, ver lease.Version) *Op {
	x.t.Helper()
	for i := 0; i < 10000; i++ {
		switch {
		case x.out.Op != nil && x.out.Op.Kind == OpPut:
			return x.out.Op
		case x.out.Op != nil:
			if found {
				x.reply(x.now, x.out.Op, rec, ver, nil)
			} else {
				x.reply(x.now, x.out.Op, lease.Record{}, "", lease.NotFound("l"))
			}
		case x.out.Wake.IsZero():
			x.t.Fatalf("idle at %v", x.now.Sub(t0))
		case x.out.Wake.After(until):
			return nil
		default:
			x.tick(x.out.Wake)
		}
	}
	x.t.Fatal("no end")
	return nil
}

func anomalies(es []Event) []error {
	var out []error
	for _, e := range es {
		if e.Kind == EventAnomaly {
			out = append(out, e.Err)
		}
	}
	return out
}

// A follower that has seen the record and then finds it absent waits out
// the longest lease it has seen before it creates it, and mints a token
// above every token it saw. The loss is reported once.
func TestLostRecordWaitedOut(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	long := other(51, "n1")
	long.Duration = 30 * time.Second
	x.reply(at(0), x.wantOp(OpGet), long, "v1", nil)
	x.tick(x.out.Wake)
	x.reply(x.now, x.wantOp(OpGet), other(51, "n2"), "v2", nil) // renewed, now with a 10s lease
	x.tick(x.out.Wake)
	gone := x.now
	x.reply(gone, x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if errs := anomalies(x.out.Events); len(errs) != 1 || !strings.Contains(errs[0].Error(), "absent after token 51") {
		t.Fatalf("anomalies = %v", errs)
	}
	wait := WaitBeforeTakeover(30*time.Second, 1e-3) // the longest ttl seen, not the last
	if put := x.pollUntil(gone.Add(wait-1), false, lease.Record{}, ""); put != nil {
		t.Fatalf("created at %v, before %v of absence", x.now.Sub(gone), wait)
	}
	put := x.pollUntil(gone.Add(wait+3*time.Second), false, lease.Record{}, "")
	if put == nil || x.now.Sub(gone) != wait {
		t.Fatalf("create after %v of absence (%+v), want after %v", x.now.Sub(gone), put, wait)
	}
	if put.Expect != lease.NoVersion || put.Record.Token != 52 {
		t.Fatalf("create = %+v, want token 52", put)
	}
	if n := len(anomalies(x.all)); n != 1 {
		t.Fatalf("%d anomalies reported, want 1", n)
	}
}

// A released record written back with a lower token is not free: it might
// hide a live holder. The follower waits it out and mints above the highest
// token it saw.
func TestTokenWentBack(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), other(51, "n1"), "v1", nil)
	x.tick(x.out.Wake)
	back := other(1, "n0")
	back.Released = true
	restored := x.now
	x.reply(restored, x.wantOp(OpGet), back, "v9", nil)
	if errs := anomalies(x.out.Events); len(errs) != 1 || !strings.Contains(errs[0].Error(), "went from 51 to 1") {
		t.Fatalf("anomalies = %v", errs)
	}
	if x.out.Op != nil && x.out.Op.Kind == OpPut {
		t.Fatalf("took a written-back released record at once: %+v", x.out.Op)
	}
	put := x.pollUntil(restored.Add(time.Minute), true, back, "v9")
	if put == nil || x.now.Sub(restored) != WaitBeforeTakeover(10*time.Second, 1e-3) || put.Record.Token != 52 || put.Expect != "v9" {
		t.Fatalf("after %v: %+v, want CAS(v9, token 52) after a lease", x.now.Sub(restored), put)
	}
}

// A leader whose renewal finds the record absent, written back, or taken
// steps down at once, and says which.
func TestRenewalFindsRecordLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		found bool
		cur   lease.Record
		want  string
	}{
		{"absent", false, lease.Record{}, "demoted(lease record lost)"},
		{"lower token", true, other(0, "x"), "demoted(lease record lost)"},
		{"own record written back", true, lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Nonce: "old"}, "demoted(lease record lost)"},
		{"taken", true, other(2, "x"), "demoted(lost to another holder)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newH(t, testConfig("a"))
			x.elect(at(0), at(time.Millisecond))
			x.tick(at(2 * time.Second))
			renew := x.wantOp(OpPut)
			x.reply(at(2*time.Second+time.Millisecond), renew, lease.Record{}, "", &lease.ConflictError{Name: "l", Found: tc.found, Current: tc.cur, Version: "v9"})
			if got := kinds(x.out.Events); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("events = %q, want %q first", got, tc.want)
			}
		})
	}
}

// A record this machine creates gets a token of at least the wall time in
// Unix milliseconds; above that, the highest token seen + 1 wins.
func TestMintAboveWallClock(t *testing.T) {
	wall := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cfg := testConfig("a")
	cfg.Wall = func() time.Time { return wall }
	x := newH(t, cfg)
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if put := x.wantOp(OpPut); put.Record.Token != uint64(wall.UnixMilli()) {
		t.Fatalf("token %d, want the wall time in ms %d", put.Record.Token, wall.UnixMilli())
	}
	// Without Wall, the wall reading of the input's time.
	y := newH(t, testConfig("a"))
	now := wall.Add(time.Hour)
	y.start(now)
	y.reply(now, y.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if put := y.wantOp(OpPut); put.Record.Token != uint64(now.UnixMilli()) {
		t.Fatalf("token %d, want %d", put.Record.Token, now.UnixMilli())
	}
	// A record lost after a token above the clock: seen + 1.
	z := newH(t, cfg)
	z.start(at(0))
	high := other(uint64(wall.UnixMilli())+1000, "n")
	z.reply(at(0), z.wantOp(OpGet), high, "v1", nil)
	z.tick(z.out.Wake)
	z.reply(z.now, z.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if put := z.pollUntil(z.now.Add(time.Minute), false, lease.Record{}, ""); put == nil || put.Record.Token != high.Token+1 {
		t.Fatalf("create = %+v, want token %d", put, high.Token+1)
	}
}

// The last token cannot be followed: the machine says so and keeps polling.
func TestLastToken(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	rec := other(maxToken, "n")
	rec.Released = true
	x.reply(at(0), x.wantOp(OpGet), rec, "v1", nil)
	x.wantNoOp()
	if err := x.m.Err(); err == nil || !strings.Contains(err.Error(), "last one") {
		t.Fatalf("Err = %v", err)
	}
}

// After a term ends the machine only reads until CallbacksDone: it never
// campaigns while the term's callbacks run.
func TestNoCampaignUntilCallbacksDone(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	x.reply(at(2*time.Second), x.wantOp(OpPut), lease.Record{}, "", errors.New("EOF"))
	for !strings.Contains(kinds(x.all), "demoted") {
		if x.out.Op != nil {
			x.reply(x.now, x.out.Op, lease.Record{}, "", errors.New("EOF"))
			continue
		}
		x.tick(x.out.Wake)
	}
	// Nobody else holds it: a released record would be taken at once.
	free := lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Nonce: "n", Released: true}
	if put := x.pollUntil(x.now.Add(time.Hour), true, free, "v2"); put != nil {
		t.Fatalf("wrote %+v while the term's callbacks run", put)
	}
	x.callbacksDone(x.now)
	put := x.pollUntil(x.now.Add(3*time.Second), true, free, "v2")
	if put == nil || put.Record.Token != 2 {
		t.Fatalf("after CallbacksDone: %+v, want a takeover with token 2", put)
	}
}

// A follower resumed from a pause past its takeover instant reads before it
// writes: what it knew is a pause old.
func TestReadBeforeTakeoverAfterPause(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), other(3, "n1"), "v1", nil)
	// Answer polls until the takeover is scheduled next.
	for x.out.Op != nil || x.out.Wake.Before(at(10010*time.Millisecond)) {
		if x.out.Op != nil {
			x.reply(x.now, x.out.Op, other(3, "n1"), "v1", nil)
			continue
		}
		x.tick(x.out.Wake)
	}
	x.tick(at(time.Minute)) // the process was paused through the takeover instant
	if op := x.wantOp(OpGet); op == nil {
		t.Fatal("no read")
	}
	x.reply(x.now, x.out.Op, other(3, "n1"), "v1", nil)
	if put := x.wantOp(OpPut); put.Expect != "v1" {
		t.Fatalf("takeover = %+v", put)
	}
}

// Releasing while only a follower's read is in flight ends at once: that
// read cannot have written anything.
func TestReleaseAbandonsFollowerRead(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), other(3, "n1"), "v1", nil)
	x.tick(x.out.Wake)
	get := x.wantOp(OpGet)
	x.take(x.m.Stop(x.now))
	out := x.take(x.m.Release(x.now))
	if !out.Done || out.Abandon != get.ID {
		t.Fatalf("release = %+v, want done at once, the read abandoned", out)
	}
}

// Backoff doubles from RetryMin to RetryMax, drawn from the upper half, and
// never overflows, even for the longest lease after hours of failures.
func TestBackoffBoundsAndNoOverflow(t *testing.T) {
	for _, ttl := range []time.Duration{10 * time.Second, 7 * time.Minute, lease.MaxDuration} {
		cfg := testConfig("a")
		cfg.LeaseDuration, cfg.RenewInterval, cfg.PollInterval, cfg.OpTimeout = ttl, ttl/5, ttl/5, ttl/5
		cfg.RetryMin, cfg.RetryMax, cfg.Margin = ttl/100, ttl/10, ttl/10
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		prevCap := time.Duration(0)
		for attempt := 0; attempt < 100; attempt++ {
			m.attempt = attempt
			d := m.backoff()
			capd := cfg.RetryMax
			if attempt < 62 && cfg.RetryMin<<attempt <= cfg.RetryMax && cfg.RetryMin<<attempt > 0 {
				capd = cfg.RetryMin << attempt
			}
			if d < capd/2 || d > capd || d > cfg.RetryMax || d <= 0 {
				t.Fatalf("ttl %v attempt %d: backoff %v outside [%v, %v]", ttl, attempt, d, capd/2, capd)
			}
			if capd < prevCap {
				t.Fatalf("ttl %v attempt %d: bound shrank from %v to %v", ttl, attempt, prevCap, capd)
			}
			prevCap = capd
		}
		// Driven for real: acquires that keep failing with errors.
		x := newH(t, cfg)
		x.start(at(0))
		x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
		for i := 0; i < 200; i++ {
			if x.out.Op != nil {
				x.reply(x.now, x.out.Op, lease.Record{}, "", errors.New("throttled"))
				continue
			}
			// A retry waits at most RetryMax; a read (the last one is old)
			// at most PollInterval.
			if w := x.out.Wake.Sub(x.now); w > max(cfg.RetryMax, cfg.PollInterval) || w < 0 {
				t.Fatalf("ttl %v: next attempt in %v", ttl, w)
			}
			x.tick(x.out.Wake)
		}
	}
}

// Any answer from the store resets the backoff, not only a write's.
func TestBackoffResetsOnAnswer(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.m.attempt = 5
	x.start(at(0))
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", lease.NotFound("l"))
	if x.m.attempt != 0 {
		t.Fatalf("attempt = %d after an answer, want 0", x.m.attempt)
	}
}

// Polls are jittered within [0.8, 1] × PollInterval.
func TestPollJitterBounds(t *testing.T) {
	m, err := New(testConfig("a"))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range 10000 {
		d := m.pollAfter(t0).Sub(t0)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 1600*time.Millisecond || hi > 2*time.Second || hi-lo < 300*time.Millisecond {
		t.Fatalf("poll waits in [%v, %v], want within [1.6s, 2s] and spread", lo, hi)
	}
}

// A store call abandoned after OpTimeout names what timed out, after how
// long, and the last error before it.
func TestTimeoutNamesCause(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	refused := errors.New("dial tcp 127.0.0.1:8000: connect: connection refused")
	x.reply(at(0), x.wantOp(OpGet), lease.Record{}, "", refused)
	x.tick(x.out.Wake)
	x.wantOp(OpGet)
	x.tick(x.now.Add(2 * time.Second)) // no answer: timed out
	var te *TimeoutError
	err := x.m.Err()
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || !errors.Is(err, refused) || te.Op != "read" || te.After != 2*time.Second {
		t.Fatalf("Err = %v", err)
	}
	x.tick(x.out.Wake)
	x.tick(x.now.Add(2 * time.Second)) // again: the cause does not nest
	if err := x.m.Err(); strings.Count(err.Error(), "timed out") != 1 || !errors.Is(err, refused) {
		t.Fatalf("Err = %v", err)
	}
}

// A leader that finds an invalid record steps down at once with its own
// reason.
func TestInvalidRecordDemotes(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.elect(at(0), at(time.Millisecond))
	x.tick(at(2 * time.Second))
	x.reply(at(2*time.Second), x.wantOp(OpPut), lease.Record{}, "", lease.Conflict("l"))
	bad := &lease.RecordError{Name: "l", Field: "token", Reason: "garbage"}
	x.reply(x.now, x.wantOp(OpGet), lease.Record{}, "", bad)
	if got := kinds(x.out.Events); got != "anomaly demoted(invalid lease record)" {
		t.Fatalf("events = %q", got)
	}
}

// A record with this machine's ID that it did not write, seen after its
// first lease, is another process with the same ID.
func TestDuplicateID(t *testing.T) {
	x := newH(t, testConfig("a"))
	x.start(at(0))
	mine := lease.Record{Holder: "a", Token: 4, Duration: 10 * time.Second, Nonce: "earlier-process"}
	x.reply(at(0), x.wantOp(OpGet), mine, "v1", nil) // a predecessor's: fine
	if x.m.Err() != nil || len(anomalies(x.all)) != 0 {
		t.Fatalf("first read flagged: %v", x.m.Err())
	}
	x.tick(x.out.Wake)
	mine.Nonce = "twin-1" // within the first lease: maybe the predecessor's
	x.reply(x.now, x.wantOp(OpGet), mine, "v2", nil)
	if x.m.Err() != nil {
		t.Fatalf("flagged within the first lease: %v", x.m.Err())
	}
	for x.now.Before(at(10500 * time.Millisecond)) {
		x.tick(x.out.Wake)
		x.reply(x.now, x.wantOp(OpGet), mine, "v2", nil)
	}
	mine.Nonce = "twin-2"
	x.tick(x.out.Wake)
	if op := x.out.Op; op != nil && op.Kind == OpPut { // its takeover meets the twin's write
		x.reply(x.now, op, lease.Record{}, "", &lease.ConflictError{Name: "l", Found: true, Current: mine, Version: "v3"})
	} else {
		x.reply(x.now, x.wantOp(OpGet), mine, "v3", nil)
	}
	var dup *DuplicateIDError
	if !errors.As(x.m.Err(), &dup) || dup.ID != "a" || len(anomalies(x.all)) != 1 {
		t.Fatalf("Err = %v, anomalies %v", x.m.Err(), anomalies(x.all))
	}
}

// Every duration that cannot be added safely is refused, naming the field
// the user set.
func TestConfigRejectsHugeDurations(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(c *Config)
	}{
		{"OpTimeout", func(c *Config) { c.OpTimeout = 1 << 62 }},
		{"OpTimeout", func(c *Config) { c.OpTimeout = math.MaxInt64 }},
		{"RetryMax", func(c *Config) { c.RetryMax = math.MaxInt64 }},
		{"RenewInterval", func(c *Config) { c.RenewInterval = math.MaxInt64 }},
		{"PollInterval", func(c *Config) { c.PollInterval = math.MaxInt64 }},
		{"Margin", func(c *Config) { c.Margin = math.MaxInt64 }},
		{"RetryMin", func(c *Config) { c.RetryMin = -1 }},
	} {
		cfg := testConfig("a")
		tc.edit(&cfg)
		var fe *FieldError
		if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate = %v, want a FieldError naming it", tc.field, err)
		}
	}
}

// The room-to-retry rule: RenewInterval + 2×OpTimeout + RetryMax must fit
// in the lead window, to the nanosecond.
func TestConfigRoomToRetry(t *testing.T) {
	cfg := testConfig("a") // window 8.99s: 2s + 2×2s + 1s = 7s
	cfg.OpTimeout = (8990*time.Millisecond - 3*time.Second) / 2
	if err := cfg.Validate(); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	cfg.OpTimeout++
	var fe *FieldError
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "RenewInterval" || !strings.Contains(err.Error(), "2×OpTimeout") {
		t.Fatalf("one past the bound: %v", err)
	}
}
