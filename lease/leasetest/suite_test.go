package leasetest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// flawEnv tells a child test process which flaw its store has.
const flawEnv = "LEASETEST_FLAW"

// The suite must fail a store that breaks the contract, and fail it in the
// subtest about the rule broken. Run takes a *testing.T, so each flawed store
// runs in a child process (TestFlawedStore) whose output is checked here.
func TestSuiteCatchesFlaws(t *testing.T) {
	if os.Getenv(flawEnv) != "" {
		t.Skip("in a child process")
	}
	flaws := []struct {
		flaw    string
		failing string // subtest that must fail; "" means the run must pass
	}{
		{"none", ""}, // the harness itself is sound
		{"ignores-expect", "CreateIfAbsent"},
		{"ignores-expect", "RacingWriters"},
		{"ignores-expect", "StaleVersionConflicts"},
		{"version-creates", "VersionOnMissingLeaseConflicts"},
		{"content-versions", "VersionsNeverRepeat"},
		{"seconds-written-at", "CompareAndSwap"},
		{"rounds-written-at", "CompareAndSwap"},
		{"zero-time-as-epoch", "FieldsRoundTrip"},
		{"float-token", "FieldsRoundTrip"},
		{"ignores-context", "CancelledContext"},
		{"no-validation", "InvalidName"},
		{"no-validation", "InvalidRecord"},
		{"aliases-payload", "NoAliasing"},
		{"stale-conflict-error", "ConflictErrorMatchesStore"},
		{"bare-not-found", "GetMissing"},
		{"case-insensitive", "AwkwardValidNames"},
		{"nil-payload-dropped", "PayloadRoundTrip"},
	}
	// One child per flaw, shared by the rows that name it.
	type result struct {
		out string
		err error
	}
	results := map[string]*result{}
	var wg sync.WaitGroup
	for _, f := range flaws {
		if results[f.flaw] != nil {
			continue
		}
		r := &result{}
		results[f.flaw] = r
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFlawedStore$", "-test.count=1")
			cmd.Env = append(os.Environ(), flawEnv+"="+f.flaw)
			out, err := cmd.CombinedOutput()
			r.out, r.err = string(out), err
		})
	}
	wg.Wait()

	for _, f := range flaws {
		r := results[f.flaw]
		if f.failing == "" {
			if r.err != nil {
				t.Errorf("flaw %q: suite failed a sound store: %v\n%s", f.flaw, r.err, r.out)
			}
			continue
		}
		var exit *exec.ExitError
		if !errors.As(r.err, &exit) {
			t.Errorf("flaw %q: suite passed (or did not run: %v)\n%s", f.flaw, r.err, r.out)
			continue
		}
		if !strings.Contains(r.out, "--- FAIL: TestFlawedStore/"+f.failing+" ") {
			t.Errorf("flaw %q: subtest %s did not fail\n%s", f.flaw, f.failing, r.out)
		}
	}
}

// TestFlawedStore runs the suite against a store with the flaw named in the
// environment; it only runs as TestSuiteCatchesFlaws's child.
func TestFlawedStore(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		t.Skip("runs only as a child of TestSuiteCatchesFlaws")
	}
	leasetest.Run(t, func(t *testing.T) lease.Store { return &flawedStore{flaw: flaw} })
}

// flawedStore is a correct in-memory store unless its flaw says otherwise.
// It is written apart from memlease so the flaws do not leak into real code.
type flawedStore struct {
	flaw string

	mu   sync.Mutex // guards recs and seq
	recs map[string]flawedEntry
	seq  int
}

type flawedEntry struct {
	rec lease.Record
	ver lease.Version
}

func (s *flawedStore) key(name string) string {
	switch s.flaw {
	case "case-insensitive":
		return strings.ToLower(name)
	}
	return name
}

func (s *flawedStore) check(ctx context.Context, name string) error {
	if s.flaw != "no-validation" {
		if err := lease.ValidateName(name); err != nil {
			return err
		}
	}
	if s.flaw != "ignores-context" {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lease %q: %w", name, err)
		}
	}
	return nil
}

func (s *flawedStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := s.check(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.recs[s.key(name)]
	if !ok {
		if s.flaw == "bare-not-found" {
			return lease.Record{}, lease.NoVersion, lease.ErrNotFound
		}
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	rec := e.rec
	if s.flaw != "aliases-payload" {
		rec = rec.Clone()
	}
	switch s.flaw {
	case "seconds-written-at":
		rec.WrittenAt = rec.WrittenAt.Truncate(time.Second)
	case "rounds-written-at":
		rec.WrittenAt = rec.WrittenAt.Round(time.Millisecond)
	case "zero-time-as-epoch":
		if rec.WrittenAt.IsZero() {
			rec.WrittenAt = time.Unix(0, 0)
		}
	case "float-token":
		rec.Token = uint64(float64(rec.Token))
	case "nil-payload-dropped":
		// A store that cannot hold an empty attribute and writes a
		// placeholder instead, then forgets to strip it.
		if len(rec.Payload) == 0 {
			rec.Payload = []byte("-")
		}
	}
	return rec, e.ver, nil
}

func (s *flawedStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := s.check(ctx, name); err != nil {
		return lease.NoVersion, err
	}
	if s.flaw != "no-validation" {
		if err := rec.Validate(name); err != nil {
			return lease.NoVersion, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.recs[s.key(name)]
	match := ok && cur.ver == expect || !ok && expect == lease.NoVersion
	switch s.flaw {
	case "ignores-expect":
		match = true
	case "version-creates":
		match = match || !ok
	}
	if !match {
		if s.flaw == "stale-conflict-error" {
			// Reports the caller's own view back instead of the store's.
			return lease.NoVersion, &lease.ConflictError{Name: name, Current: rec, Version: expect, Found: true}
		}
		return lease.NoVersion, lease.Conflict(name)
	}
	var ver lease.Version
	if s.flaw == "content-versions" {
		ver = lease.Version(fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "%+v", rec))))
	} else {
		s.seq++
		ver = lease.Version(fmt.Sprint(s.seq))
	}
	if s.flaw != "aliases-payload" {
		rec = rec.Clone()
	}
	if s.recs == nil {
		s.recs = map[string]flawedEntry{}
	}
	s.recs[s.key(name)] = flawedEntry{rec, ver}
	return ver, nil
}
