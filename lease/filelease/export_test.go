package filelease

import "context"

// LockForTest takes the lock at path, as a writer does.
func LockForTest(path string) (func(), error) { return lockFile(context.Background(), path) }
