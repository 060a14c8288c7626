package storeurl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/etcdlease"
)

// etcdDialTimeout bounds connecting to the cluster and logging in, when
// the call has no deadline of its own.
const etcdDialTimeout = 10 * time.Second

// openEtcd opens etcd://[USER@]HOST:PORT[,HOST:PORT...]/PREFIX?tls=true:
// the password comes from the URL or from TENURE_ETCD_PASSWORD. The client
// is made at the first call, not here: clientv3.New logs in at once, and a
// cluster down when tenure starts must be retried like any outage, not
// fail the start.
func openEtcd(u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "tls", "ca", "cert", "key"); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, errors.New("want etcd://HOST:PORT/PREFIX (HOST:PORT,HOST:PORT,... for a cluster)")
	}
	cfg := clientv3.Config{Endpoints: strings.Split(u.Host, ","), Logger: zap.NewNop(), DialTimeout: etcdDialTimeout}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Password == "" {
			cfg.Password = os.Getenv("TENURE_ETCD_PASSWORD")
		}
	}
	useTLS, err := boolParam(q, "tls", q.Get("ca") != "" || q.Get("cert") != "")
	if err != nil {
		return nil, err
	}
	if useTLS {
		if cfg.TLS, err = tlsConfig(q.Get("ca"), q.Get("cert"), q.Get("key")); err != nil {
			return nil, err
		}
	}
	return etcdlease.New(&lazyEtcd{cfg: cfg}, etcdlease.Config{Prefix: u.Path})
}

// lazyEtcd makes its client at the first call, and again at the next call
// after a failed attempt.
type lazyEtcd struct {
	cfg clientv3.Config
	mu  sync.Mutex
	c   *clientv3.Client
}

func (l *lazyEtcd) client(ctx context.Context) (*clientv3.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		return l.c, nil
	}
	cfg := l.cfg
	if d, ok := ctx.Deadline(); ok {
		cfg.DialTimeout = max(time.Until(d), time.Millisecond)
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	l.c = c
	return c, nil
}

func (l *lazyEtcd) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, key, opts...)
}

func (l *lazyEtcd) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	c, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Delete(ctx, key, opts...)
}

func (l *lazyEtcd) Txn(ctx context.Context) clientv3.Txn {
	c, err := l.client(ctx)
	if err != nil {
		return failedTxn{err}
	}
	return c.Txn(ctx)
}

// failedTxn is a transaction whose client could not be made.
type failedTxn struct{ err error }

func (t failedTxn) If(...clientv3.Cmp) clientv3.Txn        { return t }
func (t failedTxn) Then(...clientv3.Op) clientv3.Txn       { return t }
func (t failedTxn) Else(...clientv3.Op) clientv3.Txn       { return t }
func (t failedTxn) Commit() (*clientv3.TxnResponse, error) { return nil, t.err }

// tlsConfig loads a CA bundle and a client certificate, each optional.
func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca=%s: %w", ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca=%s: no PEM certificate in it", ca)
		}
		c.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("cert= and key= go together: the client certificate and its key")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cert=%s key=%s: %w", cert, key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
