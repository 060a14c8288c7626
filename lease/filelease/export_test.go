package filelease

import (
	"os"
	"path/filepath"
)

// SetBeforeLink makes every Put run f between writing its temporary file
// and linking it: where a writer stopped mid-write would once have held a
// lock. Keep is how many versions below its own a writer leaves.
func SetBeforeLink(f func()) { beforeLink = f }

// SetBeforeRename makes every Delete run f between its check of the
// version and its rename: where another writer's Put may land.
func SetBeforeRename(f func()) { beforeRename = f }

// VersionPath is the file of version seq of name in the store at dir.
func VersionPath(dir, name string, seq uint64) string {
	return versionPath(filepath.Join(dir, base(name)+".lease"), seq)
}

const Keep = keep

// SetFsync makes every fsync call f first (nil: none), then sync.
func SetFsync(f func(path string)) {
	fsync = func(file *os.File) error {
		if f != nil {
			f(file.Name())
		}
		return file.Sync()
	}
}
