// Package sqlfence builds fenced statements for SQL databases: an UPDATE,
// an upsert or a DELETE that applies only to rows whose stored fence admits
// the writer's, and that stores the writer's fence in each row it writes, in
// the same statement. The database evaluates the condition and writes the
// row atomically, so a leader paused past its lease that wakes and writes is
// refused by the database itself. docs/fencing.md shows the SQL.
//
// The package only builds SQL text and arguments for database/sql; it
// imports no driver and works with any whose placeholders are $1, $2, ...
// (PostgreSQL: Dollar, the default) or ? (MySQL, SQLite: Question).
//
// # The pattern
//
// Each fenced table has two columns (names configurable):
//
//	fence_token  BIGINT  NULL  the token of the last write
//	fence_lease  TEXT    NULL  its lease
//
// and every write adds, next to its own SET and WHERE,
//
//	SET   fence_token = :token, fence_lease = :lease
//	WHERE fence_token IS NULL OR (fence_lease = :lease AND fence_token <= :token)
//
// A row that no fenced write touched yet (NULL) admits any writer. A row whose
// fence is higher, or of another lease, does not match the WHERE, so the
// statement writes nothing: RowsAffected tells. The upsert does the same in
// ON CONFLICT ... DO UPDATE ... WHERE (PostgreSQL 9.5+, SQLite 3.24+; MySQL's
// ON DUPLICATE KEY UPDATE has no WHERE and is not supported).
//
// # Guarantees
//
//  1. In PostgreSQL, MySQL (InnoDB) and SQLite, an UPDATE or DELETE checks its
//     WHERE against the row it locks: a concurrent writer's committed change
//     is seen (PostgreSQL re-evaluates the WHERE on the new row version under
//     READ COMMITTED), so an older term's write can never land after a newer
//     term's. ON CONFLICT DO UPDATE is atomic in the same way.
//  2. A statement that affects no row is reported as ErrNotApplied.
//     RowsAffected cannot say why: no row matched the caller's own WHERE, or
//     the fence refused. To tell, read the row's fence afterwards
//     (SELECT fence_token, fence_lease ... ) and pass it to fencing.Check:
//     a diagnosis at a later instant, not part of the write. The upsert has
//     no WHERE of the caller's, so there no row means the fence refused.
//  3. Statements are built from identifiers the caller gives (Table.Name,
//     the columns), inserted verbatim: quote them as the database needs and
//     never build them from untrusted input. Values always travel as
//     arguments.
//
// # Deletes
//
// A deleted row takes its fence with it, and a stale writer's upsert could
// create it again. Where that matters, mark rows deleted (a "deleted" column
// set by a fenced UPDATE) instead of deleting them, and purge marked rows only
// once no older term can still write.
//
// # Tokens
//
// Tokens are stored as BIGINT, a signed 64-bit integer, so the builders
// refuse a token above 2^63-1; the lease stores never mint one.
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/fencing"
)

// Placeholders says how a driver spells bound parameters.
type Placeholders int

const (
	// Dollar numbers parameters: $1, $2, ... (PostgreSQL). The default.
	Dollar Placeholders = iota
	// Question marks every parameter ?, bound in order (MySQL, SQLite).
	Question
)

// Defaults for the Table fields left empty.
const (
	defaultTokenColumn = "fence_token"
	defaultLeaseColumn = "fence_lease"
)

// ErrNotApplied reports a fenced statement that affected no row: no row
// matched the caller's WHERE, or the fence refused.
var ErrNotApplied = errors.New("sqlfence: no row written: none matched, or the fence refused")

// Table describes a fenced table. The zero value of every field but Name
// is its default.
type Table struct {
	// Name is the table as it appears in SQL, inserted verbatim (quote it
	// yourself if it needs quoting). Required.
	Name string
	// TokenColumn holds the token (BIGINT, NULL). Default "fence_token".
	TokenColumn string
	// LeaseColumn holds the lease (TEXT or VARCHAR(200), NULL). Default "fence_lease".
	LeaseColumn string
	// Placeholders is the driver's parameter style. Default Dollar.
	Placeholders Placeholders
}

// Statement is a query and its arguments, ready for ExecContext.
type Statement struct {
	Query string
	Args  []any
}

// Execer is what Exec needs: *sql.DB, *sql.Tx and *sql.Conn implement it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Exec runs s on db and returns the number of rows it wrote, or
// ErrNotApplied if there were none.
func (s Statement) Exec(ctx context.Context, db Execer) (int64, error) {
	res, err := db.ExecContext(ctx, s.Query, s.Args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlfence: rows affected: %w", err)
	}
	if n == 0 {
		return 0, ErrNotApplied
	}
	return n, nil
}

// columns returns the table's fence columns, defaults applied.
func (t Table) columns() (tok, lease string, err error) {
	tok, lease = t.TokenColumn, t.LeaseColumn
	if tok == "" {
		tok = defaultTokenColumn
	}
	if lease == "" {
		lease = defaultLeaseColumn
	}
	switch {
	case strings.TrimSpace(t.Name) == "":
		return "", "", errors.New("sqlfence: Table.Name is empty")
	case tok == lease:
		return "", "", fmt.Errorf("sqlfence: TokenColumn and LeaseColumn are both %q", tok)
	case t.Placeholders != Dollar && t.Placeholders != Question:
		return "", "", fmt.Errorf("sqlfence: Placeholders is %d, want Dollar or Question", t.Placeholders)
	}
	return tok, lease, nil
}

// builder accumulates arguments and spells their placeholders.
type builder struct {
	style Placeholders
	args  []any
}

// bind adds v as the next argument and returns its placeholder.
func (b *builder) bind(v any) string {
	b.args = append(b.args, v)
	if b.style == Question {
		return "?"
	}
	return "$" + strconv.Itoa(len(b.args))
}

// fenceArgs checks f and returns its values as the driver takes them.
func fenceArgs(f fencing.Fence) (int64, string, error) {
	if err := f.Validate(); err != nil {
		return 0, "", fmt.Errorf("sqlfence: %w", err)
	}
	if f.Token > math.MaxInt64 {
		return 0, "", fmt.Errorf("sqlfence: %v: token above 2^63-1 does not fit a BIGINT", f)
	}
	return int64(f.Token), f.Lease, nil
}

// Update returns
//
//	UPDATE <Name> SET <token> = ?, <lease> = ?, <set>
//	WHERE (<where>) AND (<token> IS NULL OR (<lease> = ? AND <token> <= ?))
//
// set and where are the caller's SQL with placeholders for args: $1 to $n in
// Dollar style (the fence's parameters are numbered after them), ? in
// Question style (args in the order their ? appear in set, then where). An
// empty set only moves the fence; an empty where is refused (it would write
// every row: say "TRUE" if that is meant).
func (t Table) Update(f fencing.Fence, set, where string, args ...any) (Statement, error) {
	tokCol, leaseCol, err := t.columns()
	if err != nil {
		return Statement{}, err
	}
	tok, lease, err := fenceArgs(f)
	if err != nil {
		return Statement{}, err
	}
	if strings.TrimSpace(where) == "" {
		return Statement{}, errors.New("sqlfence: Update with an empty WHERE (write TRUE to update every row)")
	}
	b := &builder{style: t.Placeholders}
	var sets, cond string
	if t.Placeholders == Dollar {
		// The caller's $1..$n come first; the fence's two parameters are
		// numbered after them and each used twice.
		b.args = append(b.args, args...)
		tokPh, leasePh := b.bind(tok), b.bind(lease)
		sets = fmt.Sprintf("%s = %s, %s = %s", tokCol, tokPh, leaseCol, leasePh)
		cond = fenceCond(tokCol, leaseCol, leasePh, tokPh)
	} else {
		// Every ? is bound in the order it appears: the fence's SET, the
		// caller's SET and WHERE, the fence's WHERE.
		sets = fmt.Sprintf("%s = %s, %s = %s", tokCol, b.bind(tok), leaseCol, b.bind(lease))
		b.args = append(b.args, args...)
		cond = fenceCond(tokCol, leaseCol, b.bind(lease), b.bind(tok))
	}
	return Statement{
		Query: fmt.Sprintf("UPDATE %s SET %s%s WHERE (%s) AND (%s)", t.Name, sets, withComma(set), where, cond),
		Args:  b.args,
	}, nil
}

// Delete returns
//
//	DELETE FROM <Name> WHERE (<where>) AND (<token> IS NULL OR (<lease> = ? AND <token> <= ?))
//
// with where and args as for Update. See the package documentation on
// deletes.
func (t Table) Delete(f fencing.Fence, where string, args ...any) (Statement, error) {
	tokCol, leaseCol, err := t.columns()
	if err != nil {
		return Statement{}, err
	}
	tok, lease, err := fenceArgs(f)
	if err != nil {
		return Statement{}, err
	}
	if strings.TrimSpace(where) == "" {
		return Statement{}, errors.New("sqlfence: Delete with an empty WHERE (write TRUE to delete every row)")
	}
	b := &builder{style: t.Placeholders, args: append([]any(nil), args...)}
	cond := fenceCond(tokCol, leaseCol, b.bind(lease), b.bind(tok))
	return Statement{Query: fmt.Sprintf("DELETE FROM %s WHERE (%s) AND (%s)", t.Name, where, cond), Args: b.args}, nil
}

// Upsert returns an INSERT of one row that, if a row with the same conflict
// key exists, updates it instead, only if its fence admits f:
//
//	INSERT INTO <Name> (<columns>, <token>, <lease>) VALUES (?, ..., ?, ?)
//	ON CONFLICT (<conflict>) DO UPDATE SET <c> = EXCLUDED.<c>, ..., <token> = EXCLUDED.<token>, <lease> = EXCLUDED.<lease>
//	WHERE <Name>.<token> IS NULL OR (<Name>.<lease> = EXCLUDED.<lease> AND <Name>.<token> <= EXCLUDED.<token>)
//
// values holds one value per column, in order. conflict names the columns of
// a unique index (usually the primary key); they must be among columns, and
// every other column is updated. PostgreSQL and SQLite syntax.
func (t Table) Upsert(f fencing.Fence, conflict, columns []string, values ...any) (Statement, error) {
	tokCol, leaseCol, err := t.columns()
	if err != nil {
		return Statement{}, err
	}
	tok, lease, err := fenceArgs(f)
	if err != nil {
		return Statement{}, err
	}
	switch {
	case len(columns) == 0:
		return Statement{}, errors.New("sqlfence: Upsert without columns")
	case len(values) != len(columns):
		return Statement{}, fmt.Errorf("sqlfence: Upsert of %d columns with %d values", len(columns), len(values))
	case len(conflict) == 0:
		return Statement{}, errors.New("sqlfence: Upsert without conflict columns")
	}
	isConflict := map[string]bool{}
	for _, c := range conflict {
		isConflict[c] = true
	}
	b := &builder{style: t.Placeholders}
	var ph, sets []string
	for i, c := range columns {
		switch c {
		case "", tokCol, leaseCol:
			return Statement{}, fmt.Errorf("sqlfence: Upsert column %d is %q", i, c)
		}
		ph = append(ph, b.bind(values[i]))
		if isConflict[c] {
			delete(isConflict, c)
			continue
		}
		sets = append(sets, fmt.Sprintf("%s = EXCLUDED.%s", c, c))
	}
	if len(isConflict) > 0 {
		return Statement{}, fmt.Errorf("sqlfence: Upsert conflict columns %q must be among the columns", conflict)
	}
	ph = append(ph, b.bind(tok), b.bind(lease))
	sets = append(sets, fmt.Sprintf("%s = EXCLUDED.%s", tokCol, tokCol), fmt.Sprintf("%s = EXCLUDED.%s", leaseCol, leaseCol))
	q := fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE %s",
		t.Name, strings.Join(columns, ", "), tokCol, leaseCol, strings.Join(ph, ", "),
		strings.Join(conflict, ", "), strings.Join(sets, ", "),
		fenceCond(t.Name+"."+tokCol, t.Name+"."+leaseCol, "EXCLUDED."+leaseCol, "EXCLUDED."+tokCol))
	return Statement{Query: q, Args: b.args}, nil
}

func fenceCond(tokCol, leaseCol, leaseArg, tokArg string) string {
	return fmt.Sprintf("%s IS NULL OR (%s = %s AND %s <= %s)", tokCol, leaseCol, leaseArg, tokCol, tokArg)
}

func withComma(set string) string {
	if strings.TrimSpace(set) == "" {
		return ""
	}
	return ", " + set
}
