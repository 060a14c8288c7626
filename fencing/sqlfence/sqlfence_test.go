package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/sqlfence"
)

var f7 = fencing.Fence{Lease: "jobs/report", Token: 7}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name      string
		table     sqlfence.Table
		set       string
		where     string
		args      []any
		wantQuery string
		wantArgs  []any
	}{
		{
			name:      "dollar",
			table:     sqlfence.Table{Name: "reports"},
			set:       "body = $1, updated_at = now()",
			where:     "id = $2",
			args:      []any{"hello", "daily"},
			wantQuery: "UPDATE reports SET fence_token = $3, fence_lease = $4, body = $1, updated_at = now() WHERE (id = $2) AND (fence_token IS NULL OR (fence_lease = $4 AND fence_token <= $3))",
			wantArgs:  []any{"hello", "daily", int64(7), "jobs/report"},
		},
		{
			name:      "question",
			table:     sqlfence.Table{Name: "reports", Placeholders: sqlfence.Question},
			set:       "body = ?",
			where:     "id = ? OR id = ?",
			args:      []any{"hello", "a", "b"},
			wantQuery: "UPDATE reports SET fence_token = ?, fence_lease = ?, body = ? WHERE (id = ? OR id = ?) AND (fence_token IS NULL OR (fence_lease = ? AND fence_token <= ?))",
			wantArgs:  []any{int64(7), "jobs/report", "hello", "a", "b", "jobs/report", int64(7)},
		},
		{
			name:      "fence only, own column names",
			table:     sqlfence.Table{Name: `"Reports"`, TokenColumn: "tok", LeaseColumn: "owner"},
			where:     "id = $1",
			args:      []any{"daily"},
			wantQuery: `UPDATE "Reports" SET tok = $2, owner = $3 WHERE (id = $1) AND (tok IS NULL OR (owner = $3 AND tok <= $2))`,
			wantArgs:  []any{"daily", int64(7), "jobs/report"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]any(nil), tt.args...)
			st, err := tt.table.Update(f7, tt.set, tt.where, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if st.Query != tt.wantQuery {
				t.Errorf("query\n%s\nwant\n%s", st.Query, tt.wantQuery)
			}
			if !reflect.DeepEqual(st.Args, tt.wantArgs) {
				t.Errorf("args %#v, want %#v", st.Args, tt.wantArgs)
			}
			if !reflect.DeepEqual(tt.args, args) {
				t.Errorf("the caller's args changed to %v", tt.args)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	st, err := sqlfence.Table{Name: "reports"}.Delete(f7, "id = $1", "daily")
	if err != nil {
		t.Fatal(err)
	}
	want := sqlfence.Statement{
		Query: "DELETE FROM reports WHERE (id = $1) AND (fence_token IS NULL OR (fence_lease = $2 AND fence_token <= $3))",
		Args:  []any{"daily", "jobs/report", int64(7)},
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("Delete = %#v\nwant %#v", st, want)
	}
	st, err = sqlfence.Table{Name: "reports", Placeholders: sqlfence.Question}.Delete(f7, "id = ?", "daily")
	if err != nil || st.Query != "DELETE FROM reports WHERE (id = ?) AND (fence_token IS NULL OR (fence_lease = ? AND fence_token <= ?))" ||
		!reflect.DeepEqual(st.Args, []any{"daily", "jobs/report", int64(7)}) {
		t.Errorf("Delete (Question) = %#v, %v", st, err)
	}
}

func TestUpsert(t *testing.T) {
	st, err := sqlfence.Table{Name: "reports"}.Upsert(f7, []string{"id"}, []string{"id", "body"}, "daily", "hello")
	if err != nil {
		t.Fatal(err)
	}
	want := sqlfence.Statement{
		Query: "INSERT INTO reports (id, body, fence_token, fence_lease) VALUES ($1, $2, $3, $4) " +
			"ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence_token = EXCLUDED.fence_token, fence_lease = EXCLUDED.fence_lease " +
			"WHERE reports.fence_token IS NULL OR (reports.fence_lease = EXCLUDED.fence_lease AND reports.fence_token <= EXCLUDED.fence_token)",
		Args: []any{"daily", "hello", int64(7), "jobs/report"},
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("Upsert =\n%#v\nwant\n%#v", st, want)
	}
	st, err = sqlfence.Table{Name: "r", Placeholders: sqlfence.Question}.Upsert(f7, []string{"a", "b"}, []string{"a", "b", "c"}, 1, 2, 3)
	if err != nil || st.Query != "INSERT INTO r (a, b, c, fence_token, fence_lease) VALUES (?, ?, ?, ?, ?) "+
		"ON CONFLICT (a, b) DO UPDATE SET c = EXCLUDED.c, fence_token = EXCLUDED.fence_token, fence_lease = EXCLUDED.fence_lease "+
		"WHERE r.fence_token IS NULL OR (r.fence_lease = EXCLUDED.fence_lease AND r.fence_token <= EXCLUDED.fence_token)" {
		t.Errorf("Upsert (Question) = %q, %v", st.Query, err)
	}
}

func TestBuildersRefuse(t *testing.T) {
	tbl := sqlfence.Table{Name: "r"}
	cases := map[string]func() error{
		"empty where":        func() error { _, err := tbl.Update(f7, "a = $1", "", 1); return err },
		"empty delete where": func() error { _, err := tbl.Delete(f7, " "); return err },
		"no table":           func() error { _, err := sqlfence.Table{}.Update(f7, "", "TRUE"); return err },
		"same columns": func() error {
			_, err := sqlfence.Table{Name: "r", TokenColumn: "x", LeaseColumn: "x"}.Update(f7, "", "TRUE")
			return err
		},
		"bad style": func() error {
			_, err := sqlfence.Table{Name: "r", Placeholders: 5}.Update(f7, "", "TRUE")
			return err
		},
		"zero token": func() error { _, err := tbl.Update(fencing.Fence{Lease: "a"}, "", "TRUE"); return err },
		"token > 2^63": func() error {
			_, err := tbl.Update(fencing.Fence{Lease: "a", Token: math.MaxInt64 + 1}, "", "TRUE")
			return err
		},
		"upsert count":       func() error { _, err := tbl.Upsert(f7, []string{"id"}, []string{"id", "v"}, 1); return err },
		"upsert no conflict": func() error { _, err := tbl.Upsert(f7, nil, []string{"id"}, 1); return err },
		"upsert conflict not a column": func() error {
			_, err := tbl.Upsert(f7, []string{"key"}, []string{"id"}, 1)
			return err
		},
		"upsert sets the fence": func() error {
			_, err := tbl.Upsert(f7, []string{"id"}, []string{"id", "fence_token"}, 1, 2)
			return err
		},
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := tbl.Update(fencing.Fence{Lease: "a", Token: math.MaxInt64}, "", "TRUE"); err != nil {
		t.Errorf("token 2^63-1: %v", err)
	}
}

// rows is an Execer that reports a fixed number of rows affected, to test
// Exec's reading of the result; the SQL itself runs against PostgreSQL in
// TestIntegrationPostgres.
type rows int64

func (n rows) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return result(n), nil
}

type result int64

func (r result) LastInsertId() (int64, error) { return 0, errors.New("not supported") }
func (r result) RowsAffected() (int64, error) { return int64(r), nil }

func TestExec(t *testing.T) {
	st := sqlfence.Statement{Query: "UPDATE ..."}
	if n, err := st.Exec(context.Background(), rows(2)); n != 2 || err != nil {
		t.Errorf("Exec with 2 rows = %d, %v", n, err)
	}
	if _, err := st.Exec(context.Background(), rows(0)); !errors.Is(err, sqlfence.ErrNotApplied) {
		t.Errorf("Exec with 0 rows = %v, want ErrNotApplied", err)
	}
}
