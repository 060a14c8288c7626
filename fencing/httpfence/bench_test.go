package httpfence_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/httpfence"
)

// BenchmarkRoundTrip compares a plain POST through a loopback httptest server
// with a fenced one (Transport adds two headers; Handler parses them and
// runs the handler under the Guard), sequentially and with parallel clients,
// where Exclusive serializes handlers and Shared does not.
func BenchmarkRoundTrip(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	ctx := fencing.NewContext(context.Background(), fencing.Fence{Lease: "bench/lease", Token: 7})
	for _, tc := range []struct {
		name  string
		mode  httpfence.Mode
		plain bool
	}{
		{"plain", 0, true},
		{"fenced-exclusive", httpfence.Exclusive, false},
		{"fenced-shared", httpfence.Shared, false},
	} {
		var h http.Handler = ok
		if !tc.plain {
			var err error
			if h, err = httpfence.Handler(httpfence.Config{Mode: tc.mode}, ok); err != nil {
				b.Fatal(err)
			}
		}
		srv := httptest.NewServer(h)
		c := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
		post := func(b *testing.B) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("payload"))
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatal(resp.Status)
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				post(b)
			}
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					post(b)
				}
			})
		})
		srv.Close()
	}
}
