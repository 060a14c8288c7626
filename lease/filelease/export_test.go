package filelease

import "os"

// SetBeforeLink makes every Put run f between writing its temporary file
// and linking it: where a writer stopped mid-write would once have held a
// lock. Keep is how many versions below its own a writer leaves.
func SetBeforeLink(f func()) { beforeLink = f }

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
