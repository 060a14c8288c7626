//go:build unix

package filelease

import (
	"fmt"
	"os"
	"syscall"
)

const supported = true

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
