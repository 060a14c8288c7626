//go:build !unix

package filelease

import (
	"errors"
	"os"
)

// Elsewhere directories cannot be fsynced, and a write could not promise
// durability.
const supported = false

var errReadOnly, errNotDir = errors.New("read-only"), errors.New("not a directory")

func private(string, os.FileInfo) error { return nil }
