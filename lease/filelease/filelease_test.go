package filelease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestCrashBeforeRename: a writer that died after writing its temporary
// file, before the rename, changed nothing; the next write succeeds.
func TestCrashBeforeRename(t *testing.T) {
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
	// What a crash leaves: a half-written temporary file.
	tmp := filepath.Join(dir, ".jobs%2Fa.tmp")
	if err := os.WriteFile(tmp, []byte(`{"name":"jobs/a","vers`), 0o666); err != nil {
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
	if err := os.Remove(filepath.Join(dir, "a.lease")); err != nil {
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

// TestCorruptFile: a file that does not hold a record is reported, with the
// lease and what is wrong, and not overwritten.
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

// TestLockWaitHonoursContext: a writer waiting for another's lock gives up
// when its context ends.
func TestLockWaitHonoursContext(t *testing.T) {
	dir := t.TempDir()
	s, _ := filelease.New(dir)
	if _, err := s.Put(t.Context(), "a", record(1), lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	// Hold a's lock from a child process, as another writer would.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "FILELEASE_HOLD="+filepath.Join(dir, ".a.lock"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "locked" {
		t.Fatalf("helper: %q, %v", buf, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "a", record(2), lease.NoVersion); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a done context: %v", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Put(ctx, "a", record(2), lease.NoVersion); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put while another process holds the lock: %v, want the context's deadline", err)
	}
}

// TestHelperHoldLock is run by TestLockWaitHonoursContext in a child
// process: it locks the file, says so, and holds it until stdin closes.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("FILELEASE_HOLD")
	if path == "" {
		t.Skip("helper process")
	}
	unlock, err := filelease.LockForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	fmt.Print("locked")
	_, _ = os.Stdin.Read(make([]byte, 1))
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
