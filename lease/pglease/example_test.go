package pglease_test

import (
	"context"
	"database/sql"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver, which the change feed needs

	"github.com/tenure-go/tenure/lease/pglease"
)

// A Store on a table of its own. It needs a server, so it is compiled but
// not run.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://tenure@db.internal/app")
	if err != nil {
		log.Fatal(err)
	}
	// Once, by whoever owns the schema; harmless when the table exists.
	if err := pglease.CreateTable(ctx, db, "tenure_leases"); err != nil {
		log.Fatal(err)
	}
	store, err := pglease.New(db, pglease.Config{Table: "tenure_leases"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // hand it to a tenure.Candidate
}
