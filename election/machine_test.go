package election

import (
	"errors"
	"math"
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

func TestDeterministic(t *testing.T) {
	run := func() []Op {
		x := newH(t, testConfig("a"))
		var ops []Op
		x.start(at(0))
		for i := 0; i < 50; i++ {
			if op := x.out.Op; op != nil {
				ops = append(ops, *op)
				x.reply(x.now.Add(time.Millisecond), op, lease.Record{Holder: "b", Token: 1, Duration: 10 * time.Second, Nonce: "n"}, "v1", nil)
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
			m.attempt = uint8(attempt)
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
			// at most MaxPoll.
			if w := x.out.Wake.Sub(x.now); w > max(cfg.RetryMax, MaxPoll(cfg.PollInterval)) || w < 0 {
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

// Polls are jittered within [0.9, 1.1] × PollInterval, around a mean of
// PollInterval: followers read as often as configured.
func TestPollJitterBounds(t *testing.T) {
	m, err := New(testConfig("a"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	lo, hi, sum := time.Duration(math.MaxInt64), time.Duration(0), time.Duration(0)
	for range n {
		d := m.pollAfter(t0).Sub(t0)
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	if lo < 1800*time.Millisecond || hi > MaxPoll(2*time.Second) || hi-lo < 300*time.Millisecond {
		t.Fatalf("poll waits in [%v, %v], want within [1.8s, 2.2s] and spread", lo, hi)
	}
	// The standard error of the mean is 115ms/√n ≈ 1.2ms: 10ms is 8 of them.
	if mean := sum / n; mean < 1990*time.Millisecond || mean > 2010*time.Millisecond {
		t.Fatalf("mean poll wait %v, want 2s", mean)
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

// TestNoticeRecordTimesRenewalsOfTheTermRead: a follower told of renewals
// of the term it read, with their records, does not read on them; it takes
// over a wait after the last one told, with a read first and a
// compare-and-swap on that version; a record of another term, or of a
// lease duration it has not read, it reads.
func TestNoticeRecordTimesRenewalsOfTheTermRead(t *testing.T) {
	held := lease.Record{Holder: "b", Token: 1, Duration: 10 * time.Second, Nonce: "n"}
	x := newH(t, testConfig("a"))
	x.start(at(0))
	x.reply(at(time.Millisecond), x.wantOp(OpGet), held, "v1", nil)
	// Renewals every 2s for 20s: no read, and the takeover moves with them.
	var last time.Time
	for i := 1; i <= 10; i++ {
		last = at(time.Duration(i) * 2 * time.Second)
		if out := x.take(x.m.NoticeRecord(last, lease.Version("r"+string(rune('a'+i))), held)); out.Op != nil {
			t.Fatalf("renewal %d: %+v, want no read", i, out.Op)
		}
		x.now = last
	}
	if until := x.m.LeaderUntil(); !until.Equal(last.Add(10 * time.Second)) {
		t.Fatalf("LeaderUntil %v, want the last renewal told + 10s", until.Sub(t0))
	}
	// Silent now: a read FeedSilence after the last, which finds the last.
	if want := last.Add(FeedSilence(testConfig("a").Timing)); !x.out.Wake.Equal(want) {
		t.Fatalf("next wake %v, want the silent feed's read at %v", x.out.Wake.Sub(t0), want.Sub(t0))
	}
	x.tick(x.out.Wake)
	lastV := lease.Version("r" + string(rune('a'+10)))
	x.reply(x.now.Add(time.Millisecond), x.wantOp(OpGet), held, lastV, nil)
	// The takeover: ttl×(1+ρ) after the event, not after that read.
	for x.out.Op == nil || x.out.Op.Kind != OpPut {
		if x.out.Op != nil {
			x.reply(x.now.Add(time.Millisecond), x.out.Op, held, lastV, nil)
			continue
		}
		x.tick(x.out.Wake)
	}
	if op := x.out.Op; op.Expect != lastV || x.now.Before(last.Add(WaitBeforeTakeover(10*time.Second, 1e-3))) {
		t.Fatalf("takeover at %v expecting %q, want at last renewal told + wait, on %q", x.now.Sub(t0), op.Expect, lastV)
	}

	// Another term, or another duration: read (within the notices' rate).
	for _, rec := range []lease.Record{
		{Holder: "c", Token: 2, Duration: 10 * time.Second},
		{Holder: "b", Token: 1, Duration: 30 * time.Second},
	} {
		y := newH(t, testConfig("a"))
		y.start(at(0))
		y.reply(at(time.Millisecond), y.wantOp(OpGet), held, "v1", nil)
		y.now = at(3 * time.Second)
		if out := y.take(y.m.NoticeRecord(y.now, "v2", rec)); out.Op == nil || out.Op.Kind != OpGet {
			t.Fatalf("told %+v: %+v, want a read", rec, out.Op)
		}
	}
}
