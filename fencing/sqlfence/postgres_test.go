package sqlfence_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/sqlfence"
	"github.com/tenure-go/tenure/internal/testservers"
)

// pg runs SQL through psql, the PostgreSQL client: the module has no
// PostgreSQL driver, and psql runs the exact statements the builders make,
// bound server-side by PREPARE and EXECUTE as a driver would bind them.
type pg struct {
	t   *testing.T
	url string
}

// postgres returns the PostgreSQL server named by $TENURE_POSTGRES_URL, a libpq
// connection URL, which scripts/testservers.sh sets (make test, make
// integration). Without the server, or without psql, the test is skipped, or
// failed when servers are required (CI=true or TENURE_REQUIRE_SERVERS=1).
func postgres(t *testing.T) pg {
	t.Helper()
	url := testservers.Postgres(t)
	if _, err := exec.LookPath("psql"); err != nil {
		msg := fmt.Sprintf("%s is set but psql, the PostgreSQL client, is not installed (apt-get install postgresql-client-15): %v",
			testservers.EnvPostgresURL, err)
		if testservers.Required() {
			t.Fatalf("%s (servers are required: CI=true or %s=1)", msg, testservers.EnvRequireServers)
		}
		t.Skip(msg)
	}
	return pg{t: t, url: url}
}

// run runs script and returns psql's output lines (command tags and rows).
func (p pg) run(script string) []string {
	p.t.Helper()
	cmd := exec.Command("psql", p.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("psql: %v: %s\nscript:\n%s", err, stderr.String(), script)
	}
	return strings.Fields(strings.TrimSpace(string(out)))
}

// exec runs st as a prepared statement and returns the rows it affected.
func (p pg) exec(st sqlfence.Statement) int64 {
	p.t.Helper()
	lits := make([]string, len(st.Args))
	for i, a := range st.Args {
		switch v := a.(type) {
		case int64:
			lits[i] = strconv.FormatInt(v, 10)
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			p.t.Fatalf("argument %d: %T not handled by the test", i, a)
		}
	}
	// psql sets ROW_COUNT to the rows the last statement affected.
	script := fmt.Sprintf("PREPARE s AS %s;\nEXECUTE s(%s);\n\\echo :ROW_COUNT\n", st.Query, strings.Join(lits, ", "))
	out := p.run(script)
	n, err := strconv.ParseInt(out[len(out)-1], 10, 64)
	if err != nil {
		p.t.Fatalf("row count %q: %v", out, err)
	}
	return n
}

func randomName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "fenced_" + hex.EncodeToString(b)
}

func TestIntegrationPostgres(t *testing.T) {
	db := postgres(t)
	name := randomName()
	db.run(fmt.Sprintf(`CREATE TABLE %s (
		id          text PRIMARY KEY,
		body        text,
		history     bigint[] NOT NULL DEFAULT '{}',
		fence_token bigint,
		fence_lease text
	);
	INSERT INTO %[1]s (id, body) VALUES ('daily', 'written before fencing');`, name))
	t.Cleanup(func() { db.run("DROP TABLE " + name) })
	tbl := sqlfence.Table{Name: name}
	under := func(lease string, tok fencing.Token) fencing.Fence { return fencing.Fence{Lease: lease, Token: tok} }
	update := func(f fencing.Fence, body string) int64 {
		st, err := tbl.Update(f, "body = $1", "id = $2", body, "daily")
		if err != nil {
			t.Fatal(err)
		}
		return db.exec(st)
	}
	row := func(id string) string {
		out := db.run(fmt.Sprintf("SELECT body || '|' || coalesce(fence_lease, '-') || '|' || coalesce(fence_token::text, '-') FROM %s WHERE id = '%s'", name, id))
		return strings.Join(out, " ")
	}

	// An unfenced row admits the first fenced write; equal and higher
	// tokens go on; a stale one and another lease write nothing.
	for _, tc := range []struct {
		f    fencing.Fence
		body string
		want int64
	}{
		{under("jobs/a", 2), "two", 1},
		{under("jobs/a", 2), "two-again", 1},
		{under("jobs/a", 5), "five", 1},
		{under("jobs/a", 4), "zombie", 0},
		{under("jobs/b", 9), "other-lease", 0},
	} {
		if n := update(tc.f, tc.body); n != tc.want {
			t.Errorf("update under %v: %d rows, want %d", tc.f, n, tc.want)
		}
	}
	if got := row("daily"); got != "five|jobs/a|5" {
		t.Errorf("row = %q, want five|jobs/a|5", got)
	}

	upsert := func(f fencing.Fence, id, body string) int64 {
		st, err := tbl.Upsert(f, []string{"id"}, []string{"id", "body"}, id, body)
		if err != nil {
			t.Fatal(err)
		}
		return db.exec(st)
	}
	if n := upsert(under("jobs/a", 3), "new", "created"); n != 1 {
		t.Errorf("upsert of a new row: %d rows", n)
	}
	if n := upsert(under("jobs/a", 2), "new", "zombie"); n != 0 {
		t.Errorf("stale upsert: %d rows, want 0", n)
	}
	if n := upsert(under("jobs/a", 6), "daily", "six"); n != 1 {
		t.Errorf("upsert of an existing row: %d rows", n)
	}
	if got := row("new") + " " + row("daily"); got != "created|jobs/a|3 six|jobs/a|6" {
		t.Errorf("rows = %q", got)
	}

	del := func(f fencing.Fence) int64 {
		st, err := tbl.Delete(f, "id = $1", "daily")
		if err != nil {
			t.Fatal(err)
		}
		return db.exec(st)
	}
	if n := del(under("jobs/a", 5)); n != 0 {
		t.Errorf("stale delete: %d rows, want 0", n)
	}
	if n := del(under("jobs/a", 6)); n != 1 {
		t.Errorf("delete: %d rows, want 1", n)
	}
}

// Writers of many terms race, each in its own connection, appending their
// token to the row's history in the fenced UPDATE itself: the history must be
// in token order and end with the highest token.
func TestIntegrationPostgresRacingWriters(t *testing.T) {
	db := postgres(t)
	name := randomName()
	db.run(fmt.Sprintf("CREATE TABLE %s (id text PRIMARY KEY, history bigint[] NOT NULL DEFAULT '{}', fence_token bigint, fence_lease text); INSERT INTO %[1]s (id) VALUES ('k');", name))
	t.Cleanup(func() { db.run("DROP TABLE " + name) })
	tbl := sqlfence.Table{Name: name}

	const writers, rounds = 6, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			// One psql session per writer, its statements prepared once.
			var script strings.Builder
			for r := range rounds {
				tok := int64(r*2 + w%3 + 1)
				st, err := tbl.Update(fencing.Fence{Lease: "a", Token: fencing.Token(tok)}, "history = array_append(history, $1)", "id = $2", tok, "k")
				if err != nil {
					t.Error(err)
					return
				}
				fmt.Fprintf(&script, "PREPARE s%[1]d AS %[2]s;\nEXECUTE s%[1]d(%[3]d, 'k', %[3]d, 'a');\n", r, st.Query, tok)
			}
			cmd := exec.CommandContext(context.Background(), "psql", db.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-")
			cmd.Stdin = strings.NewReader(script.String())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("writer %d: %v: %s", w, err, out)
			}
		})
	}
	wg.Wait()
	out := db.run(fmt.Sprintf("SELECT array_to_string(history, ' ') FROM %s", name))
	var history []int64
	for _, s := range out {
		n, _ := strconv.ParseInt(s, 10, 64)
		history = append(history, n)
	}
	top := int64((rounds-1)*2 + 2 + 1)
	if !slices.IsSorted(history) || len(history) == 0 || history[len(history)-1] != top {
		t.Errorf("history %v: want tokens in order, ending with %d", history, top)
	}
	t.Logf("%d of %d writes applied", len(history), writers*rounds)
}
