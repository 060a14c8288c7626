package pglease

import (
	"context"
	cryptorand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// DB is the part of *sql.DB that Store uses for the protocol. A *sql.Conn
// has it too; a *sql.Tx must not be used (every call must commit on its
// own).
type DB interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var _ DB = (*sql.DB)(nil)

// defaultTable is the table a Config with no Table names.
const defaultTable = "tenure_leases"

// Config configures a Store.
type Config struct {
	// Table holds the leases: a table name, or SCHEMA.TABLE, each part 1 to
	// 63 bytes of ASCII letters, digits and '_', not starting with a digit.
	// It is quoted in every statement, so its case is kept. Default
	// "tenure_leases".
	Table string
}

func (c *Config) validate() error {
	if c.Table == "" {
		c.Table = defaultTable
	}
	return validateTable(c.Table)
}

func validateTable(t string) error {
	parts := strings.Split(t, ".")
	if len(parts) > 2 {
		return fmt.Errorf("pglease: table %q: want TABLE or SCHEMA.TABLE", t)
	}
	for _, p := range parts {
		if p == "" || len(p) > 63 {
			return fmt.Errorf("pglease: table %q: each part must be 1 to 63 bytes", t)
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
				return fmt.Errorf("pglease: table %q: byte %q: want ASCII letters, digits and '_', not starting with a digit", t, c)
			}
		}
	}
	return nil
}

// quoted returns the table as a quoted SQL identifier.
func quoted(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, ".")
}

// Store is a lease.Store on a PostgreSQL table. It is safe for concurrent
// use. Make one with New.
type Store struct {
	db      DB
	table   string
	channel string // NOTIFY's, for Watch
	feed    feed
	// The statements, built once for the table.
	get, insert, update, list, del, delAny string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

const columns = "version, holder, token, duration_ns, released, nonce, written_at, payload"

// New returns a Store on the table cfg names, through db (usually a
// *sql.DB opened with the pgx driver). It checks cfg but sends nothing: a
// missing table shows at the first call, as a permanent error.
func New(db DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("pglease: nil DB: pass a *sql.DB")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t := quoted(cfg.Table)
	ch := Channel(cfg.Table)
	// Every write and delete tells the table's channel (NOTIFY, sent at
	// commit) which lease changed, and what the record says of its term,
	// for Watch: "W VERSION TOKEN DURATION_NS HOLDER NAME" (the holder in
	// hex), R for a release; "d - NAME" for a delete. (Stores before the
	// record was told sent "w VERSION NAME" and "r VERSION NAME".)
	notify := func(write string) string {
		return "WITH w AS (" + write + ") SELECT pg_notify('" + ch + "', " +
			"CASE WHEN w.released THEN 'R ' ELSE 'W ' END || w.version || ' ' || w.token || ' ' || w.duration_ns || ' ' || " +
			"encode(convert_to(w.holder, 'UTF8'), 'hex') || ' ' || w.name) FROM w"
	}
	deleted := func(del string) string {
		return "WITH d AS (" + del + " RETURNING name) SELECT pg_notify('" + ch + "', 'd - ' || d.name) FROM d"
	}
	return &Store{
		db:      db,
		table:   cfg.Table,
		channel: ch,
		get:     "SELECT " + columns + " FROM " + t + " WHERE name = $1",
		insert: notify("INSERT INTO " + t + " (name, " + columns + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (name) DO NOTHING" +
			" RETURNING name, version, released, token, duration_ns, holder"),
		update: notify("UPDATE " + t + " SET version = $3, holder = $4, token = $5, duration_ns = $6, released = $7, nonce = $8, written_at = $9, payload = $10" +
			" WHERE name = $1 AND version = $2 RETURNING name, version, released, token, duration_ns, holder"),
		list:   "SELECT name FROM " + t + " WHERE left(name, char_length($1)) = $1",
		del:    deleted("DELETE FROM " + t + " WHERE name = $1 AND version = $2"),
		delAny: deleted("DELETE FROM " + t + " WHERE name = $1"),
	}, nil
}

// Table returns the table the store keeps its leases in.
func (s *Store) Table() string { return s.table }

// Get implements lease.Store with one SELECT.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	var (
		version, holder, nonce sql.NullString
		token, duration        sql.NullInt64
		released               sql.NullBool
		writtenAt              sql.NullTime
		payload                []byte
	)
	err := s.db.QueryRowContext(ctx, s.get, name).Scan(&version, &holder, &token, &duration, &released, &nonce, &writtenAt, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	bad := func(field, reason string) (lease.Record, lease.Version, error) {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: field, Reason: reason}
	}
	if m := scanError.FindStringSubmatch(fmt.Sprint(err)); m != nil {
		// The row came, but a column holds what no record has ('infinity'
		// in written_at, say): an invalid record, which no retry mends
		// and tenure release --force replaces.
		return bad(m[1], "unreadable: "+err.Error())
	}
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	switch {
	case !version.Valid || version.String == "":
		return bad("version", "NULL or empty: not a row this store wrote")
	case !holder.Valid:
		return bad("holder", "NULL")
	case !token.Valid || token.Int64 <= 0:
		return bad("token", "NULL or not positive")
	case !duration.Valid:
		return bad("duration", "NULL")
	case !released.Valid:
		return bad("released", "NULL")
	case !nonce.Valid:
		return bad("nonce", "NULL")
	}
	rec := lease.Record{
		Holder: holder.String, Token: uint64(token.Int64), Duration: time.Duration(duration.Int64),
		Released: released.Bool, Nonce: nonce.String, Payload: payload,
	}
	if writtenAt.Valid {
		rec.WrittenAt = writtenAt.Time.UTC()
	}
	if len(rec.Payload) == 0 {
		rec.Payload = nil
	}
	if err := rec.Validate(name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, lease.Version(version.String), nil
}

// scanError matches database/sql's error for a column of a row that came
// but could not be converted, and names the column.
var scanError = regexp.MustCompile(`^sql: Scan error on column index \d+, name "(\w+)"`)

// Put implements lease.Store with one INSERT … ON CONFLICT DO NOTHING (to
// create) or one UPDATE … WHERE version = expect (to replace).
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	v := newVersion()
	var writtenAt any // NULL for a zero time
	if !rec.WrittenAt.IsZero() {
		// PostgreSQL keeps microseconds and would round: truncate here.
		writtenAt = rec.WrittenAt.UTC().Truncate(time.Microsecond)
	}
	var payload any // NULL when empty
	if len(rec.Payload) > 0 {
		payload = rec.Payload
	}
	args := []any{name, v, rec.Holder, int64(rec.Token), int64(rec.Duration), rec.Released, rec.Nonce, writtenAt, payload}
	query := s.insert
	if expect != lease.NoVersion {
		query = s.update
		args = append([]any{name, string(expect)}, args[1:]...)
	}
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		if isConflict(err) {
			return lease.NoVersion, lease.Conflict(name)
		}
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	if n != 1 {
		return lease.NoVersion, lease.Conflict(name)
	}
	return v, nil
}

// newVersion returns 32 random hex digits: a version is never handed out
// twice, even after a row is deleted and written again.
func newVersion() lease.Version {
	var b [16]byte
	_, _ = cryptorand.Read(b[:]) // never fails
	return lease.Version(hex.EncodeToString(b[:]))
}
