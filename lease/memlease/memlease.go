// Package memlease is an in-process lease.Store: the embedded default for
// candidates that share one process, and the store tests and examples run on.
//
// It is safe for concurrent use and linearizable (one mutex orders every
// operation). Records live only as long as the Store value: leases do not
// survive a restart, so it gives no protection across processes.
package memlease

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tenure-go/tenure/lease"
)

// Store is an in-memory lease.Store. The zero value is ready to use.
type Store struct {
	mu      sync.Mutex       // guards records and seq
	records map[string]entry // by lease name
	seq     uint64           // last version handed out, for all names
}

type entry struct {
	rec lease.Record
	ver lease.Version
}

var _ lease.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store { return &Store{} }

// OneHost implements lease.OneHost: memory is one process's.
func (s *Store) OneHost() bool { return true }

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.records[name]
	if !ok {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	return e.rec.Clone(), e.ver, nil
}

// Put implements lease.Store. A conflict is a *lease.ConflictError carrying the
// current record.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[name]
	if ok != (expect != lease.NoVersion) || ok && cur.ver != expect {
		return lease.NoVersion, &lease.ConflictError{Name: name, Current: cur.rec.Clone(), Version: cur.ver, Found: ok}
	}
	if s.records == nil {
		s.records = make(map[string]entry)
	}
	s.seq++
	ver := lease.Version(strconv.FormatUint(s.seq, 10))
	s.records[name] = entry{rec: rec.Clone(), ver: ver}
	return ver, nil
}

var (
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// List implements lease.Lister, in name order.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	s.mu.Lock()
	var names []string
	for n := range s.records {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	slices.Sort(names)
	for _, n := range names {
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements lease.Deleter.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[name]
	switch {
	case !ok:
		return lease.NotFound(name)
	case expect != lease.AnyVersion && cur.ver != expect:
		return &lease.ConflictError{Name: name, Current: cur.rec.Clone(), Version: cur.ver, Found: true}
	}
	delete(s.records, name)
	return nil
}
