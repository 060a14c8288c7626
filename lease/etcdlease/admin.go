package etcdlease

import (
	"context"
	"errors"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/lease"
)

// AdminKV is what Delete needs beyond KV; *clientv3.Client has it. The
// protocol never deletes.
type AdminKV interface {
	Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error)
}

// listPage is how many keys one Range of List returns.
const listPage = 1000

// List implements lease.Lister with keys-only Ranges over the prefix, a
// page at a time.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	from, end := s.Key(prefix), clientv3.GetPrefixRangeEnd(s.Key(prefix))
	for {
		resp, err := s.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(),
			clientv3.WithLimit(listPage), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return s.failed(ctx, "list", prefix+"*", err)
		}
		for _, kv := range resp.Kvs {
			name, ok := strings.CutPrefix(string(kv.Key), s.prefix)
			if !ok || lease.ValidateName(name) != nil {
				continue // not a lease's key
			}
			if err := fn(name); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Delete implements lease.Deleter: one Txn that deletes the key if its
// mod_revision is still expect; with lease.AnyVersion, one Delete.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	key := s.Key(name)
	if expect == lease.AnyVersion {
		a, ok := s.kv.(AdminKV)
		if !ok {
			return errors.New("etcdlease: the KV given to New cannot Delete (a *clientv3.Client can)")
		}
		if _, err := a.Delete(ctx, key); err != nil {
			return s.failed(ctx, "delete", name, err)
		}
		return nil
	}
	rev, err := strconv.ParseInt(string(expect), 10, 64)
	if err != nil || rev <= 0 {
		return lease.Conflict(name)
	}
	resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return s.failed(ctx, "delete", name, err)
	}
	if !resp.Succeeded {
		return lease.Conflict(name)
	}
	return nil
}
