//go:build !unix

package filelease

import (
	"context"
	"errors"
)

const supported = false

func lockFile(context.Context, string) (func(), error) {
	return nil, errors.New("filelease: no flock on this system")
}
