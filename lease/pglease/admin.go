package pglease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/lease"
)

// AdminDB is what List needs beyond DB; *sql.DB has it. The protocol never
// lists.
type AdminDB interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// CreateTable creates the table (see the package doc) if it does not exist.
// It needs CREATE on the schema; candidates do not call it.
func CreateTable(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = defaultTable
	}
	if err := validateTable(table); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+quoted(table)+` (
	name        text COLLATE "C" PRIMARY KEY,
	version     text        NOT NULL,
	holder      text        NOT NULL,
	token       bigint      NOT NULL CHECK (token > 0),
	duration_ns bigint      NOT NULL CHECK (duration_ns > 0),
	released    boolean     NOT NULL,
	nonce       text        NOT NULL,
	written_at  timestamptz,
	payload     bytea
)`)
	if err != nil && sqlState(err) != "23505" { // two creators at once: one wins the catalog row
		return classify(fmt.Errorf("create table %s: %w", table, err))
	}
	return nil
}

// List implements lease.Lister with one SELECT of the names that start
// with prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	a, ok := s.db.(AdminDB)
	if !ok {
		return errors.New("pglease: the DB given to New cannot QueryContext (a *sql.DB can)")
	}
	rows, err := a.QueryContext(ctx, s.list, prefix)
	if err != nil {
		return s.failed(ctx, "list", prefix+"*", err)
	}
	defer rows.Close()
	var names []string // read all first: fn may call the store, and a pool of one would deadlock
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return s.failed(ctx, "list", prefix+"*", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return s.failed(ctx, "list", prefix+"*", err)
	}
	rows.Close()
	for _, n := range names {
		if lease.ValidateName(n) != nil {
			continue // a row no lease could have written
		}
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements lease.Deleter with one DELETE … WHERE version = expect
// (any version with lease.AnyVersion). A delete that finds no such row is a
// conflict, whether the row changed or is gone.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	var (
		res sql.Result
		err error
	)
	if expect == lease.AnyVersion {
		res, err = s.db.ExecContext(ctx, s.delAny, name)
	} else {
		res, err = s.db.ExecContext(ctx, s.del, name, string(expect))
	}
	if err != nil {
		if isConflict(err) {
			return lease.Conflict(name)
		}
		return s.failed(ctx, "delete", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.failed(ctx, "delete", name, err)
	} else if n == 0 && expect != lease.AnyVersion {
		return lease.Conflict(name)
	}
	return nil
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = lease.CallError(ctx, err)
	return classify(fmt.Errorf("%s lease %q in table %s: %w", op, name, s.table, err))
}

// classify marks err permanent when retrying cannot cure it (the package
// doc lists the cases), adding what to do.
func classify(err error) error {
	state := sqlState(err)
	hint := ""
	switch {
	case state == "42P01" || state == "42703":
		hint = "the table is missing or is not tenure's: create it with pglease.CreateTable, or the CREATE TABLE in the pglease package doc (tenure: add create=true to the URL)"
	case state == "3D000":
		hint = "the database does not exist"
	case state == "3F000":
		hint = "the schema does not exist"
	case state == "42501":
		hint = "grant SELECT, INSERT, UPDATE on the table (DELETE too for tenure gc and release --force)"
	case len(state) == 5 && state[:2] == "28":
		hint = "the server refused the credentials: check the user and password (PGPASSWORD, ~/.pgpass, or the URL)"
	case state == "25006":
		hint = "the server is read-only (a hot standby?): point the URL at the primary"
	case state == "0A000", state == "42601", state == "42804", state == "42883":
		hint = "the server does not take tenure's statements as PostgreSQL 11 or later would"
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	if hint == "" && (errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &verify)) {
		hint = "the server's TLS certificate was not accepted: check sslmode, sslrootcert and the host name"
	}
	if hint == "" {
		return err
	}
	return lease.Permanent(fmt.Errorf("%w; %s", err, hint))
}

// isConflict reports a statement rolled back because a concurrent
// transaction changed the row first (REPEATABLE READ or SERIALIZABLE): the
// write did not apply and the row is no longer the version it named.
func isConflict(err error) bool {
	s := sqlState(err)
	return s == "40001"
}

// sqlState returns the SQLSTATE an error from the driver carries, or "".
// pgx's *pgconn.PgError and lib/pq's *pq.Error both have SQLState.
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}
