package storeurl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/etcdlease"
)

// etcdDialTimeout bounds connecting to the cluster and logging in, when
// the call has no deadline of its own.
const etcdDialTimeout = 10 * time.Second

// etcdRedial is the longest wait between two attempts to connect to an
// etcd server that is down: a server back is used within it and a round
// trip.
const etcdRedial = 250 * time.Millisecond

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
	cfg := clientv3.Config{Endpoints: strings.Split(u.Host, ","), Logger: zap.NewNop(), DialTimeout: etcdDialTimeout,
		// Tuned for failover, not throughput: gRPC's reconnect backoff
		// (1s doubling to 2 minutes) would find a server back only
		// seconds later, past a short lease's deadline; here a reconnect
		// is tried at most every etcdRedial. Keepalive pings during calls
		// find a connection that went dead without a word.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: etcdRedial},
			MinConnectTimeout: time.Second,
		})},
		DialKeepAliveTime:    5 * time.Second, // etcd refuses pings more often than every 5s
		DialKeepAliveTimeout: 2 * time.Second,
	}
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
	r, err := c.Get(ctx, key, opts...)
	return r, l.why(c, err)
}

// why adds to a call that ran out of time while the client could not
// reach etcd what a dial of each endpoint says now ("connection
// refused"): the client waits for a connection until the call's deadline
// and then says only that time ran out.
func (l *lazyEtcd) why(c *clientv3.Client, err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Unavailable {
		return err
	}
	if conn := c.ActiveConnection(); conn == nil || conn.GetState() == connectivity.Ready {
		return err // connected: the server is slow, not gone
	}
	var dials []string
	for _, ep := range l.cfg.Endpoints {
		nc, derr := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://"), 200*time.Millisecond)
		if derr != nil {
			dials = append(dials, derr.Error())
			continue
		}
		_ = nc.Close()
	}
	if len(dials) == 0 {
		return err
	}
	return fmt.Errorf("%w (not connected to etcd: %s)", err, strings.Join(dials, "; "))
}

// Watch makes the store's change feed (etcdlease.Store.Watch) work. Without
// a client (etcd unreachable at the first call) it returns a closed
// channel: the feed tries again later.
func (l *lazyEtcd) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c, err := l.client(ctx)
	if err != nil {
		ch := make(chan clientv3.WatchResponse)
		close(ch)
		return ch
	}
	return c.Watch(ctx, key, opts...)
}

// RequestProgress and Close complete clientv3.Watcher.
func (l *lazyEtcd) RequestProgress(ctx context.Context) error {
	c, err := l.client(ctx)
	if err != nil {
		return err
	}
	return c.RequestProgress(ctx)
}

func (l *lazyEtcd) Close() error { return nil } // the client lives as long as the store

var _ clientv3.Watcher = (*lazyEtcd)(nil)

func (l *lazyEtcd) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	c, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	r, err := c.Delete(ctx, key, opts...)
	return r, l.why(c, err)
}

func (l *lazyEtcd) Txn(ctx context.Context) clientv3.Txn {
	c, err := l.client(ctx)
	if err != nil {
		return failedTxn{err}
	}
	return explainedTxn{c.Txn(ctx), l, c}
}

// explainedTxn is a transaction whose Commit's error says why etcd could
// not be reached, as lazyEtcd.why does.
type explainedTxn struct {
	clientv3.Txn
	l *lazyEtcd
	c *clientv3.Client
}

func (t explainedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return explainedTxn{t.Txn.If(cs...), t.l, t.c}
}
func (t explainedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return explainedTxn{t.Txn.Then(ops...), t.l, t.c}
}
func (t explainedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return explainedTxn{t.Txn.Else(ops...), t.l, t.c}
}
func (t explainedTxn) Commit() (*clientv3.TxnResponse, error) {
	r, err := t.Txn.Commit()
	return r, t.l.why(t.c, err)
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
