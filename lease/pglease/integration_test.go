package pglease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/pglease"
)

// Tests in this file talk to the PostgreSQL server that
// scripts/testservers.sh starts (TENURE_POSTGRES_URL).

func open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTable creates a table of its own for the test, dropped afterwards.
func newTable(t testing.TB, db *sql.DB) string {
	t.Helper()
	table := strings.ReplaceAll(testservers.UniqueName("tenure_test"), "-", "_")
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	if err := pglease.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec(`DROP TABLE "` + table + `"`); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	return table
}

func newStore(t testing.TB) (*pglease.Store, *sql.DB) {
	db := open(t, testservers.Postgres(t))
	s, err := pglease.New(db, pglease.Config{Table: newTable(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func TestIntegrationConformance(t *testing.T) {
	s, _ := newStore(t)
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers, each with a connection of its own, race
// on one row for 50 rounds; exactly one wins each.
func TestIntegrationRace(t *testing.T) {
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "-"), func(t *testing.T) {
			u, err := url.Parse(testservers.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("default_transaction_isolation", level)
			u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no "+" as a space
			db := open(t, u.String())
			db.SetMaxIdleConns(64)
			s, err := pglease.New(db, pglease.Config{Table: newTable(t, db)})
			if err != nil {
				t.Fatal(err)
			}
			leasetest.Race(t, s, 64, 50)
		})
	}
}

// TestIntegrationPermanentErrors: what retrying cannot cure is marked
// permanent, with what to do.
func TestIntegrationPermanentErrors(t *testing.T) {
	dsn := testservers.Postgres(t)
	admin := open(t, dsn)
	ctx := t.Context()
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}

	// A role with no rights on the table.
	table := newTable(t, admin)
	role := strings.ReplaceAll(testservers.UniqueName("tenure_norights"), "-", "_")
	if _, err := admin.Exec(`CREATE ROLE "` + role + `" LOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP ROLE "` + role + `"`) })
	u, _ := url.Parse(dsn)
	u.User = url.User(role)
	denied := open(t, u.String())
	u.User = url.User("no_such_role_" + role)
	unknown := open(t, u.String())
	u.User = url.User(role)
	u.Path = "/no_such_database"
	noDB := open(t, u.String())

	for _, c := range []struct {
		name  string
		db    *sql.DB
		table string
		want  string
	}{
		{"missing table", admin, "no_such_table", "create it with pglease.CreateTable"},
		{"missing schema", admin, "no_such_schema.leases", "create it with pglease.CreateTable"},
		{"access denied", denied, table, "grant SELECT, INSERT, UPDATE"},
		{"unknown role", unknown, table, "refused the credentials"},
		{"missing database", noDB, table, "database does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := pglease.New(c.db, pglease.Config{Table: c.table})
			if err != nil {
				t.Fatal(err)
			}
			_, _, gerr := s.Get(ctx, "x")
			_, perr := s.Put(ctx, "x", rec, lease.NoVersion)
			for _, err := range []error{gerr, perr} {
				if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%v; want a permanent error saying %q", err, c.want)
				}
			}
		})
	}
}

// TestIntegrationTransient: a server that does not answer is not permanent.
func TestIntegrationTransient(t *testing.T) {
	db := open(t, "postgres://tenure@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	s, err := pglease.New(db, pglease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(t.Context(), "x"); err == nil || errors.Is(err, lease.ErrPermanent) {
		t.Errorf("Get from a closed port: %v, want an error that is not permanent", err)
	}
}

// TestIntegrationBadRows: a row written by hand that is no record is
// reported naming the field, and is never taken over.
func TestIntegrationBadRows(t *testing.T) {
	s, db := newStore(t)
	ctx := t.Context()
	for _, c := range []struct{ set, field string }{
		{"holder = ''", "holder"},
		{"nonce = ''", "nonce"},
		{"duration_ns = 1", "duration"},
		{"version = ''", "version"},
		{"written_at = 'infinity'", "written_at"},
		{"written_at = '-infinity'", "written_at"},
	} {
		name := fmt.Sprintf("bad/%s/%d", c.field, len(c.set))
		if _, err := s.Put(ctx, name, lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE "`+s.Table()+`" SET `+c.set+` WHERE name = $1`, name); err != nil {
			t.Fatal(err)
		}
		var re *lease.RecordError
		if _, _, err := s.Get(ctx, name); !errors.As(err, &re) || re.Field != c.field {
			t.Errorf("%s: Get: %v, want a *lease.RecordError on %q", c.set, err, c.field)
		}
		if _, err := s.Put(ctx, name, lease.Record{Holder: "b", Token: 2, Duration: time.Second, Nonce: "m"}, lease.NoVersion); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("%s: Put over it: %v, want a conflict", c.set, err)
		}
	}
}

// TestIntegrationWrittenAtTruncated: PostgreSQL keeps microseconds and
// would round; the store truncates.
func TestIntegrationWrittenAtTruncated(t *testing.T) {
	s, _ := newStore(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC)
	if _, err := s.Put(t.Context(), "t", lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n", WrittenAt: at}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Get(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Microsecond); !got.WrittenAt.Equal(want) {
		t.Errorf("WrittenAt read back %v, want %v", got.WrittenAt, want)
	}
}
