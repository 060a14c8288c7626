//go:build unix

package filelease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

const supported = true

// lockFile takes an exclusive flock on path, creating the file if need be,
// and returns its release. It waits as long as ctx allows: flock cannot be
// interrupted, so it tries without blocking, backing off from 100µs to 10ms.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Errors that retrying cannot cure (see classify).
var errReadOnly, errNotDir error = syscall.EROFS, syscall.ENOTDIR

// private reports why dir, whose FileInfo is fi, is not this user's alone:
// another owner, or write permission for group or others.
func private(dir string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("directory %s belongs to uid %d, not to this user (uid %d)", dir, st.Uid, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("directory %s is writable by group or others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}
