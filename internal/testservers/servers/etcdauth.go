package servers

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The users of the etcd server with authentication on: root may do
// anything; tenure may log in and nothing else.
const (
	EtcdRootPassword   = "tenure-root"
	EtcdTenurePassword = "tenure-pw"
)

// etcdAuthSetup makes the users and turns authentication on. A step that
// was done already (an earlier try got that far) is skipped.
func etcdAuthSetup(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	done := func(err error) error {
		if errors.Is(err, rpctypes.ErrUserAlreadyExist) || errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			return nil
		}
		return err
	}
	for _, step := range []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", EtcdRootPassword); return done(err) },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "nothing"); return done(err) },
		func() error { _, err := c.UserAdd(ctx, "tenure", EtcdTenurePassword); return done(err) },
		func() error { _, err := c.UserGrantRole(ctx, "tenure", "nothing"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
