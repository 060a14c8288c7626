package storeurl

import (
	"errors"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/redislease"
)

// openRedis opens redis://[USER[:PASSWORD]@]HOST:PORT[/DB] (rediss:// for
// TLS): prefix=P sets the key prefix (default "tenure:"); master_name=M
// makes HOST:PORT a Sentinel's and follows its primary; cluster=true makes
// it a Redis Cluster's node; every other parameter is go-redis's
// (dial_timeout, read_timeout, pool_size, addr=HOST:PORT for more
// Sentinels or cluster nodes...). The password comes from the URL or from
// TENURE_REDIS_PASSWORD. The client sends nothing until the first call.
func openRedis(u *url.URL, q url.Values) (lease.Store, error) {
	if u.Host == "" {
		return nil, errors.New("want redis://HOST:PORT (rediss:// for TLS)")
	}
	prefix := q.Get("prefix")
	cluster, err := boolParam(q, "cluster", false)
	if err != nil {
		return nil, err
	}
	q.Del("prefix")
	q.Del("cluster")
	if u.User != nil {
		if _, ok := u.User.Password(); !ok {
			if p := os.Getenv("TENURE_REDIS_PASSWORD"); p != "" {
				u.User = url.UserPassword(u.User.Username(), p)
			}
		}
	} else if p := os.Getenv("TENURE_REDIS_PASSWORD"); p != "" {
		u.User = url.UserPassword("", p)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	raw := rest.String()
	var c redis.UniversalClient
	switch {
	case cluster:
		opt, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, redisURLError(err)
		}
		opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
		c = redis.NewClusterClient(opt)
	case q.Has("master_name"):
		opt, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, redisURLError(err)
		}
		opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
		c = redis.NewFailoverClient(opt)
	default:
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, redisURLError(err)
		}
		// tenure retries on its own schedule, within the lease's timings,
		// and bounds each call by its context.
		opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
		c = redis.NewClient(opt)
	}
	return redislease.New(c, redislease.Config{Prefix: prefix})
}

// redisURLError says which parameters the URL may carry.
func redisURLError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	return errors.New(msg + " (tenure's own: prefix, cluster, master_name; the rest are go-redis's: dial_timeout, read_timeout, write_timeout, pool_size, addr...)")
}
