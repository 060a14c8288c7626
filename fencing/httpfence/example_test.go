package httpfence_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/httpfence"
)

// A service that only the current leader may write to. The leader's client
// sends its term's fence with every request; the service refuses a request
// from an older term with 409 and says why.
func Example() {
	var stored string
	h, err := httpfence.Handler(httpfence.Config{Lease: "jobs/report"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		stored = string(b) // runs under the Guard: no older term can interleave
	}))
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{}}

	write := func(tok fencing.Token, body string) {
		// In a real leader, ctx is the one OnElected received.
		ctx := fencing.NewContext(context.Background(), fencing.Fence{Lease: "jobs/report", Token: tok})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("token %d: %s %s", tok, resp.Status, msg)))
		if err := httpfence.CheckResponse(resp); err != nil {
			fmt.Println("  ->", err)
		}
	}
	write(1, "from term 1")
	write(2, "from term 2")
	write(1, "late, from term 1")
	fmt.Println("stored:", stored)
	// Output:
	// token 1: 200 OK
	// token 2: 200 OK
	// token 1: 409 Conflict fencing: lease "jobs/report": token 1 is stale, token 2 was already accepted
	//   -> fencing: lease "jobs/report": token 1 is stale, token 2 was already accepted
	// stored: from term 2
}
