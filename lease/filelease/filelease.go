// Package filelease is a lease.Store in a directory: leases for processes on
// one host, with no server and no cloud. It is the tenure command's default
// store.
//
// It takes no lock, so that no process, stopped or starved in the middle of
// a write, can hold the others up. Each lease is a directory, NAME.lease
// (the name escaped, see below), of version files that are written once and
// never changed: 1, 2, 3... each holding the record as JSON with its version
// ("SEQ-RANDOM") and the version it replaced. The record is the highest
// version present. A write for expected version N:
//
//  1. reads the highest version; if it is not N, the write conflicts;
//  2. writes the new record to a temporary file in the lease's directory
//     and fsyncs it;
//  3. links it as N+1 (link(2) fails if N+1 exists: of two writers racing
//     for N+1, one wins), and fsyncs the directory;
//  4. checks that N+1 follows N: the highest version is N+1 and N is still
//     the version it expected, or the version after N+1 names N+1 as the
//     one it replaced. A writer that was stopped for long between reading
//     and linking may find N+1 removed by then (see below) and link into
//     the gap: it never becomes the highest, and the check makes the write
//     conflict.
//
// After a write, the writer removes the versions more than four below its
// own that are older than ten seconds; a reader that finds the highest
// version removed meanwhile reads again.
//
// Guarantees, and what they assume:
//
//   - Compare-and-swap between every process and goroutine that uses the
//     same directory, from link(2)'s exclusive creation on one filesystem.
//     Do not share a directory over a network filesystem.
//   - A write that returned is on disk: the version file and the directory
//     entry are fsynced before Put returns, so a crash or power cut after
//     that loses no confirmed write. A crash before the link leaves the old
//     record and a stray temporary file, removed by a later write.
//   - Versions never repeat for a name, even if its records are deleted:
//     each holds 64 random bits.
//   - No write waits for another: a process stopped mid-write delays no
//     one, and the first writer for a version wins.
//
// Deleting NAME.lease (or the whole directory) loses the record: tenure's
// lost-record rule then waits a lease before anyone takes it again, and a
// Put recreates what is missing. A NAME.lease that is a file, not a
// directory, was written by tenure before this layout (or is garbage): it
// reads as an invalid record, so that no process of an older tenure can
// take the lease beside a newer one; stop those, then replace it (tenure
// release --force NAME).
//
// File names: bytes of the lease name other than a-z, 0-9, '-', '_' and '.'
// are written as %XX (so upper case letters too: two names never share a file
// on a case-insensitive filesystem), and a name whose escaped form exceeds
// 160 bytes is stored under "h-" and the first 40 hex digits of its SHA-256.
// The lease name is kept inside each version as well.
//
// The directory must belong to the user that opens it and be writable by no
// one else: anyone who can write it can forge, release or delete every
// lease in it. New refuses any other directory (a local user who created
// it first would own the leases of everyone who uses it); NewShared takes
// a directory shared on purpose, such as one writable by a group.
//
// filelease runs on Unix systems; New reports an error elsewhere.
package filelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// A writer removes the versions more than keep below its own that are
// older than pruneAge: a writer checking its own write reads the versions
// just above it, and a check follows its link at once, so only a writer
// stalled for pruneAge between the two can find them gone (and then says
// it cannot tell).
const (
	keep     = 4
	pruneAge = 10 * time.Second
)

// Store is a lease.Store in a directory. It is safe for concurrent use by
// goroutines and processes.
type Store struct {
	dir    string
	shared bool
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// New returns a Store in dir, creating the directory if need be (mode
// 0755, less the umask). It refuses, with a permanent error, a directory
// owned by another user or writable by group or others.
func New(dir string) (*Store, error) { return open(dir, false) }

// NewShared is New for a directory shared on purpose: it takes one owned by
// another user or writable by others. Every user who can write it can
// forge, release or delete the leases in it.
func NewShared(dir string) (*Store, error) { return open(dir, true) }

func open(dir string, shared bool) (*Store, error) {
	if dir == "" {
		return nil, errors.New("filelease: empty directory")
	}
	if !supported {
		return nil, errors.New("filelease: runs on Unix systems only")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	s := &Store{dir: abs, shared: shared}
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	return s, nil
}

// ensureDir creates the store's directory if it is missing (at New, or
// deleted under running processes: its records are then lost, and the
// lost-record rule applies), and checks whose it is.
func (s *Store) ensureDir() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return classify(fmt.Errorf("filelease: %w", err))
	}
	fi, err := os.Stat(s.dir)
	if err != nil {
		return classify(fmt.Errorf("filelease: %w", err))
	}
	if !fi.IsDir() {
		return lease.Permanent(fmt.Errorf("filelease: %s is not a directory", s.dir))
	}
	if !s.shared {
		if err := private(s.dir, fi); err != nil {
			return lease.Permanent(fmt.Errorf("filelease: %w: whoever can write it can forge, release or delete its leases; use a directory of your own, or one shared on purpose (NewShared; shared=true in a file:// URL)", err))
		}
	}
	return nil
}

// Dir returns the store's directory, absolute.
func (s *Store) Dir() string { return s.dir }

// file is a version file's content.
type file struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Prev      string    `json:"prev,omitempty"` // the version this one replaced
	Holder    string    `json:"holder"`
	Token     uint64    `json:"token"`
	Duration  int64     `json:"duration_ns"`
	Released  bool      `json:"released"`
	Nonce     string    `json:"nonce"`
	WrittenAt time.Time `json:"written_at"`
	Payload   []byte    `json:"payload,omitempty"`
}

// base returns the escaped name of a lease, without suffix.
func base(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > 160 {
		sum := sha256.Sum256([]byte(name))
		return "h-" + hex.EncodeToString(sum[:20])
	}
	return b.String()
}

// unbase returns the lease name of an escaped one, unless it is hashed.
func unbase(b string) (string, bool) {
	if strings.HasPrefix(b, "h-") && len(b) == 42 {
		return "", false
	}
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '%' {
			out = append(out, b[i])
			continue
		}
		if i+2 >= len(b) {
			return "", false
		}
		v, err := strconv.ParseUint(b[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		out = append(out, byte(v))
		i += 2
	}
	return string(out), lease.ValidateName(string(out)) == nil
}

// leaseDir is the directory of name's versions.
func (s *Store) leaseDir(name string) string { return filepath.Join(s.dir, base(name)+".lease") }

func versionPath(dir string, seq uint64) string {
	return filepath.Join(dir, strconv.FormatUint(seq, 10))
}

// current is what a lease's directory holds: its highest version.
type current struct {
	rec   lease.Record
	ver   lease.Version
	seq   uint64 // 0: no record
	found bool
}

// highest returns the highest version number in dir; 0 if none. A
// missing dir has none.
func highest(dir string) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var top uint64
	for _, e := range entries {
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && n > top {
			top = n
		}
	}
	return top, nil
}

// read returns what name's directory holds, reading again if a writer
// removed the highest version meanwhile.
func (s *Store) read(op, name string) (current, error) {
	dir := s.leaseDir(name)
	for range 100 {
		top, err := highest(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return current{}, nil
		case errors.Is(err, errNotDir):
			return current{}, &lease.RecordError{Name: name, Field: "file", Reason: dir + " is a file, not a directory of versions: written by an older tenure, before the lock-free layout (stop its processes first), or garbage; replace it with tenure release --force NAME"}
		case err != nil:
			return current{}, classify(fmt.Errorf("%s lease %q: %w", op, name, err))
		case top == 0:
			return current{}, nil
		}
		f, err := readVersion(name, dir, top)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a writer three versions on: read again
		}
		if err != nil {
			return current{}, err
		}
		rec := lease.Record{Holder: f.Holder, Token: f.Token, Duration: time.Duration(f.Duration), Released: f.Released,
			Nonce: f.Nonce, WrittenAt: f.WrittenAt, Payload: f.Payload}
		if err := rec.Validate(name); err != nil {
			return current{}, err
		}
		return current{rec: rec, ver: lease.Version(f.Version), seq: top, found: true}, nil
	}
	return current{}, fmt.Errorf("%s lease %q: the highest version kept vanishing under fast writers", op, name)
}

// readVersion reads and checks version seq of name.
func readVersion(name, dir string, seq uint64) (file, error) {
	b, err := os.ReadFile(versionPath(dir, seq))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return file{}, err
		}
		return file{}, classify(fmt.Errorf("get lease %q: %w", name, err))
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return file{}, &lease.RecordError{Name: name, Field: "file", Reason: fmt.Sprintf("version %d: %v", seq, err)}
	}
	switch {
	case f.Name != name:
		return file{}, &lease.RecordError{Name: name, Field: "file", Reason: fmt.Sprintf("version %d holds lease %q", seq, f.Name)}
	case !strings.HasPrefix(f.Version, strconv.FormatUint(seq, 10)+"-"):
		return file{}, &lease.RecordError{Name: name, Field: "file", Reason: fmt.Sprintf("version %d holds version %q", seq, f.Version)}
	}
	return f, nil
}

// OneHost implements lease.OneHost: a directory is shared by the
// processes of one host.
func (s *Store) OneHost() bool { return true }

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	cur, err := s.read("get", name)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if !cur.found {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	return cur.rec, cur.ver, nil
}

// beforeLink, when set (tests), runs between a write's temporary file and
// its link: where a stopped writer would hold a lock.
var beforeLink func()

// beforeRename, when set (tests), runs in Delete between its check of the
// version and the rename that removes the record.
var beforeRename func()

// Put implements lease.Store. A conflict is a *lease.ConflictError carrying
// the current record when one is known.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	cur, err := s.read("put", name)
	if err != nil {
		return lease.NoVersion, err
	}
	if cur.found != (expect != lease.NoVersion) || cur.found && cur.ver != expect {
		return lease.NoVersion, &lease.ConflictError{Name: name, Current: cur.rec, Version: cur.ver, Found: cur.found}
	}
	dir := s.leaseDir(name)
	if !cur.found {
		if err := s.ensureDir(); err != nil { // deleted under us: recreated
			return lease.NoVersion, err
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
		}
		if err := syncDir(s.dir); err != nil {
			return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
		}
	}
	seq := cur.seq + 1
	next := lease.Version(fmt.Sprintf("%d-%016x", seq, rand.Uint64()))
	data, err := json.Marshal(file{Name: name, Version: string(next), Prev: string(expect), Holder: rec.Holder, Token: rec.Token,
		Duration: int64(rec.Duration), Released: rec.Released, Nonce: rec.Nonce, WrittenAt: rec.WrittenAt.UTC(), Payload: rec.Payload})
	if err != nil {
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%016x", rand.Uint64()))
	if err := writeSynced(tmp, append(data, '\n')); err != nil {
		if errors.Is(err, fs.ErrNotExist) { // the lease's directory vanished: its record is lost
			return lease.NoVersion, lease.Conflict(name)
		}
		return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
	}
	defer os.Remove(tmp)
	if beforeLink != nil {
		beforeLink()
	}
	if err := ctx.Err(); err != nil { // last moment to change nothing
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	if err := os.Link(tmp, versionPath(dir, seq)); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			return lease.NoVersion, s.conflict(name) // another writer took seq, or the record was lost
		}
		return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
	}
	if err := syncDir(dir); err != nil {
		// Linked, but maybe not durable: the outcome is unknown, as for a
		// lost response.
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	if err := s.follows(name, dir, seq, next, expect); err != nil {
		return lease.NoVersion, err
	}
	s.prune(dir, seq)
	return next, nil
}

// conflict is Put's conflict, with the current record if it can be read.
func (s *Store) conflict(name string) error {
	cur, err := s.read("put", name)
	if err != nil {
		return lease.Conflict(name)
	}
	return &lease.ConflictError{Name: name, Current: cur.rec, Version: cur.ver, Found: cur.found}
}

// follows checks that version seq (next), just linked, follows expect: the
// write is then applied. A write linked into a gap that pruning left
// (its writer was stopped between reading and linking) conflicts; where
// what is left cannot tell, the outcome is reported unknown, and the
// caller reads back.
func (s *Store) follows(name, dir string, seq uint64, next, expect lease.Version) error {
	top, err := highest(dir)
	if err != nil {
		return fmt.Errorf("put lease %q: checking the write: %w", name, err)
	}
	if top == seq {
		if seq == 1 && expect == lease.NoVersion {
			return nil
		}
		prev, err := readVersion(name, dir, seq-1)
		if err == nil && lease.Version(prev.Version) == expect {
			return nil
		}
		// Our version is the highest, but not after the one we expected:
		// the record was lost and written again beneath it. Take ours back;
		// whoever read it meanwhile saw a record lost.
		_ = os.Remove(versionPath(dir, seq))
		return fmt.Errorf("put lease %q: the record was lost and written again while this write was in flight; not applied", name)
	}
	after, err := readVersion(name, dir, seq+1)
	switch {
	case err == nil && lease.Version(after.Prev) == next:
		return nil // applied, and already replaced
	case err == nil:
		_ = os.Remove(versionPath(dir, seq)) // in a gap, never the highest: seen by no one
		return s.conflict(name)
	}
	return fmt.Errorf("put lease %q: cannot tell whether the write was applied: the versions after it are gone", name)
}

// prune removes the versions more than keep below seq older than
// pruneAge, and temporary files a crash left behind.
func (s *Store) prune(dir string, seq uint64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	old := func(e fs.DirEntry, age time.Duration) bool {
		fi, err := e.Info()
		return err == nil && time.Since(fi.ModTime()) > age
	}
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 10, 64)
		switch {
		case err == nil && n+keep < seq && old(e, pruneAge):
			_ = os.Remove(filepath.Join(dir, e.Name()))
		case err != nil && strings.HasPrefix(e.Name(), ".tmp-") && old(e, time.Minute):
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// List implements lease.Lister: every NAME.lease whose lease name starts
// with prefix, read from its highest version or, for one that cannot be
// read, from its escaped name (unless hashed).
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return classify(fmt.Errorf("list leases in %s: %w", s.dir, err))
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list leases: %w", err)
		}
		b, ok := strings.CutSuffix(e.Name(), ".lease")
		if !ok || strings.HasPrefix(b, ".") {
			continue
		}
		name, ok := unbase(b)
		dir := filepath.Join(s.dir, e.Name())
		if top, err := highest(dir); err == nil && top > 0 {
			var f file
			if data, err := os.ReadFile(versionPath(dir, top)); err == nil && json.Unmarshal(data, &f) == nil && base(f.Name) == b {
				name, ok = f.Name, true
			}
		}
		if ok && strings.HasPrefix(name, prefix) {
			if err := fn(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements lease.Deleter: it moves the lease's directory aside in
// one rename, then checks that what it moved was the version expected, and
// moves it back if not (a write landed between the check and the rename).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	dir := s.leaseDir(name)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() && expect == lease.AnyVersion {
		if err := os.Remove(dir); err != nil { // an old layout's file, or garbage
			return classify(fmt.Errorf("delete lease %q: %w", name, err))
		}
		return syncDir(s.dir)
	}
	if expect != lease.AnyVersion {
		cur, err := s.read("delete", name)
		switch {
		case err != nil:
			return err
		case !cur.found:
			return lease.NotFound(name)
		case cur.ver != expect:
			return &lease.ConflictError{Name: name, Current: cur.rec, Version: cur.ver, Found: true}
		}
	}
	aside := filepath.Join(s.dir, fmt.Sprintf(".%s.deleted-%016x", base(name), rand.Uint64()))
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(dir, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return lease.NotFound(name)
		}
		return classify(fmt.Errorf("delete lease %q: %w", name, err))
	}
	if expect != lease.AnyVersion {
		top, err := highest(aside)
		var f file
		if err == nil {
			f, err = readVersion(name, aside, top)
		}
		if err != nil || lease.Version(f.Version) != expect {
			if os.Rename(aside, dir) == nil {
				return lease.Conflict(name)
			}
			return fmt.Errorf("delete lease %q: a write landed while deleting, and the record could not be put back (%s): it is lost", name, aside)
		}
	}
	if err := os.RemoveAll(aside); err != nil {
		return classify(fmt.Errorf("delete lease %q: %w", name, err))
	}
	return syncDir(s.dir)
}

// classify marks the errors that retrying cannot cure as permanent, so
// that tenure gives up at once and says why: access denied, a read-only
// filesystem, a path through a file. A full disk is not one of them: it
// may be freed.
func classify(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, errReadOnly) || errors.Is(err, errNotDir) {
		return lease.Permanent(err)
	}
	return err
}

// fsync syncs f to disk; tests watch it.
var fsync = (*os.File).Sync

// writeSynced writes data to path, which must not exist, and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = fsync(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
