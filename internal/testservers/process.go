package testservers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testservers/servers"
)

// Server is a server process a test started for itself (a Redis primary
// and its replica, a NATS server to restart): the tests of failover and
// restarts, which the shared servers cannot be put through.
type Server struct {
	t    testing.TB
	Addr string // 127.0.0.1:PORT
	Dir  string // its working folder, kept across restarts
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// StartRedis starts a redis-server of its own on a free port of loopback,
// in memory, with extra arguments (e.g. "--replicaof", ...), and waits
// until it accepts connections. The test's cleanup stops it (by its PID)
// and waits for it. Without redis-server it skips the test, or fails it
// when Required.
func StartRedis(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := servers.RedisBin()
	if bin == "" {
		missing(t, "redis-server is not installed")
	}
	port := freePort(t)
	dir := t.TempDir()
	s := &Server{t: t, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir}
	s.args = append(append([]string{bin}, servers.RedisArgs(strconv.Itoa(port), dir)...), extra...)
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// StartNATS starts a nats-server of its own, with JetStream, its store in
// a folder of its own and its configuration from conf (a NATS
// configuration file's text, which may set jetstream's sync_interval),
// and waits until it accepts connections. Cleanup stops it and waits.
// Without $TENURE_NATS_SERVER it skips the test, or fails it when
// Required.
func StartNATS(t testing.TB, conf string) *Server {
	t.Helper()
	bin := need(t, EnvNATSServer, "nats-server")
	port := freePort(t)
	dir := t.TempDir()
	cf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\n%s\n", port, filepath.Join(dir, "js"), conf)
	if err := os.WriteFile(cf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir, args: []string{bin, "-c", cf}}
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// Start starts the server (again, after Kill or Stop) and waits until it
// accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatalf("%s is running", s.args[0])
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, s.Dir
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, log
	deadline := time.Now().Add(SetupTimeout)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			s.t.Fatalf("%s exited at start; its log:\n%s", filepath.Base(s.args[0]), s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not listen on %s within %v; its log:\n%s", filepath.Base(s.args[0]), s.Addr, SetupTimeout, s.Log())
		}
	}
}

// Signal sends sig to the running server and returns (SIGSTOP, SIGCONT).
func (s *Server) Signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return errors.New("testservers: the server is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Kill stops the server with SIGKILL, as a crash, and waits for it.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop stops the server with SIGTERM and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(SetupTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.log.Close()
	s.cmd = nil
}

// Log returns what the server wrote, for failures.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	return string(b)
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
