package storeurl

import (
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/natslease"
)

// openNATS opens nats://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/BUCKET
// (tls:// for TLS): create=true creates the bucket (replicas=N, default
// 1); creds=FILE a credentials file; the password comes from the URL or
// from TENURE_NATS_PASSWORD. The connection is retried until the server
// answers, and the bucket bound at the first call, so that a server down
// when tenure starts is retried like any outage.
func openNATS(u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "create", "replicas", "creds"); err != nil {
		return nil, err
	}
	bucket := strings.Trim(u.Path, "/")
	if u.Host == "" || bucket == "" || strings.Contains(bucket, "/") {
		return nil, errors.New("want nats://HOST:PORT/BUCKET")
	}
	create, err := boolParam(q, "create", false)
	if err != nil {
		return nil, err
	}
	replicas := 1
	if v := q.Get("replicas"); v != "" {
		if replicas, err = strconv.Atoi(v); err != nil || replicas%2 == 0 || replicas < 1 || replicas > 5 {
			return nil, errors.New("replicas=" + strconv.Quote(v) + ": want 1, 3 or 5")
		}
	}
	opts := []nats.Option{
		nats.Name("tenure"),
		// tenure retries on its own schedule; the client reconnects
		// quickly and for ever, and keeps nothing buffered meanwhile.
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(-1),
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if !ok {
			pass = os.Getenv("TENURE_NATS_PASSWORD")
		}
		opts = append(opts, nats.UserInfo(u.User.Username(), pass))
	}
	if f := q.Get("creds"); f != "" {
		opts = append(opts, nats.UserCredentials(f))
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		servers = append(servers, u.Scheme+"://"+h)
	}
	nc, err := nats.Connect(strings.Join(servers, ","), opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return natslease.Open(js, bucket, create, replicas)
}
