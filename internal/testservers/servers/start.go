package servers

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Test credentials; the servers listen on loopback only.
const (
	vgwAccessKey   = "tenure-versitygw"
	vgwSecretKey   = "tenure-versitygw-secret"
	minioAccessKey = "tenure-minio"
	minioSecretKey = "tenure-minio-secret"
	// PostgreSQL refuses to run as root: as root it runs as this system
	// user, created if missing. The tests connect as pgDBUser (trust
	// authentication, loopback only).
	pgOSUser = "tenure-pg"
	pgDBUser = "tenure"
	// Azurite's well-known development account (its documentation's).
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// EnvNames are the variables Start sets for the tests.
var EnvNames = []string{
	"TENURE_SERVERS_STATE", "TENURE_DYNAMODB_ENDPOINT",
	"TENURE_VERSITYGW_ENDPOINT", "TENURE_VERSITYGW_ACCESS_KEY", "TENURE_VERSITYGW_SECRET_KEY",
	"TENURE_MINIO_ENDPOINT", "TENURE_MINIO_ACCESS_KEY", "TENURE_MINIO_SECRET_KEY", "TENURE_POSTGRES_URL",
	"TENURE_ETCD_ENDPOINT", "TENURE_ETCD_AUTH_ENDPOINT", "TENURE_GCS_ENDPOINT", "TENURE_AZURITE_ENDPOINT", "TENURE_AZURITE_ACCOUNT", "TENURE_AZURITE_KEY",
	"TENURE_KUBE_URL",
	"TENURE_KUBECONFIG",
	"TENURE_REDIS_URL", "TENURE_NATS_URL", "TENURE_NATS_SERVER",
}

// Set is a set of running servers.
type Set struct {
	cfg    Config
	State  string   // the state directory: data, logs, pids
	Env    []string // KEY=VALUE for the tests
	procs  []*proc
	detach bool

	afterInitdb func() error // starts the PostgreSQL server
	sidecar     bool         // versitygw keeps its metadata in a folder
}

type proc struct {
	name    string // server, or "postgres-initdb"
	cmd     *exec.Cmd
	done    chan struct{} // closed when it exited
	err     error         // its exit status, once done
	ready   bool
	retired bool // its job is done: initdb finished, or a versitygw replaced
	check   func() bool
	log     string
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start installs and starts the servers, and waits until each answers.
// With detach they outlive this process (stop them with StopState);
// without, they are killed with it, even by SIGKILL where the system
// allows (Linux).
func (c Config) Start(servers []string, detach bool) (*Set, error) {
	if err := c.Install(servers); err != nil {
		return nil, err
	}
	state, err := os.MkdirTemp("", "tenure-servers.")
	if err != nil {
		return nil, err
	}
	s := &Set{cfg: c, State: state, detach: detach}
	if err := s.start(servers); err != nil {
		s.Stop()
		return nil, err
	}
	s.Env = append([]string{"TENURE_SERVERS_STATE=" + state}, s.Env...)
	return s, nil
}

func (s *Set) start(servers []string) error {
	ports, err := freePorts(len(All) + 7) // one each, MinIO's console, etcd's peer port, a second etcd's, kube-apiserver's etcd's two
	if err != nil {
		return fmt.Errorf("pick free ports: %w", err)
	}
	for i, name := range servers {
		port := strconv.Itoa(ports[i])
		addr := "127.0.0.1:" + port
		switch name {
		case "dynamodb":
			err = s.startDynamoDB(port)
			s.setenv("TENURE_DYNAMODB_ENDPOINT", "http://"+addr)
		case "versitygw":
			err = s.startVersityGW(port, false)
			s.setenv("TENURE_VERSITYGW_ENDPOINT", "http://"+addr)
			s.setenv("TENURE_VERSITYGW_ACCESS_KEY", vgwAccessKey)
			s.setenv("TENURE_VERSITYGW_SECRET_KEY", vgwSecretKey)
		case "minio":
			err = s.startMinIO(port, strconv.Itoa(ports[len(All)]))
			s.setenv("TENURE_MINIO_ENDPOINT", "http://"+addr)
			s.setenv("TENURE_MINIO_ACCESS_KEY", minioAccessKey)
			s.setenv("TENURE_MINIO_SECRET_KEY", minioSecretKey)
		case "postgres":
			url := fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", pgDBUser, addr)
			err = s.startPostgres(port, url)
			s.setenv("TENURE_POSTGRES_URL", url)
		case "etcd":
			err = s.startEtcd("etcd", port, strconv.Itoa(ports[len(All)+1]), nil)
			s.setenv("TENURE_ETCD_ENDPOINT", addr)
			if err == nil {
				// A second one, with authentication on, for the tests of
				// refused logins and rights: turning it on in the first
				// would fail the tests that run beside them.
				auth := strconv.Itoa(ports[len(All)+2])
				err = s.startEtcd("etcd-auth", auth, strconv.Itoa(ports[len(All)+3]), func() error { return etcdAuthSetup("127.0.0.1:" + auth) })
				s.setenv("TENURE_ETCD_AUTH_ENDPOINT", "127.0.0.1:"+auth)
			}
		case "gcs":
			err = s.startFakeGCS(port)
			s.setenv("TENURE_GCS_ENDPOINT", "http://"+addr)
		case "kube":
			err = s.startKube(port, strconv.Itoa(ports[len(All)+4]), strconv.Itoa(ports[len(All)+5]))
			s.setenv("TENURE_KUBE_URL", "https://"+addr)
			if err == nil {
				var path string
				path, err = s.writeKubeconfig("https://" + addr)
				s.setenv("TENURE_KUBECONFIG", path)
			}
		case "redis":
			err = s.startRedis(port)
			s.setenv("TENURE_REDIS_URL", "redis://"+addr+"/0")
		case "nats":
			err = s.startNATS(port)
			s.setenv("TENURE_NATS_URL", "nats://"+addr)
			s.setenv("TENURE_NATS_SERVER", s.cfg.NATSBin())
		case "azurite":
			err = s.startAzurite(port)
			s.setenv("TENURE_AZURITE_ENDPOINT", "http://"+addr+"/"+azuriteAccount)
			s.setenv("TENURE_AZURITE_ACCOUNT", azuriteAccount)
			s.setenv("TENURE_AZURITE_KEY", azuriteKey)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return s.waitReady()
}

func (s *Set) setenv(k, v string) { s.Env = append(s.Env, k+"="+v) }

// launch starts a server process with its output in STATE/NAME.log.
func (s *Set) launch(name string, check func() bool, dir string, env []string, cred *syscall.Credential, args ...string) (*proc, error) {
	logPath := filepath.Join(s.State, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr(s.detach, cred)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), check: check, log: logPath}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	s.recordPID(p)
	return p, nil
}

func (s *Set) startDynamoDB(port string) error {
	jar := filepath.Join(s.cfg.ddbHome(), ddbJarDir)
	lib := filepath.Join(jar, "DynamoDBLocal_lib")
	// C1 only and serial GC: DynamoDB Local starts sooner; the tests are short.
	args := []string{"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.library.path=" + lib}
	launcher := s.cfg.launcherDir()
	if _, err := os.Stat(filepath.Join(launcher, "LoopbackDynamoDBLocal.class")); err == nil {
		cp := strings.Join([]string{launcher, filepath.Join(jar, "DynamoDBLocal.jar"), filepath.Join(lib, "*")}, string(os.PathListSeparator))
		args = append(args, "-Dtenure.dynamodb.host=127.0.0.1", "-cp", cp, "LoopbackDynamoDBLocal")
	} else {
		args = append(args, "-jar", filepath.Join(jar, "DynamoDBLocal.jar"))
	}
	args = append(args, "-inMemory", "-sharedDb", "-disableTelemetry", "-port", port)
	_, err := s.launch("dynamodb", tcpOpen(port), "", nil, nil, args...)
	return err
}

// startVersityGW runs versitygw on its posix backend. Its object metadata
// (ETags included) lives in user xattrs or, with sidecar, in a folder of its
// own, for file systems without user xattrs (tmpfs before Linux 6.6).
func (s *Set) startVersityGW(port string, sidecar bool) error {
	data := filepath.Join(s.State, "versitygw-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	args := []string{filepath.Join(s.cfg.toolHome(versitygw), "bin", "versitygw"), "--port", "127.0.0.1:" + port, "--quiet", "--keep-alive", "posix"}
	if sidecar {
		meta := filepath.Join(s.State, "versitygw-meta")
		if err := os.MkdirAll(meta, 0o755); err != nil {
			return err
		}
		args = append(args, "--sidecar", meta)
	}
	args = append(args, data)
	_, err := s.launch("versitygw", tcpOpen(port), "", []string{"ROOT_ACCESS_KEY=" + vgwAccessKey, "ROOT_SECRET_KEY=" + vgwSecretKey}, nil, args...)
	return err
}

func (s *Set) startMinIO(port, console string) error {
	data := filepath.Join(s.State, "minio-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	env := []string{"MINIO_ROOT_USER=" + minioAccessKey, "MINIO_ROOT_PASSWORD=" + minioSecretKey,
		"MINIO_UPDATE=off", "MINIO_BROWSER=off", "MINIO_CALLHOME_ENABLE=off"}
	_, err := s.launch("minio", httpOK(port, "/minio/health/ready"), "", env, nil,
		filepath.Join(s.cfg.toolHome(minio), "bin", "minio"), "server", "--quiet", "--anonymous",
		"--certs-dir", filepath.Join(s.State, "minio-certs"),
		"--address", "127.0.0.1:"+port, "--console-address", "127.0.0.1:"+console, data)
	return err
}

// startEtcd runs a one-member etcd cluster on loopback, its data in the
// state directory; setup, if any, runs once it answers, until it succeeds.
func (s *Set) startEtcd(name, port, peer string, setup func() error) error {
	client, peerURL := "http://127.0.0.1:"+port, "http://127.0.0.1:"+peer
	check := httpOK(port, "/health")
	if setup != nil {
		up := check
		check = func() bool { return up() && setup() == nil }
	}
	_, err := s.launch(name, check, "", []string{"ETCD_UNSUPPORTED_ARCH=" + runtime.GOARCH}, nil, etcdBin(),
		"--name", "tenure", "--data-dir", filepath.Join(s.State, name+"-data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "tenure="+peerURL, "--log-level", "warn")
	return err
}

// startRedis runs redis-server on loopback, in memory (no RDB snapshots,
// no append-only file).
func (s *Set) startRedis(port string) error {
	args := append([]string{RedisBin()}, RedisArgs(port, filepath.Join(s.State, "redis-data"))...)
	_, err := s.launch("redis", tcpOpen(port), "", nil, nil, args...)
	return err
}

// RedisArgs are the arguments of a redis-server on 127.0.0.1:port, in
// memory, its working folder dir (made here).
func RedisArgs(port, dir string) []string {
	_ = os.MkdirAll(dir, 0o755)
	return []string{"--bind", "127.0.0.1", "--port", port, "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--loglevel", "warning"}
}

// startNATS runs nats-server with JetStream on loopback, its store in the
// state directory.
func (s *Set) startNATS(port string) error {
	_, err := s.launch("nats", tcpOpen(port), "", nil, nil, s.cfg.NATSBin(),
		"-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(s.State, "nats-data"))
	return err
}

// startFakeGCS runs fake-gcs-server over plain HTTP, in memory.
func (s *Set) startFakeGCS(port string) error {
	_, err := s.launch("gcs", httpOK(port, "/storage/v1/b"), "", nil, nil,
		filepath.Join(s.cfg.toolHome(fakeGCS), "bin", fakeGCS.name),
		"-scheme", "http", "-host", "127.0.0.1", "-port", port, "-public-host", "127.0.0.1:"+port,
		"-backend", "memory", "-log-level", "warn")
	return err
}

// startAzurite runs Azurite's blob service, in memory.
func (s *Set) startAzurite(port string) error {
	_, err := s.launch("azurite", tcpOpen(port), "", nil, nil,
		filepath.Join(s.cfg.nodeHome(), "package", "bin", "node"),
		filepath.Join(s.cfg.azuriteHome(), "node_modules", "azurite", "dist", "src", "blob", "main.js"),
		"--blobHost", "127.0.0.1", "--blobPort", port, "--inMemoryPersistence", "--disableTelemetry",
		"--skipApiVersionCheck", "--silent")
	return err
}

// startPostgres makes a fresh cluster in STATE/postgres with initdb (user
// tenure, trust authentication, no fsync); waitReady starts the server
// once initdb has finished. As root both run as pgOSUser.
func (s *Set) startPostgres(port, url string) error {
	bin := pgBinDir()
	if bin == "" {
		return fmt.Errorf("PostgreSQL is not installed (the tests need %s): %s", pgWant, pgAptHint)
	}
	dir := filepath.Join(s.State, "postgres")
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		return err
	}
	cred, err := s.postgresUser(dir)
	if err != nil {
		return err
	}
	initdb, err := s.launch("postgres-initdb", nil, dir, nil, cred, filepath.Join(bin, "initdb"),
		"-D", filepath.Join(dir, "data"), "-U", pgDBUser, "-A", "trust", "--no-sync", "--locale=C", "-E", "UTF8")
	if err != nil {
		return err
	}
	// waitReady starts the server when initdb is done.
	initdb.check = func() bool { return false }
	pgServer := []string{filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"), "-h", "127.0.0.1", "-p", port, "-k", filepath.Join(dir, "run"), "-F"}
	s.afterInitdb = func() error {
		_, err := s.launch("postgres", func() bool { return tcpOpen(port)() && pgReady(url) }, dir, nil, cred, pgServer...)
		return err
	}
	return nil
}

// postgresUser returns the credential PostgreSQL runs with: none, unless
// this process is root, which PostgreSQL refuses; then pgOSUser's, created
// if missing, and dir is handed to it.
func (s *Set) postgresUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(pgOSUser)
	if err != nil {
		uerr := run("", os.Environ(), "useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", "--user-group", "--comment", "tenure test PostgreSQL", pgOSUser)
		// Look again either way: a concurrent run may have made it.
		if u, err = user.Lookup(pgOSUser); err != nil {
			return nil, fmt.Errorf("PostgreSQL refuses to run as root, and creating the user %s failed: %v", pgOSUser, uerr)
		}
		if uerr == nil {
			s.cfg.say("created the system user %s to run PostgreSQL, which refuses to run as root", pgOSUser)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// MkdirTemp made the state directory 0700: let the user through to its folder.
	if err := os.Chmod(s.State, 0o711); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "run")} {
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, err
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func pgReady(url string) bool {
	cmd := exec.Command("psql", url, "-X", "-q", "-At", "-c", "select 1")
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=2")
	return cmd.Run() == nil
}

func tcpOpen(port string) func() bool {
	return func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
}

func httpOK(port, path string) func() bool {
	client := &http.Client{Timeout: 2 * time.Second}
	return func() bool {
		resp, err := client.Get("http://127.0.0.1:" + port + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// freePorts returns n distinct free ports of 127.0.0.1. Another process may
// still take one before its server binds it; the server's log then says so.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls every server in one loop, so each start-up time is its own.
func (s *Set) waitReady() error {
	start := time.Now()
	deadline := start.Add(s.cfg.Timeout)
	for {
		waiting := false
		for _, p := range s.procs {
			if p.ready {
				continue
			}
			if p.exited() {
				switch {
				case p.name == "postgres-initdb" && p.err == nil:
					p.ready, p.retired = true, true
					if err := s.afterInitdb(); err != nil {
						return err
					}
					waiting = true
					continue
				case p.name == "versitygw" && !s.sidecar && logHas(p.log, "xattr"):
					s.cfg.say("versitygw: no user xattrs on the file system of %s; keeping its metadata in a sidecar folder", s.State)
					s.sidecar = true
					p.ready, p.retired = true, true
					port := strings.TrimPrefix(envValue(s.Env, "TENURE_VERSITYGW_ENDPOINT"), "http://127.0.0.1:")
					if err := s.startVersityGW(port, true); err != nil {
						return err
					}
					waiting = true
					continue
				}
				return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", p.name, p.err, p.log, logTail(p.log))
			}
			if p.check != nil && p.check() {
				p.ready = true
				s.cfg.say("%s ready in %.1fs", p.name, time.Since(start).Seconds())
				continue
			}
			waiting = true
		}
		if !waiting {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range s.procs {
				if !p.ready {
					fmt.Fprintf(&b, "\n%s did not answer within %v; last lines of %s:\n%s", p.name, s.cfg.Timeout, p.log, logTail(p.log))
				}
			}
			return fmt.Errorf("servers did not start (TENURE_SERVER_TIMEOUT)%s", b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

func logHas(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), 25)
}

// Exited returns the servers that have exited.
func (s *Set) Exited() []string {
	var out []string
	for _, p := range s.procs {
		if !p.retired && p.exited() {
			out = append(out, p.name+" (last lines of "+p.log+":\n"+logTail(p.log)+")")
		}
	}
	return out
}

// Stop stops the servers: SIGTERM (SIGINT for PostgreSQL, its fast
// shutdown), then SIGKILL after 10 seconds; and removes the state directory
// (the data only, with KeepLogs).
func (s *Set) Stop() {
	for _, p := range s.procs {
		if !p.exited() {
			signalGroup(p.cmd.Process.Pid, stopSignal(p.name))
		}
	}
	deadline := time.After(10 * time.Second)
	for _, p := range s.procs {
		select {
		case <-p.done:
		case <-deadline:
			signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	removeState(s.State, s.cfg)
}

func stopSignal(name string) syscall.Signal {
	if name == "postgres" {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

func removeState(state string, c Config) {
	if !c.KeepLogs {
		os.RemoveAll(state)
		return
	}
	for _, d := range []string{"versitygw-data", "versitygw-meta", "minio-data", "postgres", "etcd-data", "etcd-auth-data", "redis-data", "nats-data"} {
		os.RemoveAll(filepath.Join(state, d))
	}
	c.say("server logs kept in %s", state)
}

// recordPID notes a detached server in STATE/pids, for StopState.
func (s *Set) recordPID(p *proc) {
	if !s.detach {
		return
	}
	f, err := os.OpenFile(filepath.Join(s.State, "pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d %s\n", p.cmd.Process.Pid, p.name)
}

// StopState stops the servers a detached Start left running in state.
func StopState(state string, c Config) error {
	f, err := os.Open(filepath.Join(state, "pids"))
	if err != nil {
		return fmt.Errorf("%s has no pids file: not a running server set", state)
	}
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil {
			continue
		}
		pids = append(pids, pid)
		signalGroup(pid, stopSignal(fields[1]))
	}
	f.Close()
	for range 100 {
		alive := false
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				alive = true
			}
		}
		if !alive {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range pids {
		signalGroup(pid, syscall.SIGKILL)
	}
	removeState(state, c)
	return nil
}

// signalGroup signals a server's process group (each runs in its own).
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, sig)
	}
}
