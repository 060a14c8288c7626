// Package filelease is a lease.Store in a directory: leases for processes on
// one host, with no server and no cloud. It is the tenure command's default
// store.
//
// Each lease is one file, NAME.lease (the name escaped, see below), holding
// the record as JSON with its version. A write takes an exclusive flock(2) on
// the lease's lock file (.NAME.lock, kept empty), reads the current file,
// compares its version with the expected one, writes the new record to a
// temporary file (.NAME.tmp), fsyncs it, renames it over NAME.lease and
// fsyncs the directory, then unlocks. A read takes no lock: rename is atomic,
// so it sees the old file or the new one, never a mix.
//
// Guarantees, and what they assume:
//
//   - Compare-and-swap between every process and goroutine that uses the same
//     directory, through flock. flock works between processes of one host; on
//     a network filesystem it holds only where the filesystem implements it
//     across clients (Linux NFSv4 does, by emulating flock with byte-range
//     locks; many others do not). Do not share a directory over a filesystem
//     without working locks.
//   - A write that returned is on disk: the file and the directory entry are
//     fsynced before Put returns, so a crash or power cut after that loses no
//     confirmed write. A crash before the rename leaves the old record and a
//     stray .NAME.tmp, which the next write overwrites.
//   - Versions never repeat for a name, even if its file is deleted: each is
//     a sequence number and 64 random bits.
//
// Deleting NAME.lease loses the record (tenure's lost-record rule then
// waits a lease before anyone takes it again). The lock files stay: one empty
// file per lease name ever written.
//
// File names: bytes of the lease name other than a-z, 0-9, '-', '_' and '.'
// are written as %XX (so upper case letters too: two names never share a file
// on a case-insensitive filesystem), and a name whose escaped form exceeds
// 160 bytes is stored under "h-" and the first 40 hex digits of its SHA-256.
// The lease name is kept inside the file as well.
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

// Store is a lease.Store in a directory. It is safe for concurrent use by
// goroutines and processes.
type Store struct {
	dir string
}

var _ lease.Store = (*Store)(nil)

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
		return nil, errors.New("filelease: needs flock(2), which this system lacks")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, classify(fmt.Errorf("filelease: %w", err))
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, classify(fmt.Errorf("filelease: %w", err))
	}
	if !fi.IsDir() {
		return nil, lease.Permanent(fmt.Errorf("filelease: %s is not a directory", abs))
	}
	if !shared {
		if err := private(abs, fi); err != nil {
			return nil, lease.Permanent(fmt.Errorf("filelease: %w: whoever can write it can forge, release or delete its leases; use a directory of your own, or one shared on purpose (NewShared; shared=true in a file:// URL)", err))
		}
	}
	return &Store{dir: abs}, nil
}

// Dir returns the store's directory, absolute.
func (s *Store) Dir() string { return s.dir }

// file is a lease file's content.
type file struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Holder    string    `json:"holder"`
	Token     uint64    `json:"token"`
	Duration  int64     `json:"duration_ns"`
	Released  bool      `json:"released"`
	Nonce     string    `json:"nonce"`
	WrittenAt time.Time `json:"written_at"`
	Payload   []byte    `json:"payload,omitempty"`
}

// base returns the file name of name's lease, without suffix.
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

func (s *Store) path(name string) string { return filepath.Join(s.dir, base(name)+".lease") }

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get lease %q: %w", name, err)
	}
	rec, ver, found, err := s.read(name)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if !found {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	return rec, ver, nil
}

// read returns what name's file holds.
func (s *Store) read(name string) (lease.Record, lease.Version, bool, error) {
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return lease.Record{}, lease.NoVersion, false, nil
	}
	if err != nil {
		return lease.Record{}, lease.NoVersion, false, classify(fmt.Errorf("get lease %q: %w", name, err))
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return lease.Record{}, lease.NoVersion, false, &lease.RecordError{Name: name, Field: "file", Reason: err.Error()}
	}
	if f.Name != name {
		return lease.Record{}, lease.NoVersion, false, &lease.RecordError{Name: name, Field: "file", Reason: fmt.Sprintf("holds lease %q", f.Name)}
	}
	if f.Version == "" {
		return lease.Record{}, lease.NoVersion, false, &lease.RecordError{Name: name, Field: "file", Reason: "no version"}
	}
	rec := lease.Record{Holder: f.Holder, Token: f.Token, Duration: time.Duration(f.Duration), Released: f.Released,
		Nonce: f.Nonce, WrittenAt: f.WrittenAt, Payload: f.Payload}
	if err := rec.Validate(name); err != nil {
		return lease.Record{}, lease.NoVersion, false, err
	}
	return rec, lease.Version(f.Version), true, nil
}

// Put implements lease.Store. A conflict is a *lease.ConflictError carrying
// the current record.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.NoVersion, fmt.Errorf("put: %w", err)
	}
	if err := rec.Validate(name); err != nil {
		return lease.NoVersion, fmt.Errorf("put %w", err)
	}
	if err := ctx.Err(); err != nil {
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	b := base(name)
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "."+b+".lock"))
	if err != nil {
		return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
	}
	defer unlock()
	cur, ver, found, err := s.read(name)
	if err != nil {
		return lease.NoVersion, err
	}
	if found != (expect != lease.NoVersion) || found && ver != expect {
		return lease.NoVersion, &lease.ConflictError{Name: name, Current: cur, Version: ver, Found: found}
	}
	seq := uint64(0)
	if found {
		seq, _ = strconv.ParseUint(strings.SplitN(string(ver), "-", 2)[0], 10, 64)
	}
	next := lease.Version(fmt.Sprintf("%d-%016x", seq+1, rand.Uint64()))
	data, err := json.Marshal(file{Name: name, Version: string(next), Holder: rec.Holder, Token: rec.Token,
		Duration: int64(rec.Duration), Released: rec.Released, Nonce: rec.Nonce, WrittenAt: rec.WrittenAt.UTC(), Payload: rec.Payload})
	if err != nil {
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	tmp := filepath.Join(s.dir, "."+b+".tmp")
	if err := writeSynced(tmp, append(data, '\n')); err != nil {
		return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
	}
	if err := ctx.Err(); err != nil { // last moment to change nothing
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	if err := os.Rename(tmp, s.path(name)); err != nil {
		return lease.NoVersion, classify(fmt.Errorf("put lease %q: %w", name, err))
	}
	if err := syncDir(s.dir); err != nil {
		// Renamed, but maybe not durable: the outcome is unknown, as for a
		// lost response.
		return lease.NoVersion, fmt.Errorf("put lease %q: %w", name, err)
	}
	return next, nil
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

// writeSynced writes data to path, truncating it, and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
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
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

var (
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// List implements lease.Lister: every NAME.lease file whose lease name
// starts with prefix, read from the file or, for one that cannot be read,
// from its file name (unless hashed). Temporary and lock files are left
// out.
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
		if !ok || strings.HasPrefix(b, ".") || e.IsDir() {
			continue
		}
		name, ok := unbase(b)
		if data, err := os.ReadFile(filepath.Join(s.dir, e.Name())); err == nil {
			var f file
			if json.Unmarshal(data, &f) == nil && base(f.Name) == b {
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

// unbase returns the lease name of a file's base name, unless it is hashed.
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

// Delete implements lease.Deleter, under the lease's lock as Put.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.ValidateName(name); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete lease %q: %w", name, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "."+base(name)+".lock"))
	if err != nil {
		return classify(fmt.Errorf("delete lease %q: %w", name, err))
	}
	defer unlock()
	if _, err := os.Stat(s.path(name)); errors.Is(err, fs.ErrNotExist) {
		return lease.NotFound(name)
	}
	if expect != lease.AnyVersion {
		cur, ver, found, err := s.read(name)
		switch {
		case err != nil:
			return err
		case !found:
			return lease.NotFound(name)
		case ver != expect:
			return &lease.ConflictError{Name: name, Current: cur, Version: ver, Found: true}
		}
	}
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return classify(fmt.Errorf("delete lease %q: %w", name, err))
	}
	return syncDir(s.dir)
}
