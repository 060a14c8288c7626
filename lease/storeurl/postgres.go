package storeurl

import (
	"context"
	"database/sql"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/pglease"
)

// openPostgres opens postgres://USER@HOST:PORT/DB?table=T&create=true: every
// other parameter, and the password sources libpq knows (PGPASSWORD,
// ~/.pgpass, PGSSLMODE...), are the pgx driver's.
func openPostgres(ctx context.Context, u *url.URL, q url.Values) (lease.Store, error) {
	table := q.Get("table")
	create, err := boolParam(q, "create", false)
	if err != nil {
		return nil, err
	}
	q.Del("table")
	q.Del("create")
	v := *u
	v.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no "+" as a space
	cfg, err := pgx.ParseConfig(v.String())
	if err != nil {
		return nil, err // it names the part at fault, without the password
	}
	db := sql.OpenDB(stdlib.GetConnector(*cfg))
	if create {
		ctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if err := pglease.CreateTable(ctx, db, table); err != nil {
			db.Close()
			return nil, err
		}
	}
	return pglease.New(db, pglease.Config{Table: table})
}
