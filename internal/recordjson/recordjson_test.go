package recordjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

func sampleRecord() lease.Record {
	return lease.Record{
		Holder:    "host-1",
		Token:     7,
		Duration:  10 * time.Second,
		Nonce:     "n-1",
		WrittenAt: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("IST", 5*3600+1800)),
		Payload:   []byte("addr"),
	}
}

// TestEncodeGolden pins the format: a change here is a change to objects in
// users' buckets, and needs a new SchemaVersion if old readers could misread it.
func TestEncodeGolden(t *testing.T) {
	got := string(Encode(sampleRecord(), "00112233445566778899aabbccddeeff"))
	const want = `{"v":1,"holder":"host-1","token":7,"duration_ns":10000000000,"released":false,"nonce":"n-1",` +
		`"written_at":"2025-03-14T09:39:26.535897932Z","payload":"YWRkcg==","write_id":"00112233445566778899aabbccddeeff"}` + "\n"
	if got != want {
		t.Errorf("encodeRecord:\n got  %s\n want %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	edits := map[string]func(*lease.Record){
		"sample":             func(*lease.Record) {},
		"token 2^63-1":       func(r *lease.Record) { r.Token = 1<<63 - 1 },
		"token 2^53+1":       func(r *lease.Record) { r.Token = 1<<53 + 1 },
		"duration odd ns":    func(r *lease.Record) { r.Duration = 1_234_567_891 },
		"duration max":       func(r *lease.Record) { r.Duration = lease.MaxDuration },
		"duration min":       func(r *lease.Record) { r.Duration = lease.MinDuration },
		"released":           func(r *lease.Record) { r.Released = true },
		"zero time":          func(r *lease.Record) { r.WrittenAt = time.Time{} },
		"time before 1970":   func(r *lease.Record) { r.WrittenAt = time.Date(1969, 7, 20, 20, 17, 40, 999_999_999, time.UTC) },
		"time year 9999":     func(r *lease.Record) { r.WrittenAt = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC) },
		"holder quotes":      func(r *lease.Record) { r.Holder = `a "b" 'c' \d <e> &f; \u0041` },
		"holder unicode":     func(r *lease.Record) { r.Holder = "höst-1.例え.internal:8080 ☃" },
		"holder max":         func(r *lease.Record) { r.Holder = strings.Repeat(`"`, lease.MaxHolderLen) },
		"nonce unicode":      func(r *lease.Record) { r.Nonce = "ñ-ü-€" },
		"payload every byte": func(r *lease.Record) { r.Payload = every },
		"payload nil":        func(r *lease.Record) { r.Payload = nil },
		"payload max":        func(r *lease.Record) { r.Payload = bytes.Repeat([]byte{0xff}, lease.MaxPayloadLen) },
	}
	for label, edit := range edits {
		rec := sampleRecord()
		edit(&rec)
		if err := rec.Validate("x"); err != nil {
			t.Fatalf("%s: test bug: %v", label, err)
		}
		body := Encode(rec, NewWriteID())
		if !json.Valid(body) {
			t.Errorf("%s: encoding is not valid JSON: %s", label, body)
			continue
		}
		// encoding/json reads the same strings back.
		var std struct{ Holder, Nonce string }
		if err := json.Unmarshal(body, &std); err != nil || std.Holder != rec.Holder || std.Nonce != rec.Nonce {
			t.Errorf("%s: encoding/json reads holder %q nonce %q (%v), want %q %q", label, std.Holder, std.Nonce, err, rec.Holder, rec.Nonce)
		}
		got, err := Decode("x", body)
		if err != nil {
			t.Errorf("%s: decode: %v\n%s", label, err, body)
			continue
		}
		if !got.Equal(rec) {
			t.Errorf("%s: round trip\n got  %+v\n want %+v", label, got, rec)
		}
	}
}

func TestLargestRecordFitsWithRoom(t *testing.T) {
	rec := lease.Record{
		Holder:    strings.Repeat(`"`, lease.MaxHolderLen), // each byte escapes to two
		Token:     1<<63 - 1,
		Duration:  lease.MaxDuration,
		Released:  true,
		Nonce:     strings.Repeat(`\`, lease.MaxNonceLen),
		WrittenAt: time.Date(2025, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		Payload:   make([]byte, lease.MaxPayloadLen),
	}
	if err := rec.Validate("x"); err != nil {
		t.Fatal(err)
	}
	n := len(Encode(rec, NewWriteID()))
	if n > MaxSize/3 {
		t.Errorf("largest record encodes to %d bytes; want well under MaxSize (%d)", n, MaxSize)
	}
	t.Logf("largest record: %d bytes", n)
}

func TestWriteIDsDiffer(t *testing.T) {
	rec := sampleRecord()
	if bytes.Equal(Encode(rec, NewWriteID()), Encode(rec, NewWriteID())) {
		t.Fatal("two encodings of one record are the same bytes: their ETags would repeat")
	}
}

// valid is a well-formed object; the cases below break it one way each.
const valid = `{"v":1,"holder":"h","token":7,"duration_ns":10000000000,"released":false,"nonce":"n-1","written_at":"2025-03-14T15:09:26.535897932Z","payload":"YWRkcg==","write_id":"00"}`

func edit(old, new string) string {
	if !strings.Contains(valid, old) {
		panic(fmt.Sprintf("test bug: %q not in valid", old))
	}
	return strings.Replace(valid, old, new, 1)
}

func TestDecodeValidVariants(t *testing.T) {
	for _, body := range []string{
		valid,
		"  \n" + valid + "\n\n",
		edit(`,"payload":"YWRkcg=="`, ``),
		edit(`,"write_id":"00"`, ``),
		edit(`"payload":"YWRkcg=="`, `"payload":""`),
		edit(`"token":7`, `"token":9223372036854775807`),
		// Key order does not matter.
		`{"write_id":"00","nonce":"n-1","released":true,"duration_ns":1000000,"token":1,"holder":"h","written_at":"2025-03-14T15:09:26+05:30","v":1}`,
	} {
		if _, err := Decode("x", []byte(body)); err != nil {
			t.Errorf("decode %s: %v", body, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		label, body, field, reason string
	}{
		{"empty", ``, "json", "empty"},
		{"blank", " \n", "json", "empty"},
		{"not JSON", `holder=h token=7`, "json", "not a JSON object"},
		{"truncated", valid[:40], "json", "not a JSON object"},
		{"trailing data", valid + `{}`, "json", "not a JSON object"},
		{"array", `[1,2]`, "json", "not a JSON object"},
		{"string", `"h"`, "json", "not a JSON object"},
		{"null", `null`, "json", "not a JSON object"},

		{"no version", edit(`"v":1,`, ``), "v", "missing"},
		{"version 2", edit(`"v":1`, `"v":2`), "v", "schema version 2 is not supported"},
		{"version 2 with new keys", edit(`"v":1`, `"v":2,"fence":{"a":1}`), "v", "schema version 2 is not supported"},
		{"version as string", edit(`"v":1`, `"v":"1"`), "v", `version "1" is not supported`},
		{"version 1.0", edit(`"v":1`, `"v":1.0`), "v", "1.0 is not supported"},

		{"unknown key", edit(`"v":1`, `"v":1,"expires":"soon"`), "json", `unknown key "expires"`},
		{"key in other case", edit(`"token":7`, `"Token":7`), "json", `unknown key "Token"`},
		{"repeated key", edit(`"token":7`, `"token":7,"token":8`), "token", "more than once"},

		{"holder missing", edit(`"holder":"h",`, ``), "holder", `"holder" is missing`},
		{"holder number", edit(`"holder":"h"`, `"holder":5`), "holder", "is 5, want a string"},
		{"holder null", edit(`"holder":"h"`, `"holder":null`), "holder", "null"},
		{"holder empty", edit(`"holder":"h"`, `"holder":""`), "holder", "empty"},
		{"holder control", edit(`"holder":"h"`, `"holder":"a\nb"`), "holder", "not printable"},

		{"token missing", edit(`"token":7,`, ``), "token", `"token" is missing`},
		{"token string", edit(`"token":7`, `"token":"7"`), "token", `is "7", want an integer`},
		{"token negative", edit(`"token":7`, `"token":-7`), "token", "-7"},
		{"token fraction", edit(`"token":7`, `"token":7.5`), "token", "7.5"},
		{"token exponent", edit(`"token":7`, `"token":7e3`), "token", "7e3"},
		{"token over 2^64", edit(`"token":7`, `"token":18446744073709551616`), "token", "18446744073709551616"},
		{"token 2^63", edit(`"token":7`, `"token":9223372036854775808`), "token", "exceeds 2^63-1"},
		{"token zero", edit(`"token":7`, `"token":0`), "token", "missing"},
		{"token object", edit(`"token":7`, `"token":{"n":7}`), "token", `is {"n":7}`},
		{"token array", edit(`"token":7`, `"token":[7]`), "token", "is [7]"},

		{"duration missing", edit(`"duration_ns":10000000000,`, ``), "duration", `"duration_ns" is missing`},
		{"duration string", edit(`"duration_ns":10000000000`, `"duration_ns":"10s"`), "duration", `is "10s", want an integer`},
		{"duration negative", edit(`"duration_ns":10000000000`, `"duration_ns":-1`), "duration", "negative"},
		{"duration fraction", edit(`"duration_ns":10000000000`, `"duration_ns":1.5e9`), "duration", "1.5e9"},
		{"duration zero", edit(`"duration_ns":10000000000`, `"duration_ns":0`), "duration", "below the minimum"},
		{"duration too long", edit(`"duration_ns":10000000000`, `"duration_ns":86400000000001`), "duration", "exceeds the maximum"},
		{"duration overflow", edit(`"duration_ns":10000000000`, `"duration_ns":9223372036854775808`), "duration", "9223372036854775808"},

		{"released missing", edit(`"released":false,`, ``), "released", "missing"},
		{"released string", edit(`"released":false`, `"released":"false"`), "released", `is "false", want true or false`},
		{"released number", edit(`"released":false`, `"released":0`), "released", "is 0, want true or false"},

		{"nonce missing", edit(`"nonce":"n-1",`, ``), "nonce", "missing"},
		{"nonce number", edit(`"nonce":"n-1"`, `"nonce":1`), "nonce", "is 1, want a string"},
		{"nonce empty", edit(`"nonce":"n-1"`, `"nonce":""`), "nonce", "empty"},

		{"written_at missing", edit(`,"written_at":"2025-03-14T15:09:26.535897932Z"`, ``), "written_at", "missing"},
		{"written_at not a time", edit(`"2025-03-14T15:09:26.535897932Z"`, `"yesterday"`), "written_at", "RFC 3339"},
		{"written_at unix", edit(`"2025-03-14T15:09:26.535897932Z"`, `1741964966`), "written_at", "is 1741964966, want an RFC 3339"},

		{"payload not base64", edit(`"YWRkcg=="`, `"not base64!"`), "payload", "base64"},
		{"payload unpadded", edit(`"YWRkcg=="`, `"YWRkcg"`), "payload", "base64"},
		{"payload number", edit(`"YWRkcg=="`, `5`), "payload", "is 5, want a base64 string"},
		{"payload null", edit(`"YWRkcg=="`, `null`), "payload", "null"},
		{"payload oversized", edit(`"YWRkcg=="`, `"`+strings.Repeat("AAAA", 342)+`"`), "payload", "1026 bytes, limit 1024"},

		{"write_id number", edit(`"write_id":"00"`, `"write_id":0`), "write_id", "is 0, want a string"},
	}
	for _, tt := range tests {
		rec, err := Decode("app/cron", []byte(tt.body))
		var re *lease.RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s: decode = %+v, %v; want a *lease.RecordError", tt.label, rec, err)
			continue
		}
		if re.Name != "app/cron" || re.Field != tt.field || !strings.Contains(re.Reason, tt.reason) {
			t.Errorf("%s: got lease %q field %q reason %q; want lease %q field %q reason containing %q",
				tt.label, re.Name, re.Field, re.Reason, "app/cron", tt.field, tt.reason)
		}
		if !errors.Is(err, lease.ErrInvalidRecord) {
			t.Errorf("%s: %v does not match lease.ErrInvalidRecord", tt.label, err)
		}
	}
}

func TestDecodeLongValuesAreCutInErrors(t *testing.T) {
	_, err := Decode("x", []byte(edit(`"token":7`, `"token":"`+strings.Repeat("9", 5000)+`"`)))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("error is %d bytes: %.300v", len(err.Error()), err)
	}
}

// FuzzDecode checks that no body makes decodeRecord panic, and that
// whatever it accepts is a valid record that survives a round trip.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(valid))
	f.Add(Encode(sampleRecord(), "ff"))
	f.Add([]byte(edit(`"token":7`, `"token":"7"`)))
	f.Add([]byte(edit(`"v":1`, `"v":1,"x":[{"y":[1,{}]}]`)))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := Decode("x", body)
		if err != nil {
			var re *lease.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *lease.RecordError", err)
			}
			return
		}
		if err := rec.Validate("x"); err != nil {
			t.Fatalf("accepted an invalid record: %v", err)
		}
		again, err := Decode("x", Encode(rec, "00"))
		if err != nil || !again.Equal(rec) {
			t.Fatalf("round trip of %+v: %+v, %v", rec, again, err)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	rec := sampleRecord()
	b.ReportAllocs()
	for b.Loop() {
		Encode(rec, NewWriteID())
	}
}

func BenchmarkDecode(b *testing.B) {
	body := Encode(sampleRecord(), NewWriteID())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("x", body); err != nil {
			b.Fatal(err)
		}
	}
}
