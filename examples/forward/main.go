// Command forward serves a single-writer HTTP service from three replicas:
// each runs the service behind package forward, and whichever replica a
// request reaches, the leader serves it, with the term's fencing token.
// Partway through, the leader hands over (Drain, then Resign) and another
// leads; requests sent meanwhile wait for it rather than failing.
//
// The replicas share one process and the in-memory store, and listen on
// loopback ports of their own, so it runs with no setup:
//
//	go run ./examples/forward
//
// It prints who served each request, and exits 0 when every request was
// served by the leader of the moment under a token no lower than the last.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/forward"
	"github.com/tenure-go/tenure/lease/memlease"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

// replica is one copy of the service: a candidate, and the service behind
// forward on a listener of its own.
type replica struct {
	id  string
	c   *tenure.Candidate
	h   *forward.Handler
	srv *http.Server
	url string
}

func run(out io.Writer) error {
	store := memlease.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var highest fencing.Token
	var wg sync.WaitGroup
	var reps []*replica
	for _, id := range []string{"a", "b", "c"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		c, err := tenure.New(tenure.Config{Lease: "orders-writer", Store: store, Addr: ln.Addr().String(),
			Timing: tenure.Timing{LeaseDuration: 2 * time.Second}, Runtime: tenure.Runtime{ID: id}})
		if err != nil {
			return err
		}
		// The service: it writes under the term's fence, which a resource
		// would check; here it checks that tokens never go back.
		service := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, _ := fencing.FromContext(r.Context())
			mu.Lock()
			defer mu.Unlock()
			if f.Token < highest {
				http.Error(w, fmt.Sprintf("token %d after %d", f.Token, highest), http.StatusConflict)
				return
			}
			highest = f.Token
			fmt.Fprintf(w, "%s wrote the order under token %d", id, f.Token)
		})
		h, err := forward.New(forward.Config{Candidate: c, Handler: service})
		if err != nil {
			return err
		}
		r := &replica{id: id, c: c, h: h, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, url: "http://" + ln.Addr().String()}
		reps = append(reps, r)
		wg.Go(func() { _ = r.srv.Serve(ln) })
		wg.Go(func() { _ = c.Run(ctx) })
	}
	defer func() {
		for _, r := range reps {
			_ = r.srv.Close()
		}
		cancel()
		wg.Wait()
	}()
	send := func(i int) error {
		r := reps[i%len(reps)]
		resp, err := http.Post(r.url+"/orders", "text/plain", strings.NewReader(fmt.Sprint("order ", i)))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(out, "order %2d, sent to %s: %d %s\n", i, r.id, resp.StatusCode, body)
		if resp.StatusCode != http.StatusOK {
			return errors.New("an order failed")
		}
		return nil
	}
	for i := range 6 {
		if err := send(i); err != nil {
			return err
		}
	}
	var leader *replica
	for _, r := range reps {
		if r.c.Status().Leading {
			leader = r
		}
	}
	if leader == nil {
		return errors.New("no leader")
	}
	fmt.Fprintf(out, "%s hands over: it drains, then gives the lease back\n", leader.id)
	if err := leader.h.Drain(ctx); err != nil {
		return err
	}
	if err := leader.c.Resign(ctx); err != nil {
		return err
	}
	for i := 6; i < 12; i++ {
		if err := send(i); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "every order was written by the leader of the moment")
	return nil
}
