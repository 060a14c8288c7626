package filelease

// SetBeforeLink makes every Put run f between writing its temporary file
// and linking it: where a writer stopped mid-write would once have held a
// lock. Keep is how many versions below its own a writer leaves.
func SetBeforeLink(f func()) { beforeLink = f }

const Keep = keep
