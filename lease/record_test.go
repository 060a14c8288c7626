package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tenure-go/tenure/lease"
)

func validRecord() lease.Record {
	return lease.Record{
		Holder:    "node-1",
		Token:     1,
		Duration:  10 * time.Second,
		Nonce:     "n1",
		WrittenAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Payload:   []byte("10.0.0.1:8080"),
	}
}

func TestValidateAcceptsLimits(t *testing.T) {
	edits := map[string]func(*lease.Record){
		"as made":                func(*lease.Record) {},
		"holder at limit":        func(r *lease.Record) { r.Holder = strings.Repeat("h", lease.MaxHolderLen) },
		"holder unicode":         func(r *lease.Record) { r.Holder = "höst 例 ☃" },
		"token 2^63-1":           func(r *lease.Record) { r.Token = 1<<63 - 1 },
		"duration at minimum":    func(r *lease.Record) { r.Duration = lease.MinDuration },
		"duration at maximum":    func(r *lease.Record) { r.Duration = lease.MaxDuration },
		"nonce at limit":         func(r *lease.Record) { r.Nonce = strings.Repeat("n", lease.MaxNonceLen) },
		"payload at limit":       func(r *lease.Record) { r.Payload = make([]byte, lease.MaxPayloadLen) },
		"payload nil":            func(r *lease.Record) { r.Payload = nil },
		"payload binary":         func(r *lease.Record) { r.Payload = []byte{0, 0xff, '\n'} },
		"written-at zero":        func(r *lease.Record) { r.WrittenAt = time.Time{} },
		"released":               func(r *lease.Record) { r.Released = true },
		"holder with inner ' '":  func(r *lease.Record) { r.Holder = "a b" },
		"nonce with punctuation": func(r *lease.Record) { r.Nonce = `a-b_c.d:e/f"g` },
	}
	for label, edit := range edits {
		r := validRecord()
		edit(&r)
		if err := r.Validate("x"); err != nil {
			t.Errorf("%s: Validate: %v", label, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		label, field string
		edit         func(*lease.Record)
	}{
		{"empty holder", "holder", func(r *lease.Record) { r.Holder = "" }},
		{"holder over limit", "holder", func(r *lease.Record) { r.Holder = strings.Repeat("h", lease.MaxHolderLen+1) }},
		{"holder not UTF-8", "holder", func(r *lease.Record) { r.Holder = "a\xffb" }},
		{"holder control char", "holder", func(r *lease.Record) { r.Holder = "a\tb" }},
		{"holder DEL", "holder", func(r *lease.Record) { r.Holder = "a\x7f" }},
		{"zero token", "token", func(r *lease.Record) { r.Token = 0 }},
		{"token 2^63", "token", func(r *lease.Record) { r.Token = 1 << 63 }},
		{"token max uint64", "token", func(r *lease.Record) { r.Token = ^uint64(0) }},
		{"zero duration", "duration", func(r *lease.Record) { r.Duration = 0 }},
		{"negative duration", "duration", func(r *lease.Record) { r.Duration = -time.Hour }},
		{"duration below minimum", "duration", func(r *lease.Record) { r.Duration = lease.MinDuration - 1 }},
		{"duration above maximum", "duration", func(r *lease.Record) { r.Duration = lease.MaxDuration + 1 }},
		{"empty nonce", "nonce", func(r *lease.Record) { r.Nonce = "" }},
		{"nonce over limit", "nonce", func(r *lease.Record) { r.Nonce = strings.Repeat("n", lease.MaxNonceLen+1) }},
		{"nonce not UTF-8", "nonce", func(r *lease.Record) { r.Nonce = "\xc3" }},
		{"nonce control char", "nonce", func(r *lease.Record) { r.Nonce = "n\n" }},
		{"payload over limit", "payload", func(r *lease.Record) { r.Payload = make([]byte, lease.MaxPayloadLen+1) }},
	}
	for _, tt := range tests {
		r := validRecord()
		tt.edit(&r)
		err := r.Validate("jobs/cron")
		var re *lease.RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s: Validate = %v, want a *RecordError", tt.label, err)
			continue
		}
		if !errors.Is(err, lease.ErrInvalidRecord) {
			t.Errorf("%s: %v does not match ErrInvalidRecord", tt.label, err)
		}
		if re.Field != tt.field || re.Name != "jobs/cron" || re.Reason == "" {
			t.Errorf("%s: RecordError{Name: %q, Field: %q, Reason: %q}, want name %q, field %q and a reason",
				tt.label, re.Name, re.Field, re.Reason, "jobs/cron", tt.field)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, `lease "jobs/cron": invalid record: `+tt.field+": ") {
			t.Errorf("%s: message %q does not name the lease and field", tt.label, msg)
		}
	}
}

// Validate reports the first field at fault, in declaration order, so the
// same bad record always gets the same error.
func TestValidateReportsFirstRule(t *testing.T) {
	var r lease.Record // every field is wrong or empty
	r.Payload = make([]byte, lease.MaxPayloadLen+1)
	want := []string{"holder", "token", "duration", "nonce", "payload"}
	for _, field := range want {
		var re *lease.RecordError
		if !errors.As(r.Validate("x"), &re) || re.Field != field {
			t.Fatalf("Validate = %v, want field %q at fault", r.Validate("x"), field)
		}
		switch field { // fix this field and look for the next
		case "holder":
			r.Holder = "h"
		case "token":
			r.Token = 1
		case "duration":
			r.Duration = time.Second
		case "nonce":
			r.Nonce = "n"
		case "payload":
			r.Payload = nil
		}
	}
	if err := r.Validate("x"); err != nil {
		t.Fatalf("Validate after fixing every field: %v", err)
	}
}

func TestValidateName(t *testing.T) {
	good := []string{
		"a",
		"0",
		"jobs/cron",
		"svc:writer.primary_1-a",
		"A.",
		"a..b/c",
		strings.Repeat("n", lease.MaxNameLen),
	}
	for _, name := range good {
		if err := lease.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q): %v", name, err)
		}
	}

	bad := []struct {
		name string
		want string // in the message
	}{
		{"", "empty"},
		{strings.Repeat("n", lease.MaxNameLen+1), "201 bytes, limit 200"},
		{"-a", "byte 0"},
		{"_a", "byte 0"},
		{".a", "byte 0"},
		{":a", "byte 0"},
		{"/a", "byte 0"},
		{"a b", "byte 1"},
		{"ab\x00", "byte 2"},
		{"a\n", "byte 1"},
		{"a?", "byte 1"},
		{"a#", "byte 1"},
		{"a%", "byte 1"},
		{"a*", "byte 1"},
		{"a+", "byte 1"},
		{"a\\", "byte 1"},
		{"é", "byte 0"},
		{"a\xff", "byte 1"},
		{"a/../b", "non-empty segments"},
		{"a/./b", "non-empty segments"},
		{"a//b", "non-empty segments"},
		{"a/", "non-empty segments"},
	}
	for _, tt := range bad {
		err := lease.ValidateName(tt.name)
		if !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ValidateName(%q) = %q, want it to say %q", tt.name, err, tt.want)
		}
	}
}

func TestRecordEqual(t *testing.T) {
	a := validRecord()
	if !a.Equal(a.Clone()) {
		t.Fatal("a record differs from its clone")
	}

	// Representation differences that must not count.
	same := map[string]func(*lease.Record){
		"nil vs empty payload": func(r *lease.Record) { r.Payload = []byte{} },
		"other location":       func(r *lease.Record) { r.WrittenAt = r.WrittenAt.In(time.FixedZone("X", 3600)) },
	}
	for label, edit := range same {
		x, y := validRecord(), validRecord()
		x.Payload, y.Payload = nil, nil
		edit(&y)
		if !x.Equal(y) || !y.Equal(x) {
			t.Errorf("%s: records compare unequal", label)
		}
	}
	now := time.Now() // carries a monotonic reading
	x, y := validRecord(), validRecord()
	x.WrittenAt, y.WrittenAt = now, now.Round(0)
	if !x.Equal(y) {
		t.Error("a monotonic clock reading made records unequal")
	}

	// Every field counts.
	differ := map[string]func(*lease.Record){
		"holder":     func(r *lease.Record) { r.Holder += "x" },
		"token":      func(r *lease.Record) { r.Token++ },
		"duration":   func(r *lease.Record) { r.Duration++ },
		"released":   func(r *lease.Record) { r.Released = !r.Released },
		"nonce":      func(r *lease.Record) { r.Nonce += "x" },
		"written-at": func(r *lease.Record) { r.WrittenAt = r.WrittenAt.Add(time.Nanosecond) },
		"payload":    func(r *lease.Record) { r.Payload = append(r.Payload, 0) },
	}
	for field, edit := range differ {
		x, y := validRecord(), validRecord()
		edit(&y)
		if x.Equal(y) || y.Equal(x) {
			t.Errorf("records that differ in %s compare equal", field)
		}
	}
}

func TestRecordClone(t *testing.T) {
	r := validRecord()
	c := r.Clone()
	c.Payload[0] = 'X'
	if r.Payload[0] == 'X' {
		t.Fatal("Clone shares its payload with the original")
	}
}

// TestHolderPrintableMatchesUnicode: a holder passes Validate exactly when
// every character is printable by unicode.IsPrint (an ASCII fast path must
// not change that).
func TestHolderPrintableMatchesUnicode(t *testing.T) {
	rec := lease.Record{Token: 1, Duration: 10 * time.Second, Nonce: "n", WrittenAt: time.Unix(1, 0)}
	for r := rune(0); r < 0x800; r++ {
		rec.Holder = "a" + string(r) + "b"
		if got, want := rec.Validate("x") == nil, unicode.IsPrint(r); got != want {
			t.Errorf("holder %q: valid %v, want %v", rec.Holder, got, want)
		}
	}
	rec.Holder = "ok\xff"
	if rec.Validate("x") == nil {
		t.Error("invalid UTF-8 passed")
	}
}
