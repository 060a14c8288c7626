// Package etcdlease is a lease.Store on etcd (v3 API), through the official
// client, go.etcd.io/etcd/client/v3: a key per lease, each write one
// transaction that compares the key's revision (the package example makes
// one).
//
// # The conditional primitive
//
// A lease is the key Prefix+name; its value is tenure's JSON record (the
// format lease/s3lease documents), and its version is the key's
// mod_revision, in decimal. Every write is one Txn:
//
//   - to create a lease: if create_revision(key) = 0 then put, else get;
//   - to replace one: if mod_revision(key) = version then put, else get.
//
// etcd applies transactions one at a time in its raft log, so of any number
// of writers that read the same revision one succeeds; the others get the
// key as it is, which the conflict error carries (a *lease.ConflictError, no
// second request). Revisions are the store's global counter: they only rise,
// a deleted and re-created key gets a new one, and compaction forgets old
// revisions without reusing them, so a version is never handed out twice.
//
// The record is tenure's, not an etcd lease (no TTL, no keep-alive): the
// expiry rules, the fencing tokens and the lost-record rule are then the
// same on every store, and a record outlives a client's session, as the
// protocol wants (a candidate that pauses longer than the lease must find
// the record and demote, not find it gone). etcd's own locks
// (concurrency.Mutex) carry no token a resource could check, which is why
// "they aren't really locks" (etcd-io/etcd#11457); a tenure term has one.
//
// # Linearizability
//
// etcd's reads and writes are linearizable by default: "etcd ensures
// linearizability for all other operations by default" than watches and
// serializable reads ("KV APIs guarantees", etcd.io/docs/v3.5/learning/
// api_guarantees). Get is a linearizable Range (never WithSerializable), so
// it sees every write that completed before it, through a leader change.
//
// # Permissions
//
// With etcd's authentication on, a candidate's role needs readwrite on the
// prefix: etcdctl role grant-permission tenure readwrite --prefix=true
// /tenure/. List needs read; Delete needs write.
//
// # Errors
//
// Permission denied, failed authentication and a request too large are
// wrapped with lease.Permanent, so that tenure fails at once (the tenure
// command exits 69). An unreachable cluster, a lost leader or a timeout is
// transient: tenure retries within the lease's timings.
package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// KV is the part of the etcd client that Store uses. *clientv3.Client
// implements it.
type KV interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Txn(ctx context.Context) clientv3.Txn
}

var _ KV = (*clientv3.Client)(nil)

// Config configures a Store.
type Config struct {
	// Prefix is put in front of every lease name to make its key, for
	// example "/tenure/". Default "": the keys are the names alone.
	Prefix string
}

// Store is a lease.Store on etcd. It is safe for concurrent use. Make one
// with New.
type Store struct {
	kv     KV
	prefix string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// New returns a Store on kv (usually a *clientv3.Client). It sends nothing.
func New(kv KV, cfg Config) (*Store, error) {
	if kv == nil {
		return nil, errors.New("etcdlease: nil KV: pass a *clientv3.Client")
	}
	return &Store{kv: kv, prefix: cfg.Prefix}, nil
}

// Key returns the key of the lease name.
func (s *Store) Key(name string) string { return s.prefix + name }

// Get implements lease.Store with one linearizable Range.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	resp, err := s.kv.Get(ctx, s.Key(name))
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	if len(resp.Kvs) == 0 {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	return decode(name, resp.Kvs[0])
}

func decode(name string, kv *mvccpb.KeyValue) (lease.Record, lease.Version, error) {
	if len(kv.Value) > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("value is %d bytes, limit %d: not a lease record", len(kv.Value), recordjson.MaxSize)}
	}
	rec, err := recordjson.Decode(name, kv.Value)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, version(kv.ModRevision), nil
}

func version(rev int64) lease.Version { return lease.Version(strconv.FormatInt(rev, 10)) }

// Put implements lease.Store with one Txn (see the package doc).
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	key := s.Key(name)
	var cond clientv3.Cmp
	if expect == lease.NoVersion {
		cond = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	} else {
		rev, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || rev <= 0 {
			return lease.NoVersion, lease.Conflict(name) // no revision this store handed out
		}
		cond = clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	}
	resp, err := s.kv.Txn(ctx).If(cond).
		Then(clientv3.OpPut(key, string(recordjson.Encode(rec, recordjson.NewWriteID())))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	if resp.Succeeded {
		return version(resp.Header.Revision), nil
	}
	ce := &lease.ConflictError{Name: name}
	if rs := resp.Responses; len(rs) == 1 && rs[0].GetResponseRange() != nil && len(rs[0].GetResponseRange().Kvs) == 1 {
		cur, v, err := decode(name, rs[0].GetResponseRange().Kvs[0])
		if err != nil {
			return lease.NoVersion, lease.Conflict(name) // a value that is no record: a bare conflict
		}
		ce.Current, ce.Version, ce.Found = cur, v, true
	}
	return lease.NoVersion, ce
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = lease.CallError(ctx, err)
	err = fmt.Errorf("%s lease %q (key %q): %w", op, name, s.Key(name), err)
	return classify(err)
}

// classify marks an error permanent when retrying cannot cure it, adding
// what to do.
func classify(err error) error {
	code := codes.Unknown
	var coded interface{ Code() codes.Code } // the client's rpctypes.EtcdError
	if errors.As(err, &coded) {
		code = coded.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	if errors.Is(err, rpctypes.ErrAuthFailed) {
		return lease.Permanent(fmt.Errorf("%w; check the user name and password (tenure: in the URL, or TENURE_ETCD_PASSWORD)", err))
	}
	switch code {
	case codes.PermissionDenied:
		return lease.Permanent(fmt.Errorf("%w; grant the user's role readwrite on the prefix (etcdctl role grant-permission ROLE readwrite --prefix=true PREFIX)", err))
	case codes.Unauthenticated:
		return lease.Permanent(fmt.Errorf("%w; check the user name and password", err))
	case codes.InvalidArgument, codes.FailedPrecondition:
		// Authentication failed (etcd sends it as InvalidArgument), a
		// request too large, a user given to a cluster without auth.
		return lease.Permanent(err)
	}
	return err
}
