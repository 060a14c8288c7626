// Package redislease is a lease.Store on Redis (and Valkey, which speaks
// the same protocol), through github.com/redis/go-redis/v9: one hash per
// lease, each write one server-side script that compares the version and
// writes, in one round trip. docs/redis.md is the manual; this is the
// contract.
//
// # The conditional primitive
//
// A lease is the hash Prefix+name with two fields: "v", its version, and
// "r", tenure's JSON record (the format lease/s3lease documents). A
// version is 32 random hex digits drawn for each write, so that no version
// is ever handed out twice for a name, even after a failover or restart
// brought back an older state (a counter would hand out the lost write's
// version again: ABA). Put runs one script (EVALSHA, EVAL the first time):
// if the hash's "v" is the version expected (or the hash is absent, to
// create), it writes both fields and publishes the write; else it returns
// the hash as it is, which the conflict error carries. Redis runs a script
// alone, so of any number of writers that read the same version one
// succeeds. A lease is one key, so it lives in one hash slot and the store
// works on Redis Cluster as on one server. The client may send a script
// again after a connection broke (go-redis retries MaxRetries times): a
// retry that finds the version its own earlier attempt wrote (drawn once
// per Put, sent with each attempt) reports that attempt's success, not a
// conflict.
//
// # Linearizability, and what replication takes away
//
// One Redis server (or a primary, read from and written to alone, as the
// client does unless told to read from replicas: never do) applies commands
// one at a time: a Get that starts after a Put returned sees it. Redis
// replicates asynchronously, so a primary that fails before its replicas
// received a write loses it on failover (Sentinel's or Cluster's), and a
// server that restarts loses what it had not written to disk. Such a loss
// is a lost record to tenure: the record vanishes, or goes back to an
// earlier state with that state's version. The protocol's lost-record rule
// covers it (docs/protocol.md), and Store is a lease.Lossy store, so that
// every takeover mints a token of at least the wall time in Unix
// milliseconds: the token of a term whose takeover was lost is not minted
// again. What cannot be promised across such a loss, and for how long,
// docs/redis.md says.
//
// # The change feed
//
// Every write publishes "VERSION RECORD-JSON" on the channel named like the
// key (PUBLISH from the script, so it is sent only for a write made), and
// Watch subscribes to it: followers time renewals from it and read only to
// act (lease.Watcher). Pub/Sub keeps nothing for a subscriber that was
// away, so a connection that breaks is opened again and the watcher told.
// No server configuration is needed (keyspace notifications are not used:
// they are off by default, server-wide, and carry no value).
//
// # Permissions
//
// An ACL user may run only what tenure sends (ACLRules gives the rules):
// on the keys and channels of the prefix, EVALSHA, EVAL, HGETALL,
// SUBSCRIBE, PING and the scripts' HMGET, HGET, EXISTS, HSET, PUBLISH and
// DEL, and SCAN for List.
//
// # Errors
//
// NOPERM, WRONGPASS and NOAUTH are wrapped with lease.Permanent (the tenure
// command exits 69); a key of the prefix that is not a lease's hash is a
// *lease.RecordError. A connection lost, a timeout, a server that is
// LOADING, a READONLY replica (a failover under way), TRYAGAIN and
// CLUSTERDOWN are transient: tenure retries within the lease's timings.
package redislease
