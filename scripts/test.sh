#!/usr/bin/env bash
# test.sh is `make test`: every check and every test, in phases, with each
# phase's time printed at the end (on failure too), so that a slow phase
# shows in every CI log.
#
# The real servers install in the background from the start (downloads and
# builds that a cold machine spends minutes on), while lint compiles. The
# code is compiled twice, not three times: with -race once, for go vet,
# staticcheck and the tests; without it once (CGO_ENABLED=0), for the
# simulator's full pass, the tenure binary the process tests run and the
# container image's test, which must be static.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
STATICCHECK=${STATICCHECK:-honnef.co/go/tools/cmd/staticcheck@v0.8.2}
CACHE=${TENURE_CACHE:-$HOME/.cache/tenure}
SERVERS=scripts/testservers.sh

start=$SECONDS
phases=()   # "NAME SECONDS STATUS"
servers_pid=""
servers_log=$(mktemp)

report() {
	local rc=$?
	if [[ -n $servers_pid ]]; then # lint failed: stop the install by its PID
		kill -- "$servers_pid" 2>/dev/null
		wait "$servers_pid" 2>/dev/null
	fi
	rm -f "$servers_log" "$servers_log.done"
	echo
	echo "make test: phase times"
	local p name secs status
	for p in "${phases[@]}"; do
		read -r name secs status <<<"$p"
		printf '  %-22s %5ds  %s\n' "$name" "$secs" "$status"
	done
	printf '  %-22s %5ds  %s\n' "total" "$((SECONDS - start))" "$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")"
	exit "$rc"
}
trap report EXIT

# phase NAME CMD...: runs CMD and notes its time; the run ends at the first
# phase that fails.
phase() {
	local name=$1
	shift
	echo "== $name: $*"
	local t=$SECONDS
	"$@"
	local rc=$?
	phases+=("$name $((SECONDS - t)) $([[ $rc == 0 ]] && echo ok || echo "FAILED($rc)")")
	[[ $rc == 0 ]] || exit "$rc"
}

phase checks make --no-print-directory no-binaries race-check fmt-check

# The servers: pinned versions cached in $CACHE, built or downloaded once.
echo "== servers (in the background; its output follows the lint): $SERVERS install"
(
	t=$SECONDS
	CGO_ENABLED=0 "$SERVERS" install >"$servers_log" 2>&1
	echo "$? $((SECONDS - t))" >"$servers_log.done"
) &
servers_pid=$!

# The race build's flags, the same for vet, staticcheck and the tests so
# that they share one compile. No DWARF: nothing here reads it, and the
# compiler spends a tenth of its time writing it.
RACE=(-race -gcflags=all=-dwarf=false)
phase vet "$GO" vet "${RACE[@]}" ./...
# staticcheck is built without -race, and asks go list for the race build,
# whose export data vet compiled.
phase staticcheck bash -c 'GOBIN="$1/bin" CGO_ENABLED=0 GOFLAGS= "$2" install "$3" && GOFLAGS="$4" "$1/bin/staticcheck" ./...' _ "$CACHE" "$GO" "$STATICCHECK" "${RACE[*]}"
phase tidy make --no-print-directory tidy-check

t=$SECONDS
wait "$servers_pid"
servers_pid=""
cat "$servers_log"
read -r rc secs <"$servers_log.done" || { rc=1 secs=0; }
phases+=("servers(background) $secs $([[ $rc == 0 ]] && echo ok || echo "FAILED($rc)")")
phases+=("waited-for-servers $((SECONDS - t)) ok")
[[ $rc == 0 ]] || exit "$rc"

# -ldflags=-w: the test binaries are linked at every run (some 70 of them)
# and nobody reads their DWARF; leaving it out saves a second a link.
phase tests "$SERVERS" run -- "$GO" test "${RACE[@]}" -count=1 -ldflags=-w ./...
# The race detector slows the simulator tenfold, so under -race it runs 8
# seeds per scenario; this pass runs its full 68,800 seeds (100 per
# scenario, 2,000 per standby, wake-up, renewal-notice, change-feed,
# priority, stale-read, lost-write or lock scenario), one in ten of them twice.
phase sim env CGO_ENABLED=0 "$GO" test -count=1 ./sim
