// Package leasetest holds the conformance suite every lease.Store must pass,
// and Faults, a Store wrapper that injects failures for tests of code that
// uses a Store.
//
// A backend's test calls Run once:
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) })
//	}
//
// Beyond the rules written in lease.Store, the suite holds stores to these,
// which tenure relies on:
//
//  1. Every field of a valid Record reads back exactly as written, except
//     WrittenAt, which a store must keep to at least millisecond precision
//     and may truncate (never round) below that. The suite compares WrittenAt
//     after truncating both sides to the millisecond. A zero WrittenAt reads
//     back as zero. Duration is kept to the nanosecond.
//  2. A nil and an empty Payload are the same; either may come back.
//  3. Put with a version when no record exists is a conflict, and creates
//     nothing.
//  4. Versions are never reused for a lease, even when a write stores the
//     same bytes as an earlier one (a content hash is not a version).
//  5. A Get or Put with an already cancelled context returns an error that
//     matches the context's error, and the Put is not applied.
//  6. An invalid name or record is rejected before anything is sent; the
//     errors match lease.ErrInvalidName and lease.ErrInvalidRecord (as a
//     *lease.RecordError naming the lease and the field).
//  7. Not-found and conflict errors name the lease.
//  8. A store keeps no reference to the caller's Payload, and a caller may
//     modify the Payload Get returned without changing the store.
//  9. Every name lease.ValidateName accepts is its own lease, including
//     names with "." and ".." path segments, "//" or a trailing "/", and
//     names that differ only in case.
//  10. A lease.Watcher tells of every write of the watched name, with the
//     version written and whether it released the lease, after a first
//     event once it listens, and of no other name's; it returns soon after
//     its context is done, with an error that matches the context's. A
//     feed that carries the record written (lease.Event.Record) carries it
//     with every write, and it is that record: its holder, token, lease
//     duration and Released.
//
// Each subtest makes its own store and uses lease names unique to the run, so
// the suite may run against a table or bucket shared with other runs. Subtests
// run one after another and make a few hundred requests in all.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// Run runs the conformance suite against stores made by newStore; each subtest
// gets a fresh, empty store (or one where lease names never collide — use
// unique lease names per subtest anyway, since a real server's table/bucket
// may be shared).
func Run(t *testing.T, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	// One random prefix per run keeps names apart from earlier runs against
	// the same table or bucket.
	prefix := fmt.Sprintf("leasetest-%08x", rand.Uint32())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(&env{
				t:      t,
				s:      newStore(t),
				ctx:    t.Context(),
				prefix: prefix + "/" + c.name,
			})
		})
	}
}

var cases = []struct {
	name string
	run  func(*env)
}{
	{"CreateIfAbsent", testCreateIfAbsent},
	{"GetMissing", testGetMissing},
	{"CompareAndSwap", testCompareAndSwap},
	{"StaleVersionConflicts", testStaleVersionConflicts},
	{"VersionOnMissingLeaseConflicts", testVersionOnMissingLeaseConflicts},
	{"VersionsNeverRepeat", testVersionsNeverRepeat},
	{"RacingWriters", testRacingWriters},
	{"ConflictErrorMatchesStore", testConflictErrorMatchesStore},
	{"ReleaseKeepsToken", testReleaseKeepsToken},
	{"PayloadRoundTrip", testPayloadRoundTrip},
	{"FieldsRoundTrip", testFieldsRoundTrip},
	{"NoAliasing", testNoAliasing},
	{"CancelledContext", testCancelledContext},
	{"InvalidName", testInvalidName},
	{"InvalidRecord", testInvalidRecord},
	{"AwkwardValidNames", testAwkwardValidNames},
	{"StaleReads", testStaleReads},
	{"ListByPrefix", testListByPrefix},
	{"DeleteByVersion", testDeleteByVersion},
	{"Watch", testWatch},
}

// env is what one subtest works with.
type env struct {
	t      *testing.T
	s      lease.Store
	ctx    context.Context
	prefix string // unique to this run and subtest
	writes int    // records made so far, to make each one distinct
}

// name returns a lease name unique to this run and subtest.
func (e *env) name(label string) string { return e.prefix + "/" + label }

// baseTime has nanoseconds below the millisecond and a non-UTC zone, so that
// a store which drops precision or zone handling beyond what is allowed shows.
var baseTime = time.Date(2025, time.March, 14, 15, 9, 26, 535_897_932, time.FixedZone("IST", 5*3600+1800))

// record returns a valid record, distinct from every other one this env made.
func (e *env) record(holder string, token uint64) lease.Record {
	e.writes++
	return lease.Record{
		Holder:    holder,
		Token:     token,
		Duration:  15*time.Second + 123_456_789, // not a whole millisecond
		Nonce:     fmt.Sprintf("%s-%d", holder, e.writes),
		WrittenAt: baseTime.Add(time.Duration(e.writes) * time.Second),
		Payload:   []byte("addr=10.0.0." + holder),
	}
}

// put writes rec and fails the test unless it succeeds with a fresh version.
func (e *env) put(name string, rec lease.Record, expect lease.Version) lease.Version {
	e.t.Helper()
	v, err := e.s.Put(e.ctx, name, rec, expect)
	if err != nil {
		e.t.Fatalf("Put(%q, expect %q): %v", name, expect, err)
	}
	if v == lease.NoVersion {
		e.t.Fatalf("Put(%q, expect %q) returned NoVersion: a version must not be empty", name, expect)
	}
	if v == expect {
		e.t.Fatalf("Put(%q, expect %q) returned the expected version again", name, expect)
	}
	return v
}

// get reads name and fails the test on any error.
func (e *env) get(name string) (lease.Record, lease.Version) {
	e.t.Helper()
	rec, v, err := e.s.Get(e.ctx, name)
	if err != nil {
		e.t.Fatalf("Get(%q): %v", name, err)
	}
	return rec, v
}

// wantStored fails the test unless Get returns want at version v.
func (e *env) wantStored(name string, want lease.Record, v lease.Version) {
	e.t.Helper()
	got, gotV := e.get(name)
	if !sameRecord(got, want) {
		e.t.Fatalf("Get(%q) record:\n got  %s\n want %s", name, show(got), show(want))
	}
	if gotV != v {
		e.t.Fatalf("Get(%q) version = %q, want %q", name, gotV, v)
	}
}

// wantMissing fails the test unless Get reports that name holds no record.
func (e *env) wantMissing(name string) {
	e.t.Helper()
	rec, v, err := e.s.Get(e.ctx, name)
	if !errors.Is(err, lease.ErrNotFound) {
		e.t.Fatalf("Get(%q) = %s, %q, %v; want an error matching lease.ErrNotFound", name, show(rec), v, err)
	}
}

// wantConflict fails the test unless err is a conflict that names the lease.
func (e *env) wantConflict(name string, err error) {
	e.t.Helper()
	if !errors.Is(err, lease.ErrConflict) {
		e.t.Fatalf("Put(%q) error = %v, want one matching lease.ErrConflict", name, err)
	}
	if !strings.Contains(err.Error(), name) {
		e.t.Errorf("conflict error %q does not name the lease %q", err, name)
	}
}

// sameRecord compares records as stores must keep them: WrittenAt to the
// millisecond, everything else exactly.
func sameRecord(a, b lease.Record) bool {
	a.WrittenAt = a.WrittenAt.Truncate(time.Millisecond)
	b.WrittenAt = b.WrittenAt.Truncate(time.Millisecond)
	return a.Equal(b)
}

// show formats a record for failure messages; a payload is shortened so a
// 1 KiB one does not bury the difference.
func show(r lease.Record) string {
	p := fmt.Sprintf("%q", r.Payload)
	if len(r.Payload) > 32 {
		p = fmt.Sprintf("%d bytes %q...", len(r.Payload), r.Payload[:32])
	}
	return fmt.Sprintf("{Holder:%q Token:%d Duration:%d Released:%t Nonce:%q WrittenAt:%s Payload:%s}",
		r.Holder, r.Token, r.Duration, r.Released, r.Nonce, r.WrittenAt.Format(time.RFC3339Nano), p)
}

func testCreateIfAbsent(e *env) {
	name := e.name("lease")
	e.wantMissing(name)
	first := e.record("a", 1)
	v := e.put(name, first, lease.NoVersion)
	e.wantStored(name, first, v)

	_, err := e.s.Put(e.ctx, name, e.record("b", 1), lease.NoVersion)
	e.wantConflict(name, err)
	e.wantStored(name, first, v)
}

func testGetMissing(e *env) {
	name := e.name("never-written")
	rec, v, err := e.s.Get(e.ctx, name)
	if !errors.Is(err, lease.ErrNotFound) {
		e.t.Fatalf("Get(%q) = %s, %q, %v; want an error matching lease.ErrNotFound", name, show(rec), v, err)
	}
	if !strings.Contains(err.Error(), name) {
		e.t.Errorf("not-found error %q does not name the lease %q", err, name)
	}
	if errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrInvalidName) {
		e.t.Errorf("not-found error %q also matches another lease error", err)
	}
}

// testStaleReads: a store that offers GetStale (lease.StaleGetter) returns
// from it only states the record had: absent, or a record that was written,
// at its version; never an error for a lease that exists.
func testStaleReads(e *env) {
	sg, ok := e.s.(lease.StaleGetter)
	if !ok {
		e.t.Skip("no GetStale")
	}
	name := e.name("stale")
	if _, _, err := sg.GetStale(e.ctx, name); !errors.Is(err, lease.ErrNotFound) {
		e.t.Fatalf("GetStale of a lease never written: %v, want an error matching lease.ErrNotFound", err)
	}
	first := e.record("a", 1)
	v1 := e.put(name, first, lease.NoVersion)
	second := e.record("a", 1)
	v2 := e.put(name, second, v1)
	for range 5 {
		rec, v, err := sg.GetStale(e.ctx, name)
		switch {
		case errors.Is(err, lease.ErrNotFound):
		case err != nil:
			e.t.Fatalf("GetStale: %v", err)
		case v == v1 && sameRecord(rec, first), v == v2 && sameRecord(rec, second):
		default:
			e.t.Fatalf("GetStale = %s at %q: a state the record never had (%q, %q)", show(rec), v, v1, v2)
		}
	}
	if _, _, err := sg.GetStale(e.ctx, "bad//name"); !errors.Is(err, lease.ErrInvalidName) {
		e.t.Errorf("GetStale of an invalid name: %v, want lease.ErrInvalidName", err)
	}
}

func testCompareAndSwap(e *env) {
	name := e.name("lease")
	v1 := e.put(name, e.record("a", 1), lease.NoVersion)
	// A renewal: same holder and token, new nonce and time.
	renewed := e.record("a", 1)
	v2 := e.put(name, renewed, v1)
	e.wantStored(name, renewed, v2)
	// A takeover with the next token.
	taken := e.record("b", 2)
	v3 := e.put(name, taken, v2)
	if v3 == v1 {
		e.t.Fatalf("third write returned the first write's version %q", v1)
	}
	e.wantStored(name, taken, v3)
}

func testStaleVersionConflicts(e *env) {
	name := e.name("lease")
	v1 := e.put(name, e.record("a", 1), lease.NoVersion)
	cur := e.record("b", 2)
	v2 := e.put(name, cur, v1)

	_, err := e.s.Put(e.ctx, name, e.record("c", 2), v1)
	e.wantConflict(name, err)
	e.wantStored(name, cur, v2)
}

func testVersionOnMissingLeaseConflicts(e *env) {
	// The version comes from another lease of the same store: a real one,
	// but not one this lease ever had.
	other := e.put(e.name("other"), e.record("a", 1), lease.NoVersion)
	name := e.name("missing")
	_, err := e.s.Put(e.ctx, name, e.record("b", 1), other)
	e.wantConflict(name, err)
	e.wantMissing(name)
}

func testVersionsNeverRepeat(e *env) {
	name := e.name("lease")
	a := e.record("a", 1)
	b := e.record("b", 2)
	va := e.put(name, a, lease.NoVersion)
	vb := e.put(name, b, va)
	// Storing A's exact bytes again must not bring back A's version: a store
	// whose version is a hash of the content would let the next line succeed.
	va2 := e.put(name, a, vb)
	if va2 == va {
		e.t.Fatalf("writing the same record again returned its old version %q", va)
	}
	_, err := e.s.Put(e.ctx, name, a, va)
	e.wantConflict(name, err)
	e.wantStored(name, a, va2)

	// A renewal that changes nothing still gets a new version.
	va3 := e.put(name, a, va2)
	seen := map[lease.Version]bool{}
	for _, v := range []lease.Version{va, vb, va2, va3} {
		if seen[v] {
			e.t.Fatalf("version %q handed out twice for one lease (versions %q)", v, []lease.Version{va, vb, va2, va3})
		}
		seen[v] = true
	}
}

func testRacingWriters(e *env) {
	race(e.t, e.ctx, e.s, e.name("lease"), 20, 10, e.record)
}

// Race has writers compare-and-swap one record at once, rounds times over
// (and once more to create it), each writer on its own goroutine, lined up
// so that the writes overlap: exactly one must win each round, the others
// must see a conflict, and the record must then be the winner's. Emulators
// have shipped check-then-act races in conditional writes; the suite runs
// this with 20 writers and 10 rounds, and a backend's own test may run it
// harder against its real server.
func Race(t *testing.T, s lease.Store, writers, rounds int) {
	t.Helper()
	n := 0
	record := func(holder string, token uint64) lease.Record {
		n++
		return lease.Record{Holder: holder, Token: token, Duration: 15 * time.Second,
			Nonce: fmt.Sprintf("%s-%d", holder, n), WrittenAt: baseTime.Add(time.Duration(n) * time.Millisecond)}
	}
	race(t, t.Context(), s, fmt.Sprintf("leasetest-race-%08x", rand.Uint32()), writers, rounds, record)
}

// RaceEach is Race with one writer per store of stores, each writing
// through its own: stores on clients (connections) of their own, so that
// the writes reach the server on different connections.
func RaceEach(t *testing.T, stores []lease.Store, rounds int) {
	t.Helper()
	Race(t, eachWriter(stores), len(stores), rounds)
}

// eachWriter sends writer wN's Puts through stores[N] (Race names its
// writers so), and reads through the first.
type eachWriter []lease.Store

func (e eachWriter) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return e[0].Get(ctx, name)
}

func (e eachWriter) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(rec.Holder, "w"))
	if err != nil || n < 0 {
		n = 0
	}
	return e[n%len(e)].Put(ctx, name, rec, expect)
}

func race(t *testing.T, ctx context.Context, s lease.Store, name string, writers, rounds int, record func(string, uint64) lease.Record) {
	t.Helper()
	type result struct {
		v   lease.Version
		err error
	}
	// Round 0 races to create the lease; the others race to replace it.
	expect := lease.NoVersion
	for round := range rounds + 1 {
		recs := make([]lease.Record, writers)
		for i := range recs {
			recs[i] = record(fmt.Sprintf("w%d", i), uint64(round+1))
		}
		results := make([]result, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start // line everyone up so the writes overlap
				v, err := s.Put(ctx, name, recs[i], expect)
				results[i] = result{v, err}
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, r := range results {
			switch {
			case r.err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both succeeded from version %q", round, winner, i, expect)
			case r.err == nil:
				winner = i
			case !errors.Is(r.err, lease.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want success or an error matching lease.ErrConflict", round, i, r.err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer succeeded from version %q", round, expect)
		}
		got, v, err := s.Get(ctx, name)
		if err != nil {
			t.Fatalf("round %d: Get after the race: %v", round, err)
		}
		if v != results[winner].v || !sameRecord(got, recs[winner]) {
			t.Fatalf("round %d: stored %s at %q, want the winner's %s at %q", round, show(got), v, show(recs[winner]), results[winner].v)
		}
		expect = results[winner].v
	}
}

func testConflictErrorMatchesStore(e *env) {
	// check compares a conflict error's account of the store with a Get made
	// right after, when nobody else writes.
	check := func(name string, err error) {
		e.t.Helper()
		e.wantConflict(name, err)
		var ce *lease.ConflictError
		if !errors.As(err, &ce) {
			return // the store does not learn the current record; allowed
		}
		if ce.Name != name {
			e.t.Errorf("ConflictError.Name = %q, want %q", ce.Name, name)
		}
		rec, v, gerr := e.s.Get(e.ctx, name)
		switch {
		case errors.Is(gerr, lease.ErrNotFound):
			if ce.Found {
				e.t.Errorf("ConflictError says %s is stored at %q, Get finds nothing", show(ce.Current), ce.Version)
			}
		case gerr != nil:
			e.t.Fatalf("Get(%q): %v", name, gerr)
		case !ce.Found:
			e.t.Errorf("ConflictError says no record is stored, Get finds %s", show(rec))
		case !sameRecord(ce.Current, rec) || ce.Version != v:
			e.t.Errorf("ConflictError carries\n %s at %q\nGet returns\n %s at %q", show(ce.Current), ce.Version, show(rec), v)
		}
	}

	name := e.name("lease")
	v1 := e.put(name, e.record("a", 1), lease.NoVersion)
	e.put(name, e.record("b", 2), v1)
	_, err := e.s.Put(e.ctx, name, e.record("c", 1), lease.NoVersion)
	check(name, err) // create over an existing record
	_, err = e.s.Put(e.ctx, name, e.record("c", 3), v1)
	check(name, err) // stale version

	missing := e.name("missing")
	_, err = e.s.Put(e.ctx, missing, e.record("c", 1), v1)
	check(missing, err) // version on a lease that does not exist
}

func testReleaseKeepsToken(e *env) {
	name := e.name("lease")
	v1 := e.put(name, e.record("a", 7), lease.NoVersion)
	released := e.record("a", 7)
	released.Released = true
	v2 := e.put(name, released, v1)
	e.wantStored(name, released, v2)
	// A released record is taken with the next token like any other.
	next := e.record("b", 8)
	v3 := e.put(name, next, v2)
	e.wantStored(name, next, v3)
}

func testPayloadRoundTrip(e *env) {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	largest := make([]byte, lease.MaxPayloadLen)
	for i := range largest {
		largest[i] = byte(255 - i%256)
	}
	payloads := []struct {
		label   string
		payload []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"every-byte", every},
		{"max-size", largest},
		{"invalid-utf8", []byte{0xc3, 0x28, 0xff, 0xfe}},
		{"zero-byte", []byte{0}},
		{"text", []byte(`{"addr":"10.0.0.1:8080"}` + "\r\n")},
	}
	for _, p := range payloads {
		rec := e.record("a", 1)
		rec.Payload = p.payload
		// Create and update may take different paths through a backend.
		name := e.name(p.label)
		v := e.put(name, rec, lease.NoVersion)
		e.wantStored(name, rec, v)

		rec = e.record("a", 1)
		rec.Payload = p.payload
		v = e.put(name, rec, v)
		e.wantStored(name, rec, v)
	}
}

func testFieldsRoundTrip(e *env) {
	edits := []struct {
		label string
		edit  func(*lease.Record)
	}{
		{"token-max", func(r *lease.Record) { r.Token = 1<<63 - 1 }},
		{"token-2pow53-plus-1", func(r *lease.Record) { r.Token = 1<<53 + 1 }}, // lost by a float64
		{"duration-min", func(r *lease.Record) { r.Duration = lease.MinDuration }},
		{"duration-max", func(r *lease.Record) { r.Duration = lease.MaxDuration }},
		{"duration-odd-ns", func(r *lease.Record) { r.Duration = 1_234_567_891 }},
		{"written-at-zero", func(r *lease.Record) { r.WrittenAt = time.Time{} }},
		{"written-at-utc", func(r *lease.Record) { r.WrittenAt = baseTime.UTC() }},
		{"written-at-before-1970", func(r *lease.Record) { r.WrittenAt = time.Date(1969, 7, 20, 20, 17, 40, 999_999_999, time.UTC) }},
		{"holder-max", func(r *lease.Record) { r.Holder = strings.Repeat("h", lease.MaxHolderLen) }},
		{"holder-unicode", func(r *lease.Record) { r.Holder = "höst-1.例え.internal:8080 ☃" }},
		{"holder-quotes", func(r *lease.Record) { r.Holder = `a "b" 'c' \d <e> &f;` }},
		{"nonce-max", func(r *lease.Record) { r.Nonce = strings.Repeat("n", lease.MaxNonceLen) }},
		{"nonce-unicode", func(r *lease.Record) { r.Nonce = "ñ-ü-€" }},
		{"released", func(r *lease.Record) { r.Released = true }},
	}
	for _, ed := range edits {
		name := e.name(ed.label)
		rec := e.record("a", 1)
		ed.edit(&rec)
		v := e.put(name, rec, lease.NoVersion)
		got, gotV := e.get(name)
		if !sameRecord(got, rec) || gotV != v {
			e.t.Errorf("%s: after create, Get returned\n %s at %q\nwant\n %s at %q", ed.label, show(got), gotV, show(rec), v)
		}
		if rec.WrittenAt.IsZero() && !got.WrittenAt.IsZero() {
			e.t.Errorf("%s: zero WrittenAt read back as %v", ed.label, got.WrittenAt)
		}

		rec = e.record("b", 2)
		ed.edit(&rec)
		v = e.put(name, rec, v)
		got, gotV = e.get(name)
		if !sameRecord(got, rec) || gotV != v {
			e.t.Errorf("%s: after update, Get returned\n %s at %q\nwant\n %s at %q", ed.label, show(got), gotV, show(rec), v)
		}
	}
}

func testNoAliasing(e *env) {
	name := e.name("lease")
	rec := e.record("a", 1)
	rec.Payload = []byte("original")
	want := rec.Clone()
	v := e.put(name, rec, lease.NoVersion)
	copy(rec.Payload, "CHANGED!") // the caller reuses its buffer
	e.wantStored(name, want, v)

	got, _ := e.get(name)
	if len(got.Payload) > 0 {
		got.Payload[0] ^= 0xff // the caller scribbles on what it was given
	}
	e.wantStored(name, want, v)
}

func testCancelledContext(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()

	name := e.name("lease")
	stored := e.record("a", 1)
	v := e.put(name, stored, lease.NoVersion)

	if _, _, err := e.s.Get(ctx, name); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Get with a cancelled context: %v, want an error matching context.Canceled", err)
	}
	if _, err := e.s.Put(ctx, name, e.record("b", 2), v); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Put (update) with a cancelled context: %v, want an error matching context.Canceled", err)
	}
	e.wantStored(name, stored, v)

	fresh := e.name("fresh")
	if _, err := e.s.Put(ctx, fresh, e.record("b", 1), lease.NoVersion); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Put (create) with a cancelled context: %v, want an error matching context.Canceled", err)
	}
	e.wantMissing(fresh)
}

func testInvalidName(e *env) {
	bad := []string{
		"",
		"-leading-dash",
		".leading-dot",
		"/leading-slash",
		"_leading-underscore",
		"has space",
		"tab\there",
		"new\nline",
		"nul\x00byte",
		"question?",
		"hash#",
		"percent%20",
		"back\\slash",
		"star*",
		"plus+",
		"tilde~",
		"quote\"",
		"ünïcode",
		"invalid-utf8-\xff",
		"dot/./x",
		"dotdot/../x",
		"double//slash",
		"trailing-slash/",
		strings.Repeat("a", lease.MaxNameLen+1),
	}
	rec := e.record("a", 1)
	for _, name := range bad {
		if _, _, err := e.s.Get(e.ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			e.t.Errorf("Get(%q): %v, want an error matching lease.ErrInvalidName", name, err)
		}
		if _, err := e.s.Put(e.ctx, name, rec, lease.NoVersion); !errors.Is(err, lease.ErrInvalidName) {
			e.t.Errorf("Put(%q): %v, want an error matching lease.ErrInvalidName", name, err)
		}
	}
}

func testInvalidRecord(e *env) {
	bad := []struct {
		label string
		field string // RecordError.Field
		edit  func(*lease.Record)
	}{
		{"zero token", "token", func(r *lease.Record) { r.Token = 0 }},
		{"token 2^63", "token", func(r *lease.Record) { r.Token = 1 << 63 }},
		{"empty holder", "holder", func(r *lease.Record) { r.Holder = "" }},
		{"oversized holder", "holder", func(r *lease.Record) { r.Holder = strings.Repeat("h", lease.MaxHolderLen+1) }},
		{"holder with newline", "holder", func(r *lease.Record) { r.Holder = "a\nb" }},
		{"holder not UTF-8", "holder", func(r *lease.Record) { r.Holder = "a\xffb" }},
		{"empty nonce", "nonce", func(r *lease.Record) { r.Nonce = "" }},
		{"oversized nonce", "nonce", func(r *lease.Record) { r.Nonce = strings.Repeat("n", lease.MaxNonceLen+1) }},
		{"nonce with NUL", "nonce", func(r *lease.Record) { r.Nonce = "n\x00" }},
		{"zero duration", "duration", func(r *lease.Record) { r.Duration = 0 }},
		{"negative duration", "duration", func(r *lease.Record) { r.Duration = -time.Second }},
		{"duration below minimum", "duration", func(r *lease.Record) { r.Duration = lease.MinDuration - 1 }},
		{"duration above maximum", "duration", func(r *lease.Record) { r.Duration = lease.MaxDuration + 1 }},
		{"oversized payload", "payload", func(r *lease.Record) { r.Payload = make([]byte, lease.MaxPayloadLen+1) }},
	}
	existing := e.name("existing")
	stored := e.record("a", 1)
	v := e.put(existing, stored, lease.NoVersion)
	fresh := e.name("fresh")

	for _, b := range bad {
		for _, w := range []struct {
			name   string
			expect lease.Version
		}{{fresh, lease.NoVersion}, {existing, v}} {
			rec := e.record("b", 2)
			b.edit(&rec)
			_, err := e.s.Put(e.ctx, w.name, rec, w.expect)
			if !errors.Is(err, lease.ErrInvalidRecord) {
				e.t.Errorf("%s: Put(%q): %v, want an error matching lease.ErrInvalidRecord", b.label, w.name, err)
				continue
			}
			var re *lease.RecordError
			if !errors.As(err, &re) {
				e.t.Errorf("%s: Put(%q): %v is not a *lease.RecordError", b.label, w.name, err)
				continue
			}
			if re.Field != b.field || re.Name != w.name {
				e.t.Errorf("%s: RecordError names field %q of lease %q, want field %q of %q", b.label, re.Field, re.Name, b.field, w.name)
			}
		}
	}
	e.wantMissing(fresh)
	e.wantStored(existing, stored, v)
}

func testAwkwardValidNames(e *env) {
	// These pass lease.ValidateName, so a store must keep each as its own
	// lease, whatever its keys look like underneath. (ValidateName refuses
	// "." and ".." segments, "//" and a trailing "/" because file-backed S3
	// servers refuse them or clean them into another name.)
	base := e.prefix + "/"
	names := []string{
		base + "x",
		base + "dot/x",
		base + "double/slash",
		base + "trailing-slash",
		base + "trailing-dot.",
		base + "dots..in.segment",
		base + "colon:x:y",
		base + "lock",
		base + "lock::queue", // a Locker's fair queue beside its lock
		base + "Case",
		base + "case",
		base + "a-b_c.d:e/f",
	}
	longest := base + "max-"
	names = append(names, longest+strings.Repeat("z", lease.MaxNameLen-len(longest)))
	recs := make([]lease.Record, len(names))
	vers := make([]lease.Version, len(names))
	for i, name := range names {
		if err := lease.ValidateName(name); err != nil {
			e.t.Fatalf("suite bug: %v", err)
		}
		recs[i] = e.record(fmt.Sprintf("h%d", i), uint64(i+1))
		v, err := e.s.Put(e.ctx, name, recs[i], lease.NoVersion)
		if errors.Is(err, lease.ErrConflict) {
			e.t.Fatalf("creating %q: %v: the store keeps it under the same key as an earlier name in %q", name, err, names[:i])
		}
		if err != nil || v == lease.NoVersion {
			e.t.Fatalf("creating %q: version %q, %v", name, v, err)
		}
		vers[i] = v
	}
	// Read back only after every write, so that two names a store maps to
	// one key show as one overwriting the other (or as a conflict above).
	for i, name := range names {
		e.wantStored(name, recs[i], vers[i])
	}
}

// testListByPrefix: a Lister lists every record under a prefix, and no
// other.
func testListByPrefix(e *env) {
	l, ok := e.s.(lease.Lister)
	if !ok {
		e.t.Skip("the store is no lease.Lister")
	}
	want := map[string]bool{e.name("a"): true, e.name("b/c"): true, e.name("b/d"): true}
	for n := range want {
		e.put(n, e.record("h", 1), lease.NoVersion)
	}
	e.put(e.prefix+"-other/x", e.record("h", 1), lease.NoVersion)
	got := map[string]bool{}
	if err := l.List(e.ctx, e.prefix+"/", func(n string) error { got[n] = true; return nil }); err != nil {
		e.t.Fatalf("List(%q): %v", e.prefix+"/", err)
	}
	if len(got) != len(want) {
		e.t.Fatalf("List(%q) = %v, want %v", e.prefix+"/", got, want)
	}
	for n := range want {
		if !got[n] {
			e.t.Errorf("List(%q) left out %q: %v", e.prefix+"/", n, got)
		}
	}
	got = map[string]bool{}
	if err := l.List(e.ctx, e.name("b/"), func(n string) error { got[n] = true; return nil }); err != nil || len(got) != 2 {
		e.t.Errorf("List(%q) = %v, %v; want the two under it", e.name("b/"), got, err)
	}
	stop := errors.New("enough")
	if err := l.List(e.ctx, e.prefix+"/", func(string) error { return stop }); !errors.Is(err, stop) {
		e.t.Errorf("List with fn failing: %v, want fn's error", err)
	}
}

// testDeleteByVersion: a Deleter deletes only the version it names (or
// any, with AnyVersion); a deleted record reads as missing and can be
// created again.
func testDeleteByVersion(e *env) {
	d, ok := e.s.(lease.Deleter)
	if !ok {
		e.t.Skip("the store is no lease.Deleter")
	}
	n := e.name("gone")
	v1 := e.put(n, e.record("h", 1), lease.NoVersion)
	v2 := e.put(n, e.record("h", 2), v1)
	if _, unconditional := e.s.(unconditionalDelete); unconditional {
		e.t.Log("the server deletes whatever version Delete names: not checked")
	} else if err := d.Delete(e.ctx, n, v1); !errors.Is(err, lease.ErrConflict) {
		e.t.Fatalf("Delete with a stale version: %v, want a conflict", err)
	}
	e.get(n) // still there
	if err := d.Delete(e.ctx, n, v2); err != nil {
		e.t.Fatalf("Delete with the current version: %v", err)
	}
	e.wantMissing(n)
	if err := d.Delete(e.ctx, n, v2); err != nil && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrConflict) {
		e.t.Errorf("Delete of a missing record: %v, want nil, not found or a conflict", err)
	}
	e.wantMissing(n)
	v3 := e.put(n, e.record("h", 3), lease.NoVersion)
	if v3 == v1 || v3 == v2 {
		e.t.Errorf("a version came back after Delete: %q", v3)
	}
	if err := d.Delete(e.ctx, n, lease.AnyVersion); err != nil {
		e.t.Fatalf("Delete with AnyVersion: %v", err)
	}
	e.wantMissing(n)
}

// UnconditionalDelete wraps a store whose server deletes whatever is
// stored, whatever version Delete names (MinIO ignores If-Match on
// DeleteObject), so that the suite checks the rest of Delete and says what
// it left unchecked. Use it only for such a server, and document the gap.
func UnconditionalDelete(s lease.Store) lease.Store { return unconditional{s} }

type unconditionalDelete interface{ deletesUnconditionally() }

type unconditional struct{ lease.Store }

func (unconditional) deletesUnconditionally() {}

func (u unconditional) List(ctx context.Context, prefix string, fn func(string) error) error {
	return u.Store.(lease.Lister).List(ctx, prefix, fn)
}

func (u unconditional) Delete(ctx context.Context, name string, expect lease.Version) error {
	return u.Store.(lease.Deleter).Delete(ctx, name, expect)
}

// watchWait bounds each wait for an event: a feed that works answers in
// milliseconds.
const watchWait = 30 * time.Second

func testWatch(e *env) {
	w, ok := e.s.(lease.Watcher)
	if !ok {
		e.t.Skip("not a lease.Watcher")
	}
	if err := w.Watch(e.ctx, "", func(lease.Event) {}); !errors.Is(err, lease.ErrInvalidName) {
		e.t.Errorf("Watch of an empty name: %v, want an error matching lease.ErrInvalidName", err)
	}
	name, other := e.name("watched"), e.name("other")
	events := make(chan lease.Event, 64)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx, name, func(ev lease.Event) { events <- ev }) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				e.t.Errorf("Watch returned %v once its context was cancelled, want an error matching context.Canceled", err)
			}
		case <-time.After(watchWait):
			e.t.Errorf("Watch did not return within %s of its context's cancellation", watchWait)
		}
	}()
	var otherV lease.Version
	next := func(what string, want func(lease.Event) bool) {
		e.t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Version != lease.NoVersion && ev.Version == otherV {
					e.t.Fatalf("Watch(%q) told of a write of %q (version %q)", name, other, ev.Version)
				}
				if want(ev) {
					return
				}
			case err := <-done:
				e.t.Fatalf("Watch returned before its context was done, waiting for %s: %v", what, err)
			case <-time.After(watchWait):
				e.t.Fatalf("no event for %s within %s", what, watchWait)
			}
		}
	}
	records := 0 // events that carried their record
	told := func(ev lease.Event, v lease.Version, rec lease.Record) bool {
		e.t.Helper()
		if ev.Version != v {
			return false
		}
		if r := ev.Record; r != nil {
			records++
			if r.Holder != rec.Holder || r.Token != rec.Token || r.Duration != rec.Duration || r.Released != rec.Released {
				e.t.Fatalf("the event of version %q carries holder %q, token %d, duration %v, released %v; written: %q, %d, %v, %v",
					v, r.Holder, r.Token, r.Duration, r.Released, rec.Holder, rec.Token, rec.Duration, rec.Released)
			}
		}
		return true
	}
	next("listening", func(ev lease.Event) bool { return ev.Version == lease.NoVersion })
	otherV = e.put(other, e.record("b", 1), lease.NoVersion)
	r1 := e.record("a", 1)
	v1 := e.put(name, r1, lease.NoVersion)
	next("the record's creation", func(ev lease.Event) bool { return told(ev, v1, r1) && !ev.Released })
	r2 := e.record("a", 1)
	v2 := e.put(name, r2, v1)
	next("a renewal", func(ev lease.Event) bool { return told(ev, v2, r2) && !ev.Released })
	rel := e.record("a", 1)
	rel.Released = true
	v3 := e.put(name, rel, v2)
	next("a release", func(ev lease.Event) bool {
		if ev.Version == v3 && !ev.Released {
			e.t.Fatalf("the event of the release (version %q) does not say Released", v3)
		}
		return told(ev, v3, rel)
	})
	if records != 0 && records != 3 {
		e.t.Errorf("%d of the 3 writes' events carried their record: a feed that carries records carries them all", records)
	}
}
