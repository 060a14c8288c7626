//go:build !unix

package filelease

import (
	"context"
	"errors"
	"os"
)

const supported = false

func lockFile(context.Context, string) (func(), error) {
	return nil, errors.New("filelease: no flock on this system")
}

var errReadOnly, errNotDir = errors.New("read-only"), errors.New("not a directory")

func private(string, os.FileInfo) error { return nil }
