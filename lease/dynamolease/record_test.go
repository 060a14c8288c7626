package dynamolease

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/lease"
)

// testStore returns a Store for encoding tests; it sends nothing.
func testStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Table == "" {
		cfg.Table = "leases"
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	return &Store{table: cfg.Table, key: cfg.KeyAttribute, ttl: cfg.TTLAttribute, slack: cfg.TTLSlack}
}

func validRecord() lease.Record {
	return lease.Record{
		Holder:    "host-a:8080",
		Token:     42,
		Duration:  10*time.Second + 7, // not a whole millisecond
		Nonce:     "n-1",
		WrittenAt: time.Date(2026, 5, 28, 12, 30, 45, 123_456_789, time.FixedZone("CEST", 2*3600)),
		Payload:   []byte("addr=10.0.0.1"),
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	recs := map[string]func(*lease.Record){
		"plain":           func(*lease.Record) {},
		"released":        func(r *lease.Record) { r.Released = true },
		"token max":       func(r *lease.Record) { r.Token = 1<<63 - 1 },
		"duration max":    func(r *lease.Record) { r.Duration = lease.MaxDuration },
		"zero written_at": func(r *lease.Record) { r.WrittenAt = time.Time{} },
		"before 1970":     func(r *lease.Record) { r.WrittenAt = time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC) },
		"year 9999":       func(r *lease.Record) { r.WrittenAt = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC) },
		"no payload":      func(r *lease.Record) { r.Payload = nil },
		"binary payload":  func(r *lease.Record) { r.Payload = []byte{0, 0xff, 0xc3, 0x28} },
		"max payload":     func(r *lease.Record) { r.Payload = make([]byte, lease.MaxPayloadLen) },
		"unicode":         func(r *lease.Record) { r.Holder, r.Nonce = "höst ☃", "ñ-€" },
	}
	for _, cfg := range []Config{{}, {KeyAttribute: "pk", TTLAttribute: "expires_at"}} {
		s := testStore(t, cfg)
		for label, edit := range recs {
			rec := validRecord()
			edit(&rec)
			item, err := s.encode("a/b", rec, "v1", time.Now())
			if err != nil {
				t.Fatalf("%s: encode: %v", label, err)
			}
			if k, ok := item[s.key].(*types.AttributeValueMemberS); !ok || k.Value != "a/b" {
				t.Errorf("%s: key attribute %q = %#v, want S a/b", label, s.key, item[s.key])
			}
			got, ver, err := decode("a/b", item)
			if err != nil {
				t.Fatalf("%s: decode: %v", label, err)
			}
			if !got.Equal(rec) || ver != "v1" {
				t.Errorf("%s: round trip gave %+v at %q, want %+v at v1", label, got, ver, rec)
			}
		}
	}
}

func TestEncodeDoesNotAliasPayload(t *testing.T) {
	s := testStore(t, Config{})
	rec := validRecord()
	item, err := s.encode("x", rec, "v1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec.Payload[0] = '!'
	if p := item[attrPayload].(*types.AttributeValueMemberB).Value; p[0] == '!' {
		t.Fatal("the item shares the caller's payload")
	}
}

func TestEncodeTTL(t *testing.T) {
	now := time.Unix(1_800_000_000, 500_000_000)
	rec := validRecord()
	rec.Duration = 10 * time.Second

	s := testStore(t, Config{})
	item, err := s.encode("x", rec, "v1", now)
	if err != nil {
		t.Fatal(err)
	}
	for attr := range item {
		if !isRecordAttribute(attr) && attr != s.key {
			t.Errorf("without TTL the item has attribute %q", attr)
		}
	}

	s = testStore(t, Config{TTLAttribute: "expires_at"})
	item, err = s.encode("x", rec, "v1", now)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := item["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("expires_at = %#v, want type N", item["expires_at"])
	}
	want := now.Add(10*time.Second + defaultTTLSlack).Unix()
	if got, err := strconv.ParseInt(n.Value, 10, 64); err != nil || got < want || got > want+1 {
		t.Errorf("expires_at = %s, want %d (now + duration + 7 days, rounded up)", n.Value, want)
	}
	if _, _, err := decode("x", item); err != nil {
		t.Errorf("decode ignores the TTL attribute: %v", err)
	}
}

func TestEncodeRejectsWrittenAtOutsideRFC3339(t *testing.T) {
	s := testStore(t, Config{})
	for _, year := range []int{-1, 10000} {
		rec := validRecord()
		rec.WrittenAt = time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := s.encode("x", rec, "v1", time.Now())
		var re *lease.RecordError
		if !errors.As(err, &re) || re.Field != fieldWrittenAt || re.Name != "x" {
			t.Errorf("year %d: encode error %v, want a RecordError for written_at of x", year, err)
		}
	}
}

func isRecordAttribute(attr string) bool {
	for _, a := range recordAttributes {
		if a == attr {
			return true
		}
	}
	return false
}

// goodItem is a valid item as encode writes it.
func goodItem(t *testing.T) map[string]types.AttributeValue {
	t.Helper()
	item, err := testStore(t, Config{}).encode("lease-1", validRecord(), "v1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return item
}

func TestDecodeRejects(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	set := func(attr string, av types.AttributeValue) func(map[string]types.AttributeValue) {
		return func(m map[string]types.AttributeValue) { m[attr] = av }
	}
	del := func(attr string) func(map[string]types.AttributeValue) {
		return func(m map[string]types.AttributeValue) { delete(m, attr) }
	}
	cases := []struct {
		label string
		edit  func(map[string]types.AttributeValue)
		field string
	}{
		{"holder missing", del(attrHolder), fieldHolder},
		{"holder as N", set(attrHolder, n("1")), fieldHolder},
		{"holder NULL", set(attrHolder, &types.AttributeValueMemberNULL{Value: true}), fieldHolder},
		{"holder empty", set(attrHolder, s("")), fieldHolder},
		{"holder too long", set(attrHolder, s(strings.Repeat("h", lease.MaxHolderLen+1))), fieldHolder},
		{"holder control char", set(attrHolder, s("a\x00b")), fieldHolder},
		{"token missing", del(attrToken), fieldToken},
		{"token as S", set(attrToken, s("7")), fieldToken},
		{"token negative", set(attrToken, n("-1")), fieldToken},
		{"token fraction", set(attrToken, n("1.5")), fieldToken},
		{"token exponent", set(attrToken, n("1E+3")), fieldToken},
		{"token zero", set(attrToken, n("0")), fieldToken},
		{"token 2^63", set(attrToken, n("9223372036854775808")), fieldToken},
		{"token 2^64", set(attrToken, n("18446744073709551616")), fieldToken},
		{"token as NS", set(attrToken, &types.AttributeValueMemberNS{Value: []string{"1"}}), fieldToken},
		{"duration missing", del(attrDuration), fieldDuration},
		{"duration as S", set(attrDuration, s("10s")), fieldDuration},
		{"duration negative", set(attrDuration, n("-10000000000")), fieldDuration},
		{"duration zero", set(attrDuration, n("0")), fieldDuration},
		{"duration over 2^63", set(attrDuration, n("9223372036854775808")), fieldDuration},
		{"duration too long", set(attrDuration, n(strconv.FormatInt(int64(lease.MaxDuration+1), 10))), fieldDuration},
		{"released missing", del(attrReleased), fieldReleased},
		{"released as S", set(attrReleased, s("false")), fieldReleased},
		{"nonce missing", del(attrNonce), fieldNonce},
		{"nonce as B", set(attrNonce, &types.AttributeValueMemberB{Value: []byte("n")}), fieldNonce},
		{"nonce empty", set(attrNonce, s("")), fieldNonce},
		{"written_at as N", set(attrWrittenAt, n("1700000000000")), fieldWrittenAt},
		{"written_at not a time", set(attrWrittenAt, s("yesterday")), fieldWrittenAt},
		{"written_at empty", set(attrWrittenAt, s("")), fieldWrittenAt},
		{"payload as S", set(attrPayload, s("addr")), fieldPayload},
		{"payload too big", set(attrPayload, &types.AttributeValueMemberB{Value: make([]byte, lease.MaxPayloadLen+1)}), fieldPayload},
		{"version missing", del(attrVersion), fieldVersion},
		{"version as N", set(attrVersion, n("3")), fieldVersion},
		{"version empty", set(attrVersion, s("")), fieldVersion},
		{"version too long", set(attrVersion, s(strings.Repeat("v", maxVersionLen+1))), fieldVersion},
		{"garbage item", func(m map[string]types.AttributeValue) {
			clear(m)
			m["lease"] = s("lease-1")
			m["foo"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"bar": n("1")}}
		}, fieldHolder},
	}
	for _, c := range cases {
		t.Run(c.label, func(t *testing.T) {
			item := goodItem(t)
			c.edit(item)
			rec, ver, err := decode("lease-1", item)
			var re *lease.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("decode = %+v, %q, %v; want a *lease.RecordError", rec, ver, err)
			}
			if re.Field != c.field || re.Name != "lease-1" {
				t.Errorf("RecordError %q names field %q of %q, want %q of lease-1", err, re.Field, re.Name, c.field)
			}
			if !errors.Is(err, lease.ErrInvalidRecord) {
				t.Errorf("%v does not match lease.ErrInvalidRecord", err)
			}
			if strings.HasPrefix(c.label, "token") && c.field == fieldToken && strings.Contains(err.Error(), "integer") && !strings.Contains(err.Error(), "from 1 to 2^63-1") {
				t.Errorf("%v: the token rule is 1 to 2^63-1", err)
			}
		})
	}
}

func TestDecodeIgnoresUnknownAttributes(t *testing.T) {
	item := goodItem(t)
	item["comment"] = &types.AttributeValueMemberS{Value: "added by hand"}
	if _, _, err := decode("lease-1", item); err != nil {
		t.Fatal(err)
	}
}

func TestConflict(t *testing.T) {
	s := testStore(t, Config{})
	stored := goodItem(t) // version v1

	// An item absent on an update: DynamoDB returns no item.
	_, err := s.conflict("lease-1", "v0", "v2", nil)
	var ce *lease.ConflictError
	if !errors.As(err, &ce) || ce.Found || ce.Name != "lease-1" {
		t.Errorf("update of a missing item: %v, want a ConflictError with Found false", err)
	}

	// A create over an item the server did not return.
	_, err = s.conflict("lease-1", lease.NoVersion, "v2", nil)
	if !errors.Is(err, lease.ErrConflict) || errors.As(err, &ce) || !strings.Contains(err.Error(), "lease-1") {
		t.Errorf("create without ALL_OLD item: %v, want a plain conflict naming the lease", err)
	}

	// Someone else's record.
	_, err = s.conflict("lease-1", "v0", "v2", stored)
	if !errors.As(err, &ce) || !ce.Found || ce.Version != "v1" || !ce.Current.Equal(validRecord()) {
		t.Errorf("stale update: %v, want a ConflictError carrying the record at v1", err)
	}

	// The record this very Put wrote, met by an SDK retry.
	v, err := s.conflict("lease-1", "v0", "v1", stored)
	if err != nil || v != "v1" {
		t.Errorf("retry meeting its own write: %q, %v; want v1, nil", v, err)
	}

	// A stored item that is not a record: a conflict, not a rejection of
	// the caller's record.
	bad := maps.Clone(stored)
	bad[attrToken] = &types.AttributeValueMemberS{Value: "1"}
	_, err = s.conflict("lease-1", lease.NoVersion, "v2", bad)
	if !errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrInvalidRecord) {
		t.Errorf("create over an invalid item: %v, want a conflict that does not match ErrInvalidRecord", err)
	}
	if !strings.Contains(err.Error(), "token") {
		t.Errorf("create over an invalid item: %q does not say what is wrong", err)
	}
}

func TestNewVersion(t *testing.T) {
	seen := map[lease.Version]bool{}
	for range 1000 {
		v := newVersion()
		if len(v) != 26 || seen[v] {
			t.Fatalf("newVersion() = %q (seen before: %v), want 26 fresh characters", v, seen[v])
		}
		seen[v] = true
	}
}

// FuzzDecode feeds decode items built from arbitrary attribute values: it must
// never panic, and what it accepts must be a valid record that encodes back
// to an item decoding to the same record.
func FuzzDecode(f *testing.F) {
	f.Add("holder", "1", "10000000000", true, "nonce", "2026-01-02T03:04:05.000000006Z", []byte("p"), "v1")
	f.Add("", "-1", "1e9", false, "", "", []byte(nil), "")
	f.Add("h", "9223372036854775808", "-0", false, "n", "0000-01-01T00:00:00Z", make([]byte, 1025), "v")
	f.Fuzz(func(t *testing.T, holder, token, duration string, released bool, nonce, writtenAt string, payload []byte, version string) {
		item := map[string]types.AttributeValue{
			"lease":       &types.AttributeValueMemberS{Value: "x"},
			attrHolder:    &types.AttributeValueMemberS{Value: holder},
			attrToken:     &types.AttributeValueMemberN{Value: token},
			attrDuration:  &types.AttributeValueMemberN{Value: duration},
			attrReleased:  &types.AttributeValueMemberBOOL{Value: released},
			attrNonce:     &types.AttributeValueMemberS{Value: nonce},
			attrWrittenAt: &types.AttributeValueMemberS{Value: writtenAt},
			attrPayload:   &types.AttributeValueMemberB{Value: payload},
			attrVersion:   &types.AttributeValueMemberS{Value: version},
		}
		rec, ver, err := decode("x", item)
		if err != nil {
			var re *lease.RecordError
			if !errors.As(err, &re) || re.Name != "x" || re.Field == "" {
				t.Fatalf("decode error %v is not a RecordError naming lease x and a field", err)
			}
			return
		}
		if err := rec.Validate("x"); err != nil {
			t.Fatalf("decode accepted an invalid record: %v", err)
		}
		again, err := testStore(t, Config{}).encode("x", rec, ver, time.Now())
		if err != nil {
			t.Fatalf("encode of a decoded record: %v", err)
		}
		rec2, ver2, err := decode("x", again)
		if err != nil || !rec2.Equal(rec) || ver2 != ver {
			t.Fatalf("re-encoding changed the record: %+v at %q, %v; was %+v at %q", rec2, ver2, err, rec, ver)
		}
	})
}

// BenchmarkEncode and BenchmarkDecode measure the store's own work on a
// record, apart from the round trip.
func BenchmarkEncode(b *testing.B) {
	s := &Store{table: "leases", key: defaultKeyAttribute}
	rec := lease.Record{Holder: "host-a", Token: 1, Duration: 10 * time.Second, Nonce: "n-1", WrittenAt: time.Now(), Payload: []byte("addr=10.0.0.1:8080")}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.encode("bench/lease", rec, newVersion(), now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	s := &Store{table: "leases", key: defaultKeyAttribute}
	rec := lease.Record{Holder: "host-a", Token: 1, Duration: 10 * time.Second, Nonce: "n-1", WrittenAt: time.Now(), Payload: []byte("addr=10.0.0.1:8080")}
	item, err := s.encode("bench/lease", rec, newVersion(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decode("bench/lease", item); err != nil {
			b.Fatal(err)
		}
	}
}
