// Package pglease is a lease.Store on one PostgreSQL table, through
// database/sql: a row per lease, each write one compare-and-swap statement
// (the package example makes one, on pgx's database/sql driver).
//
// Any driver whose errors carry the SQLSTATE through a SQLState() string
// method works (pgx's stdlib does; the tenure command uses it); the package
// declares only the two calls it makes (DB).
//
// # The conditional primitive
//
// Every write is one statement in its own transaction (database/sql's
// autocommit; never give the store a *sql.Tx):
//
//   - to create a lease, INSERT … ON CONFLICT (name) DO NOTHING: of any
//     number of concurrent inserts one inserts a row, the others wait for it
//     to commit and insert nothing;
//   - to replace one, UPDATE … WHERE name = $1 AND version = $2: concurrent
//     updates of the row queue on its row lock, and each re-checks the WHERE
//     against the row as the one before it left it (PostgreSQL's
//     EvalPlanQual), so only the first of those that read the same version
//     matches.
//
// A statement that touched no row is a conflict. That is READ COMMITTED,
// PostgreSQL's default, and it is all the store needs. Under REPEATABLE READ
// or SERIALIZABLE (default_transaction_isolation) the losers fail instead
// with SQLSTATE 40001, which the store also reports as a conflict: the
// statement was rolled back and the row changed.
//
// Versions are 128 random bits per write, never a counter: a lease deleted
// (tenure gc) and written again starts no sequence over, so a version is
// never handed out twice and a compare-and-swap can never match an older
// row (no ABA). Tokens live in the row, in the record, and rise by the
// protocol's rule, not by a sequence: a sequence can be reset, restored from
// an older dump, or cached per session, and each of those would hand out a
// token again.
//
// # Linearizability
//
// Reads and writes go to the primary: a statement sees every transaction
// that committed before it began ("Read Committed Isolation Level",
// PostgreSQL documentation, chapter 13.2.1), so one row read and written
// only by single statements is linearizable. What breaks that is outside
// the store:
//
//   - a hot standby is behind the primary: point the URL at the primary
//     (a standby refuses writes with SQLSTATE 25006, which is a permanent
//     error here: the store will not run against one);
//   - an asynchronous replica promoted after a failover may lack the last
//     commits, and synchronous_commit = off may lose them in a crash: a lost
//     record. tenure stays safe (a candidate that finds its record gone or
//     older demotes; tokens keep rising, see "Lost records" in
//     docs/protocol.md), but a term ends early. Use synchronous replication
//     with synchronous_commit = on (or remote_apply) where a failover must
//     not end terms.
//   - a pooler in transaction mode (PgBouncer) is fine for the store: every
//     call is one statement. Its change feed needs a session of its own
//     (LISTEN): through such a pooler Watch hears nothing, and followers
//     read on their polls.
//
// # The table
//
//	CREATE TABLE tenure_leases (
//	    name        text COLLATE "C" PRIMARY KEY,
//	    version     text        NOT NULL,  -- 32 hex digits, new per write
//	    holder      text        NOT NULL,
//	    token       bigint      NOT NULL CHECK (token > 0),
//	    duration_ns bigint      NOT NULL CHECK (duration_ns > 0),
//	    released    boolean     NOT NULL,
//	    nonce       text        NOT NULL,
//	    written_at  timestamptz,           -- NULL when zero
//	    payload     bytea                  -- NULL when empty
//	)
//
// CreateTable makes it (IF NOT EXISTS). WrittenAt is kept to the
// microsecond, truncated (PostgreSQL would round). A row that is not a valid
// record (written by hand) is reported by Get as a *lease.RecordError naming
// the field, and is never taken over: a Put expecting lease.NoVersion
// conflicts with it.
//
// # The change feed
//
// Each write statement also sends a NOTIFY, delivered at its commit, on the
// table's channel (Channel: "tenure_" and a hash of the table's name), and
// Store.Watch (lease.Watcher) listens on it: a candidate's followers then
// read a round trip after each renewal and each release instead of on their
// next poll. The watchers of one Store share one connection from the pool,
// kept while any watches: a pool capped at one connection
// (SetMaxOpenConns(1)) would have none left for the store's calls, so
// leave room for two. Notifications carry the lease's name and the new
// version, never the record; like any event, they only make a follower read
// sooner. PostgreSQL serializes the commits of transactions that notify, a
// cost that matters only at thousands of writes a second.
//
// # Permissions
//
// A candidate needs SELECT, INSERT and UPDATE on the table and nothing
// else:
//
//	GRANT SELECT, INSERT, UPDATE ON tenure_leases TO tenure;
//
// List (tenure list, tenure gc) needs SELECT; Delete (tenure gc, tenure
// release --force) needs DELETE; CreateTable needs CREATE on the schema.
//
// # Errors
//
// An error that retrying cannot cure is wrapped with lease.Permanent, so
// that tenure fails at once (the tenure command exits 69): a missing table
// or column (42P01, 42703), a missing database or schema (3D000, 3F000),
// denied access (42501), failed authentication (class 28), a read-only
// server (25006), and a server that does not speak the protocol. A refused
// or dropped connection, a timeout or a server shutting down (57P01) is
// transient: tenure retries it within the lease's timings.
package pglease
