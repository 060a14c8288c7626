//go:build unix

package filelease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/filelease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

func TestConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s, err := filelease.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestTwoStoresOneDirectory: two Store values on one directory are one
// store, as two processes are.
func TestTwoStoresOneDirectory(t *testing.T) {
	dir := t.TempDir()
	leasetest.Run(t, func(t *testing.T) lease.Store {
		a, err := filelease.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := filelease.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return alternating{a, b, new(atomic.Int64)}
	})
}

// alternating sends each call to the next of two stores.
type alternating struct {
	a, b lease.Store
	n    *atomic.Int64
}

func (s alternating) pick() lease.Store {
	if s.n.Add(1)%2 == 0 {
		return s.a
	}
	return s.b
}

func (s alternating) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return s.pick().Get(ctx, name)
}

func (s alternating) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	return s.pick().Put(ctx, name, rec, expect)
}

func record(token uint64) lease.Record {
	return lease.Record{Holder: "h", Token: token, Duration: time.Second, Nonce: "n" + strconv.FormatUint(token, 10), WrittenAt: time.Unix(1e9, 0).UTC()}
}

// TestCrashBeforeLink: a writer that died after writing its temporary
// file, before the link, changed nothing; the next write succeeds, and
// removes the leftover once it is old.
func TestCrashBeforeLink(t *testing.T) {
	dir := t.TempDir()
	s, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	v1, err := s.Put(ctx, "jobs/a", record(1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	// What a crash leaves: a half-written temporary file, long ago.
	tmp := filepath.Join(dir, "jobs%2Fa.lease", ".tmp-0123456789abcdef")
	if err := os.WriteFile(tmp, []byte(`{"name":"jobs/a","vers`), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	rec, v, err := s.Get(ctx, "jobs/a")
	if err != nil || v != v1 || !rec.Equal(record(1)) {
		t.Fatalf("Get after the crash = %v, %q, %v; want the first record at %q", rec, v, err, v1)
	}
	v2, err := s.Put(ctx, "jobs/a", record(2), v1)
	if err != nil {
		t.Fatal(err)
	}
	if rec, v, err := s.Get(ctx, "jobs/a"); err != nil || v != v2 || !rec.Equal(record(2)) {
		t.Fatalf("Get = %v, %q, %v; want the second record at %q", rec, v, err, v2)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary file is still there: %v", err)
	}
}

// TestVersionsPruned: a lease keeps a few versions, and those of the last
// seconds, not one per write.
func TestVersionsPruned(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	v := lease.NoVersion
	for i := range 50 {
		var err error
		if v, err = s.Put(t.Context(), "a", record(uint64(i+1)), v); err != nil {
			t.Fatal(err)
		}
	}
	age(t, filepath.Join(dir, "a.lease"))
	if _, err := s.Put(t.Context(), "a", record(51), v); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "a.lease"))
	if err != nil || len(entries) > filelease.Keep+2 {
		t.Fatalf("%d files after 51 writes (%v), want at most %d", len(entries), err, filelease.Keep+2)
	}
}

// age makes every version in dir an hour old, as if written long ago.
func age(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // a write in flight
		}
		if err := os.Chtimes(filepath.Join(dir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStaleWriterInTheGap: a writer stopped between reading and linking,
// while others wrote past it and pruned the version it links, does not
// take the record: it conflicts where the next version shows it was not
// the one replaced, and says it cannot tell where nothing is left to show
// it; the record stays the others' either way.
func TestStaleWriterInTheGap(t *testing.T) {
	for _, c := range []struct {
		name     string
		writes   int // by others while the stale writer is stopped
		conflict bool
	}{{"next-kept", filelease.Keep + 1, true}, {"next-pruned", filelease.Keep + 5, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := filelease.New(dir)
			other, _ := filelease.New(dir)
			ctx := t.Context()
			v1, err := s.Put(ctx, "a", record(1), lease.NoVersion)
			if err != nil {
				t.Fatal(err)
			}
			var last lease.Version
			filelease.SetBeforeLink(func() {
				filelease.SetBeforeLink(nil)
				v := v1
				for i := range c.writes {
					if v, err = other.Put(ctx, "a", record(uint64(10+i)), v); err != nil {
						t.Error(err)
					}
				}
				age(t, filepath.Join(dir, "a.lease")) // long ago: the next write prunes
				if v, err = other.Put(ctx, "a", record(99), v); err != nil {
					t.Error(err)
				}
				last = v
			})
			defer filelease.SetBeforeLink(nil)
			_, err = s.Put(ctx, "a", record(2), v1)
			if err == nil || errors.Is(err, lease.ErrConflict) != c.conflict {
				t.Fatalf("the stale write: %v; want an error, a conflict: %v", err, c.conflict)
			}
			if _, v, err := s.Get(ctx, "a"); err != nil || v != last {
				t.Fatalf("Get = %q, %v; want the others' last version %q", v, err, last)
			}
		})
	}
}

// TestStoppedWriterBlocksNoOne: a process stopped in the middle of a write
// holds no one up: another writes at once, and the stopped one, resumed,
// finds its write conflicts.
func TestStoppedWriterBlocksNoOne(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	v1, err := s.Put(t.Context(), "a", record(1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStopMidWrite$")
	cmd.Env = append(os.Environ(), "FILELEASE_STOP="+dir, "FILELEASE_VERSION="+string(v1))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	resume, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "stopping\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.Put(ctx, "a", record(3), v1); err != nil {
		t.Fatalf("Put while another writer is stopped mid-write: %v", err)
	}
	if _, err := resume.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "conflict\n" {
		t.Fatalf("the resumed writer: %q, %v; want a conflict", line, err)
	}
}

// TestHelperStopMidWrite is run by TestStoppedWriterBlocksNoOne in a child
// process: it pauses in the middle of a write (blocked on its stdin, where a
// stopped process would be held), then says how the write ended.
func TestHelperStopMidWrite(t *testing.T) {
	dir := os.Getenv("FILELEASE_STOP")
	if dir == "" {
		t.Skip("helper process")
	}
	s, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	filelease.SetBeforeLink(func() {
		fmt.Println("stopping")
		_, _ = os.Stdin.Read(make([]byte, 1))
	})
	_, err = s.Put(context.Background(), "a", record(2), lease.Version(os.Getenv("FILELEASE_VERSION")))
	if errors.Is(err, lease.ErrConflict) {
		fmt.Println("conflict")
		return
	}
	fmt.Println("applied:", err)
}

// TestDeletedFileNeverReusesVersion: a lease file deleted and written again
// gets versions its earlier life never had.
func TestDeletedFileNeverReusesVersion(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	ctx := t.Context()
	v1, err := s.Put(ctx, "a", record(1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "a.lease")); err != nil {
		t.Fatal(err)
	}
	v2, err := s.Put(ctx, "a", record(2), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if v1 == v2 {
		t.Fatalf("version %q reused", v1)
	}
	if _, err := s.Put(ctx, "a", record(3), v1); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Put naming the deleted file's version: %v, want a conflict", err)
	}
}

// TestCorruptFile: a file that does not hold a record (or a lease file of
// the layout before this one) is reported, with the lease and what is
// wrong, and not overwritten; a version that does not hold a record too.
func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	if err := os.WriteFile(filepath.Join(dir, "a.lease"), []byte("not json"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(t.Context(), "a"); !errors.Is(err, lease.ErrInvalidRecord) {
		t.Fatalf("Get: %v, want ErrInvalidRecord", err)
	}
	if _, err := s.Put(t.Context(), "a", record(1), lease.NoVersion); !errors.Is(err, lease.ErrInvalidRecord) {
		t.Fatalf("Put: %v, want ErrInvalidRecord", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "b.lease"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.lease", "1"), []byte("{"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(t.Context(), "b"); !errors.Is(err, lease.ErrInvalidRecord) {
		t.Fatalf("Get of a bad version: %v, want ErrInvalidRecord", err)
	}
}

// TestLongAndUpperCaseNames: names that escape past the file name limit, and
// names that differ only in case, get files of their own.
func TestLongAndUpperCaseNames(t *testing.T) {
	s, _ := filelease.New(t.TempDir())
	ctx := t.Context()
	long := strings.Repeat("A/", 99) + "Z"
	names := []string{long, long[:len(long)-1] + "Y", "Job", "job", "JOB"}
	for i, n := range names {
		if _, err := s.Put(ctx, n, record(uint64(i+1)), lease.NoVersion); err != nil {
			t.Fatalf("Put %q: %v", n, err)
		}
	}
	for i, n := range names {
		if rec, _, err := s.Get(ctx, n); err != nil || rec.Token != uint64(i+1) {
			t.Fatalf("Get %q = token %d, %v; want %d", n, rec.Token, err, i+1)
		}
	}
}

// TestProcessesRace: several processes increment one counter lease by
// compare-and-swap; every increment lands exactly once.
func TestProcessesRace(t *testing.T) {
	const procs, rounds = 4, 25
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	if _, err := s.Put(t.Context(), "counter", record(1), lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIncrement$")
		cmd.Env = append(os.Environ(), "FILELEASE_DIR="+dir, "FILELEASE_ROUNDS="+strconv.Itoa(rounds), "FILELEASE_ID=p"+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a process failed: %v", err)
		}
	}
	rec, _, err := s.Get(t.Context(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + procs*rounds); rec.Token != want {
		t.Fatalf("counter %d, want %d: increments were lost or doubled", rec.Token, want)
	}
}

// TestHelperIncrement is run by TestProcessesRace in child processes.
func TestHelperIncrement(t *testing.T) {
	dir := os.Getenv("FILELEASE_DIR")
	if dir == "" {
		t.Skip("helper process")
	}
	rounds, _ := strconv.Atoi(os.Getenv("FILELEASE_ROUNDS"))
	s, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for done := 0; done < rounds; {
		rec, v, err := s.Get(ctx, "counter")
		if err != nil {
			t.Fatal(err)
		}
		rec.Token++
		rec.Holder = os.Getenv("FILELEASE_ID")
		switch _, err := s.Put(ctx, "counter", rec, v); {
		case err == nil:
			done++
		case !errors.Is(err, lease.ErrConflict):
			t.Fatal(err)
		}
	}
}

// TestPutLinksNothingOnceContextDone: a Put whose context ends before its
// link changes nothing.
func TestPutLinksNothingOnceContextDone(t *testing.T) {
	s, _ := filelease.New(t.TempDir())
	v1, err := s.Put(t.Context(), "a", record(1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	filelease.SetBeforeLink(cancel)
	defer filelease.SetBeforeLink(nil)
	if _, err := s.Put(ctx, "a", record(2), v1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put whose context ended: %v", err)
	}
	if _, v, err := s.Get(t.Context(), "a"); err != nil || v != v1 {
		t.Fatalf("Get = %q, %v; want %q unchanged", v, err, v1)
	}
}

// TestVersionOfAnotherLease: a version file that holds another lease's
// record is refused as invalid, not read as this lease's.
func TestVersionOfAnotherLease(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	if _, err := s.Put(t.Context(), "b", record(1), lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a.lease"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "b.lease", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.lease", "1"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(t.Context(), "a"); !errors.Is(err, lease.ErrInvalidRecord) {
		t.Fatalf("Get of a version holding lease b: %v, want ErrInvalidRecord", err)
	}
}

// TestFsyncOrder: a write fsyncs its version's file before linking it,
// and the lease's directory after, so that a crash at any point leaves a
// whole version or none; creating a lease fsyncs the store's directory too.
func TestFsyncOrder(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	var got []string
	filelease.SetFsync(func(path string) {
		rel, _ := filepath.Rel(dir, path)
		if strings.Contains(rel, ".tmp-") {
			rel = "tmp"
		}
		got = append(got, rel)
	})
	filelease.SetBeforeLink(func() { got = append(got, "link") })
	defer filelease.SetFsync(nil)
	defer filelease.SetBeforeLink(nil)
	v, err := s.Put(t.Context(), "a", record(1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".", "tmp", "link", "a.lease"}; !slices.Equal(got, want) {
		t.Fatalf("creating: fsyncs and link %v, want %v", got, want)
	}
	got = nil
	if _, err := s.Put(t.Context(), "a", record(2), v); err != nil {
		t.Fatal(err)
	}
	if want := []string{"tmp", "link", "a.lease"}; !slices.Equal(got, want) {
		t.Fatalf("updating: fsyncs and link %v, want %v", got, want)
	}
}

// pinStore is a fresh store of one's own, and its directory.
func pinStore(t *testing.T) (*filelease.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "leases")
	s, err := filelease.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func pinRec(holder string, tok uint64) lease.Record {
	return lease.Record{Holder: holder, Token: tok, Duration: time.Second, Nonce: fmt.Sprint(holder, tok)}
}

// A Delete(expect) that a Put overtakes, between its check and its rename,
// does not delete the newer record: it conflicts, and the record stays.
func TestDeleteOvertakenByAPutKeepsIt(t *testing.T) {
	s, _ := pinStore(t)
	ctx := context.Background()
	v1, err := s.Put(ctx, "job", pinRec("a", 1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	filelease.SetBeforeRename(func() {
		filelease.SetBeforeRename(nil)
		if _, err := s.Put(ctx, "job", pinRec("b", 2), v1); err != nil {
			t.Error(err)
		}
	})
	defer filelease.SetBeforeRename(nil)
	if err := s.Delete(ctx, "job", v1); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Delete of v1 after b wrote over it: %v, want a conflict", err)
	}
	if rec, _, err := s.Get(ctx, "job"); err != nil || rec.Holder != "b" {
		t.Fatalf("after the Delete: %+v, %v; want b's record", rec, err)
	}
}

// A write that links its version as the highest, but not after the one it
// expected (the record was lost and written again meanwhile), is not
// applied: it would replace a record its writer never read.
func TestPutAfterALostRecordIsNotApplied(t *testing.T) {
	s, dir := pinStore(t)
	ctx := context.Background()
	v1, err := s.Put(ctx, "job", pinRec("a", 1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.Put(ctx, "job", pinRec("a", 2), v1)
	if err != nil {
		t.Fatal(err)
	}
	filelease.SetBeforeLink(func() {
		filelease.SetBeforeLink(nil)
		// The record is lost (its versions removed: a's own temporary
		// file stays, so that its link lands), then written again twice
		// by another.
		for seq := range uint64(2) {
			if err := os.Remove(filelease.VersionPath(dir, "job", seq+1)); err != nil {
				t.Error(err)
			}
		}
		w1, err := s.Put(ctx, "job", pinRec("b", 10), lease.NoVersion)
		if err == nil {
			_, err = s.Put(ctx, "job", pinRec("b", 11), w1)
		}
		if err != nil {
			t.Error(err)
		}
	})
	defer filelease.SetBeforeLink(nil)
	if _, err := s.Put(ctx, "job", pinRec("a", 3), v2); err == nil {
		t.Fatal("a's write, linked after b's rewrite of a lost record, was applied")
	}
	if rec, _, err := s.Get(ctx, "job"); err != nil || rec.Holder != "b" || rec.Token != 11 {
		t.Fatalf("after it: %+v, %v; want b's record, token 11", rec, err)
	}
}

// A version file whose content is another version's (copied, or written
// by hand) is an invalid record, not that version.
func TestVersionFileOfAnotherNumberIsInvalid(t *testing.T) {
	s, dir := pinStore(t)
	ctx := context.Background()
	v1, err := s.Put(ctx, "job", pinRec("a", 1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filelease.VersionPath(dir, "job", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filelease.VersionPath(dir, "job", 2), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var re *lease.RecordError
	if _, ver, err := s.Get(ctx, "job"); !errors.As(err, &re) || ver == v1 {
		t.Fatalf("version 2 holding version 1's record: Get %v (version %q), want an invalid record", err, ver)
	}
}
