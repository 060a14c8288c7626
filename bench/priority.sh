#!/bin/bash
# priority.sh measures hand-overs to a preferred candidate with real
# `tenure run` processes: a (priority 0) leads, b (priority 5, woken on
# the listener a priority turns on) joins, and a hands over once its term
# is --priority-hold-off (2s) old.
# It prints, per trial, the milliseconds from a's command getting SIGTERM
# (its term's end) to b's command starting, then min, median, p90 and max.
#
#	scripts/testservers.sh run -- bench/priority.sh [TRIALS]   # DynamoDB Local
#	scripts/testservers.sh run -- bench/priority.sh 20 --wake none   # b not woken: found at its next poll
set -euo pipefail
trials=${1:-20}
bflags=("${@:2}") # more flags for b
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/tenure" ./cmd/tenure
cat > "$dir/child.sh" <<'CHILD'
#!/bin/sh
trap 'echo stop-$TENURE_HOLDER $(date +%s.%N) >> "$LOGF"; exit 0' TERM
echo run-$TENURE_HOLDER $(date +%s.%N) >> "$LOGF"
while :; do sleep 0.05; done
CHILD
chmod +x "$dir/child.sh"
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-x} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-x}
quick=(--lease 2s --cold-poll 1s --priority-hold-off 2s)
for i in $(seq 1 "$trials"); do
	export LOGF=$dir/log$i
	: > "$LOGF"
	export TENURE_STORE="dynamodb://tenure-priority-$$-$i?region=us-east-1&create=true&endpoint=$TENURE_DYNAMODB_ENDPOINT"
	"$dir/tenure" run --id a --standby "${quick[@]}" job -- "$dir/child.sh" 2>/dev/null &
	a=$!
	until grep -q run-a "$LOGF"; do sleep 0.05; done
	"$dir/tenure" run --id b --priority 5 "${quick[@]}" "${bflags[@]}" job -- "$dir/child.sh" 2>/dev/null &
	b=$!
	until grep -q run-b "$LOGF"; do sleep 0.05; done
	kill -TERM $b && wait $b || true
	kill -TERM $a && wait $a || true
	awk '/^stop-a/ && !s {s=$2} /^run-b/ {b=$2} END {printf "%.1f\n", (b-s)*1000}' "$LOGF"
done | tee "$dir/gaps"
sort -n "$dir/gaps" | awk '{a[NR]=$1} END {printf "hand-overs %d: min %.1f ms, median %.1f, p90 %.1f, max %.1f\n", NR, a[1], a[int(NR/2)+1], a[int(NR*0.9)+1], a[NR]}'
