package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/filelease"
)

func TestRunAndLockUsageErrors(t *testing.T) {
	dir := "file://" + t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job", "true"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job", "sh", "-c", "true"}, `flag provided but not defined: -c (is "--" missing?`},
		{[]string{"lock", "job", "ls", "-l"}, `(is "--" missing?`},
		{[]string{"run", "job", "extra", "--", "true"}, `unexpected "extra"`},
		{[]string{"run", "--", "true"}, "no NAME"},
		{[]string{"lock", "--", "true"}, "no NAME"},
		{[]string{"run", "bad name", "--", "true"}, "invalid name"},
		{[]string{"run", "jobs::queue", "--", "true"}, `"::" is kept`},
		{[]string{"lock", "jobs::standby", "--", "true"}, `"::" is kept`},
		{[]string{"run", "--on-exit", "maybe", "job", "--", "true"}, "--on-exit"},
		{[]string{"run", "--on-lost", "x", "job", "--", "true"}, "--on-lost"},
		{[]string{"run", "--grace", "0s", "job", "--", "true"}, "--grace"},
		{[]string{"run", "--lease", "0", "job", "--", "true"}, "--lease 0s: want a positive duration"},
		{[]string{"lock", "--lease", "-1s", "job", "--", "true"}, "--lease -1s: want a positive duration"},
		{[]string{"run", "--lease", "2ms", "job", "--", "true"}, "--lease 2ms is too short to work: a store call must fit in a fifth of it (the op timeout, 400µs) with a renewal and its retry inside the term; the shortest that works is 500ms"},
		{[]string{"lock", "--lease", "499ms", "job", "--", "true"}, "the shortest that works is 500ms"},
		{[]string{"run", "--group", "g", "--shards", "2", "--lease", "50ms", "--", "true"}, "the shortest that works is 500ms"},
		{[]string{"run", "--cold-poll", "0s", "--standby", "job", "--", "true"}, "--cold-poll"},
		{[]string{"run", "--store", "memcached://x", "job", "--", "true"}, "unknown scheme"},
		{[]string{"run", "--store", "mem:x", "job", "--", "true"}, "protects nothing between processes"},
		{[]string{"lock", "--store", "mem:x", "job", "--", "true"}, "protects nothing between processes"},
		{[]string{"status", "--store", "mem:x", "job"}, "protects nothing between processes"},
		{[]string{"lock", "--store", "dynamodb://t?region=x&endpoint=127.0.0.1:8000", "job", "--", "true"}, "http:// or https://"},
		{[]string{"lock", "--lease", "10", "job", "--", "true"}, "durations need a unit"},
		{[]string{"lock", "--wait", "soon", "job", "--", "true"}, "want 0, a duration"},
		{[]string{"lock", "--wait", "-1s", "job", "--", "true"}, "want 0, a duration"},
		{[]string{"lock", "--once-per", "1m", "--wait", "5s", "job", "--", "true"}, "--once-per never waits"},
		{[]string{"lock", "--once-per", "1500ms", "job", "--", "true"}, "whole number of seconds"},
		{[]string{"lock", "--once-per", "48h", "job", "--", "true"}, "whole number of seconds"},
		{[]string{"lock", "--once-per", "0s", "job", "--", "true"}, "whole number of seconds"},
		{[]string{"lock", "--once-per", "5m", "--fair", "job", "--", "true"}, "do not go together"},
		{[]string{"lock", "--conflict-exit", "300", "job", "--", "true"}, "--conflict-exit"},
		{[]string{"lock", "--wait", "0", "--store", dir, "--payload", strings.Repeat("x", 2000), "job", "--", "true"}, "Payload is 2000 bytes"},
		{[]string{"run", "--store", dir, "--addr", "0.0.0.0:80", "job", "--", "true"}, "names no host that others can reach"},
		{[]string{"status"}, "want one lease NAME"},
		{[]string{"status", "a", "b"}, "want one lease NAME"},
		{[]string{"status", "--lease", "5s", "a"}, "flag provided but not defined: -lease"},
		{[]string{"status", "--id", "x", "a"}, "flag provided but not defined: -id"},
	} {
		code, _, errs := runTenure(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, exitUsage, c.want)
		}
		if strings.Contains(errs, "examples:") {
			t.Errorf("%q: the whole help after an error:\n%s", c.args, errs)
		}
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, cmd := range []string{"run", "lock", "status", "plan"} {
		if code, _, errs := runTenure(t, cmd, "-h"); code != 0 || !strings.Contains(errs, "examples:") || !strings.Contains(errs, "from the environment") {
			t.Errorf("%s -h: exit %d\n%s", cmd, code, errs)
		}
	}
}

func TestStatusOfAbsentLease(t *testing.T) {
	code, out, errs := runTenure(t, "status", "--store", "file://"+t.TempDir(), "nothing/here")
	if code != exitAbsent || !strings.Contains(out, "nothing/here: no record") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runTenure(t, "status", "--json", "--store", "file://"+t.TempDir(), "x")
	if code != exitAbsent || !strings.Contains(out, `"found":false`) || strings.Contains(out, "silent") {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}

// TestFlagsAfterName: flags may follow NAME, as in "tenure status NAME --json".
func TestFlagsAfterName(t *testing.T) {
	dir := "file://" + t.TempDir()
	code, out, errs := runTenure(t, "status", "x", "--json", "--store", dir)
	if code != exitAbsent || !strings.Contains(out, `"found":false`) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runTenure(t, "lock", "job", "--wait", "0", "--store", dir, "--", "true")
	if code != 0 {
		t.Fatalf("lock NAME --wait 0 -- true: exit %d\n%s", code, errs)
	}
}

// TestUnreachableStore: a store that never answers ends run and lock with
// exitUnavailable after startupWait, naming the store and why (the dial
// error and its address, not a timeout).
func TestUnreachableStore(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	store := "dynamodb://table?region=us-east-1&endpoint=http://127.0.0.1:1"
	for _, cmd := range []string{"run", "lock"} {
		code, _, errs := runTenure(t, cmd, "--lease", "1s", "--store", store, "job", "--", "true")
		if code != exitUnavailable || !strings.Contains(errs, "no answer within 5s") || !strings.Contains(errs, "dial tcp 127.0.0.1:1: connect: connection refused") {
			t.Errorf("%s: exit %d, stderr %q; want %d", cmd, code, errs, exitUnavailable)
		}
	}
}

// TestDefaultStoreIsFixed: the default store does not move with TMPDIR
// (systemd's PrivateTmp gives each service its own): two services of one
// user must contend in one store.
func TestDefaultStoreIsFixed(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", a)
	s1 := defaultStore()
	t.Setenv("TMPDIR", b)
	s2 := defaultStore()
	if s1 != s2 || strings.Contains(s1, a) || strings.Contains(s2, b) {
		t.Fatalf("default store %q with TMPDIR=%s, %q with TMPDIR=%s", s1, a, s2, b)
	}
}

// TestDefaultStoreWithoutHome: a system user whose home does not exist
// (Debian gives daemons /nonexistent) gets tenure-UID under TMPDIR, as
// docs/cli.md says, not a directory tenure cannot make.
func TestDefaultStoreWithoutHome(t *testing.T) {
	tmp, home := t.TempDir(), t.TempDir()
	for _, c := range []struct{ home, want string }{
		{"/nonexistent", filepath.Join(tmp, "tenure-101")},
		{"", filepath.Join(tmp, "tenure-101")},
		{"/", filepath.Join(tmp, "tenure-101")},
		{filepath.Join(home, "missing"), filepath.Join(tmp, "tenure-101")},
		{home, filepath.Join(home, ".local", "state", "tenure")},
	} {
		if got := defaultStoreDir(c.home, 101, tmp); got != c.want {
			t.Errorf("home %q: default store %s, want %s", c.home, got, c.want)
		}
	}
}

// TestMissingCommand: a command that cannot be found exits 127 at once,
// before campaigning (not at the failover, when elected), and writes no
// record.
func TestMissingCommand(t *testing.T) {
	for _, args := range [][]string{
		{"run", "job", "--", "/nonexistent/cmd"},
		{"run", "job", "--", "no-such-command-anywhere"},
		{"lock", "job", "--", "/nonexistent/cmd"},
		{"run", "--group", "g", "--shards", "2", "--", "/nonexistent/cmd"},
	} {
		dir := t.TempDir()
		code, _, errs := runTenure(t, append([]string{args[0], "--store", "file://" + dir}, args[1:]...)...)
		if code != exitNoCommand || !strings.Contains(errs, "nothing was campaigned for") {
			t.Errorf("%q: exit %d, stderr %q; want %d at once", args, code, errs, exitNoCommand)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%q: the store holds %d entries; want nothing written", args, len(entries))
		}
	}
}

// TestSemaphoreNameClash: tenure status of a semaphore lists its slots'
// holders; a plain lock on a semaphore's name, and a semaphore on a held
// plain lock's name, are refused naming what the name is.
func TestSemaphoreNameClash(t *testing.T) {
	dir := t.TempDir()
	store, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "holder"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for range 2 {
		if _, err := l.TryLock(ctx, "pool", tenure.Slots(3)); err != nil && !errors.Is(err, tenure.ErrLocked) {
			t.Fatal(err)
		}
	}
	h, err := l.TryLock(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(ctx)
	url := "file://" + dir
	if code, out, errs := runTenure(t, "status", "--store", url, "pool"); code != 0 || !strings.Contains(out, "pool: a semaphore of 3 slots (pool::slots), 1 held") ||
		!strings.Contains(out, `held by "holder"`) || !strings.Contains(out, "free") {
		t.Errorf("status of a semaphore: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runTenure(t, "lock", "--wait", "0", "--store", url, "pool", "--", "true"); code != exitUsage || !strings.Contains(errs, `"pool" is a semaphore of 3 slots (pool::slots): add --slots 3`) {
		t.Errorf("a plain lock on a semaphore: %d %s", code, errs)
	}
	if code, _, errs := runTenure(t, "lock", "--wait", "0", "--slots", "2", "--store", url, "plain", "--", "true"); code != exitUsage || !strings.Contains(errs, `"plain" is held as a plain lock by "holder"`) {
		t.Errorf("a semaphore on a plain lock: %d %s", code, errs)
	}
}

// TestReadOnlyCommandsMakeNoDirectory: status, list, gc and release on a
// file store whose directory does not exist (a mistyped path) say so and
// leave nothing behind.
func TestReadOnlyCommandsMakeNoDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	url := "file://" + dir
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "--store", url, "job"}, exitAbsent, "does not exist"},
		{[]string{"list", "--store", url}, 0, "does not exist"},
		{[]string{"gc", "--store", url}, 0, "nothing to remove"},
		{[]string{"release", "--force", "--store", url, "job"}, 0, "nothing to release"},
	} {
		code, out, errs := runTenure(t, c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%q: exit %d, %s%s; want %d saying %q", c.args, code, out, errs, c.code, c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%q made the directory %s", c.args, dir)
		}
	}
}

// TestGCDryRunSaysSo: gc --dry-run with nothing to remove still says what
// it looked at.
func TestGCDryRunSaysSo(t *testing.T) {
	code, out, errs := runTenure(t, "gc", "--dry-run", "--store", "file://"+t.TempDir())
	if code != 0 || !strings.Contains(out, "0 of 0 records would be removed") {
		t.Errorf("gc --dry-run: %d %s%s", code, out, errs)
	}
}

// TestUsageErrorsPointToHelp: an argument error says what is wrong in one
// line and where the help is, without the library's prefix twice; help
// shows each default once.
func TestUsageErrorsPointToHelp(t *testing.T) {
	dir := "file://" + t.TempDir()
	for _, args := range [][]string{
		{"run", "--", "true"},
		{"lock", "--store", dir, "--", "true"},
		{"run", "bad name", "--", "true"},
		{"status"},
		{"release", "--force"},
		{"list", "a", "b"},
		{"gc", "a", "b"},
		{"run", "--shards", "2", "--", "true"},
	} {
		code, _, errs := runTenure(t, args...)
		if code != exitUsage || !strings.Contains(errs, "see tenure "+args[0]+" -h") || strings.Contains(errs, ": tenure:") {
			t.Errorf("%q: exit %d, stderr %q; want %d, one line and where the help is", args, code, errs, exitUsage)
		}
	}
	if _, _, errs := runTenure(t, "lock", "--wait", "0", "--store", dir, "--payload", strings.Repeat("x", 2000), "job", "--", "true"); strings.Contains(errs, "tenure lock: tenure:") {
		t.Errorf("the prefix twice: %s", errs)
	}
	if _, _, errs := runTenure(t, "lock", "-h"); strings.Contains(errs, "(default -1)") || !strings.Contains(errs, "-conflict-exit status") {
		t.Errorf("lock -h shows --conflict-exit as:\n%s", errs)
	}
}

// TestOncePerSlotSaysSo: a spent --once-per slot lists as what it is (kept
// taken so that the slot runs once, and when gc removes it), not as a
// lease held; gc's floor on --older-than says why it is there.
func TestOncePerSlotSaysSo(t *testing.T) {
	dir := t.TempDir()
	store, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute)
	name := "nightly/" + at.UTC().Format("20060102T150405Z")
	rec := lease.Record{Holder: "a", Token: uint64(at.UnixMilli()), Duration: time.Hour, Nonce: "n", WrittenAt: at}
	if _, err := store.Put(context.Background(), name, rec, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runTenure(t, "list", "--store", "file://"+dir)
	if code != 0 || !strings.Contains(out, name+`: once-per slot of nightly, taken by "a"`) || !strings.Contains(out, "tenure gc removes it once") || strings.Contains(out, "held by") {
		t.Errorf("list: %d %s%s; want the slot shown as a spent once-per slot", code, out, errs)
	}
	code, _, errs = runTenure(t, "gc", "--older-than", "1s", "--store", "file://"+dir)
	if code != exitUsage || !strings.Contains(errs, "want an hour at least: a record is removed only if its token is below") {
		t.Errorf("gc --older-than 1s: %d %s; want %d saying why an hour", code, errs, exitUsage)
	}
}
