#!/usr/bin/env bash
# Syslog export against its peer, in one run: records/s arriving at a receiving
# rsyslog (imrelp -> omfile, `%msg%` lines), timed from the sender's start until the receiver's
# file holds every line (Sources/SyslogBench: `time`):
#   logbook    `logbook export --syslog relp://` of a bundle of RECORDS records (ExportBench's)
#   rsyslog    a second rsyslog forwarding the same records as a file of `logbook show` lines
#              (imfile -> omrelp), with librelp's default window of 128 (Logbook's too), then
#              with windowSize="1024"
#   both       logbook and rsyslog (window 1024) at once (2 x RECORDS lines): what the receiver
#              takes when one sender is not enough to fill it
# Rounds interleaved; each measurement has a fresh receiver, cursor and imfile state. Every process
# runs unprivileged on a loopback port in a temporary directory.
# Usage: Benchmarks/syslog.sh [RECORDS] [ROUNDS]   (default 200000, 3)
# LOGBOOK_SCRATCH / BENCH_SCRATCH: --scratch-path of the two release builds (default: .build).
set -euo pipefail
cd "$(dirname "$0")"
records="${1:-200000}"
rounds="${2:-3}"
modules=/usr/lib/x86_64-linux-gnu/rsyslog
if ! command -v rsyslogd > /dev/null || [ ! -f "$modules/imrelp.so" ] || [ ! -f "$modules/omrelp.so" ]; then
    echo "syslog.sh: needs rsyslogd with imrelp and omrelp (apt-get install rsyslog rsyslog-relp)" >&2
    exit 77
fi
root_scratch=(); bench_scratch=()
[ -n "${LOGBOOK_SCRATCH:-}" ] && root_scratch=(--scratch-path "$LOGBOOK_SCRATCH")
[ -n "${BENCH_SCRATCH:-}" ] && bench_scratch=(--scratch-path "$BENCH_SCRATCH")
(cd .. && swift build -c release --product logbook "${root_scratch[@]}" > /dev/null)
logbook="$(cd .. && swift build -c release --show-bin-path "${root_scratch[@]}")/logbook"
swift build -c release --product SyslogBench "${bench_scratch[@]}" > /dev/null
bench="$(swift build -c release --show-bin-path "${bench_scratch[@]}")/SyslogBench"

work="$(mktemp -d /var/tmp/logbook-syslog-bench.XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bench" write "$work/a.logbook" "$records"
"$bench" write "$work/b.logbook" "$records"  # the second sender of "both": its own bundle
"$logbook" show "$work/a.logbook" > "$work/lines.txt"
[ "$(wc -l < "$work/lines.txt")" -eq "$records" ] || { echo "syslog.sh: show printed $(wc -l < "$work/lines.txt") lines" >&2; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Starts a receiving rsyslog in $1 on port $2 and waits until it listens.
receiver() {
    local dir="$1" port="$2"
    mkdir -p "$dir"
    cat > "$dir/rsyslog.conf" <<CONF
global(workDirectory="$dir")
module(load="imrelp")
input(type="imrelp" port="$port" address="127.0.0.1" ruleset="out")
template(name="msg" type="string" string="%msg%\n")
ruleset(name="out") { action(type="omfile" file="$dir/out.txt" template="msg") }
CONF
    rsyslogd -n -f "$dir/rsyslog.conf" -i "$dir/rsyslogd.pid" > "$dir/rsyslogd.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do
        (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && return 0
        sleep 0.05
    done
    echo "syslog.sh: the receiver did not listen on $port" >&2
    exit 1
}

# The forwarding rsyslog's configuration in $1: the lines file to port $2, omrelp's window $3.
forwarder() {
    local dir="$1" port="$2" window="$3"
    mkdir -p "$dir"
    cat > "$dir/rsyslog.conf" <<CONF
global(workDirectory="$dir")
module(load="imfile")
module(load="omrelp")
input(type="imfile" file="$work/lines.txt" tag="logbook" ruleset="forward")
ruleset(name="forward") { action(type="omrelp" target="127.0.0.1" port="$port" windowSize="$window") }
CONF
}

stop_receiver() {
    kill "${pids[-1]}" 2> /dev/null || true
    wait "${pids[-1]}" 2> /dev/null || true
    unset 'pids[-1]'
}

declare -A rows
for round in $(seq "$rounds"); do
    echo "round $round of $rounds" >&2
    # logbook export
    dir="$work/$round-logbook"; port="$(free_port)"; receiver "$dir/receiver" "$port"
    seconds="$("$bench" time "$dir/receiver/out.txt" "$records" "$logbook" export --syslog "relp://127.0.0.1:$port" \
        --cursors "$dir/cursors" "$work/a.logbook" 2>> "$work/stderr.log")"
    rows[logbook]+="$(awk -v n="$records" -v s="$seconds" 'BEGIN { printf "%.0f ", n / s }')"
    stop_receiver
    # rsyslog forwarding the lines, librelp's default window and a larger one
    for window in 128 1024; do
        dir="$work/$round-rsyslog-$window"; port="$(free_port)"; receiver "$dir/receiver" "$port"; forwarder "$dir/forwarder" "$port" "$window"
        seconds="$("$bench" time "$dir/receiver/out.txt" "$records" "$(command -v rsyslogd)" -n -f "$dir/forwarder/rsyslog.conf" \
            -i "$dir/forwarder/rsyslogd.pid" 2>> "$work/stderr.log")"
        rows[rsyslog-$window]+="$(awk -v n="$records" -v s="$seconds" 'BEGIN { printf "%.0f ", n / s }')"
        stop_receiver
    done
    # both at once: the receiver's capacity, or a lower bound of it
    dir="$work/$round-both"; port="$(free_port)"; receiver "$dir/receiver" "$port"; forwarder "$dir/forwarder" "$port" 1024
    rsyslogd -n -f "$dir/forwarder/rsyslog.conf" -i "$dir/forwarder/rsyslogd.pid" > /dev/null 2>&1 &
    forwarding=$!
    seconds="$("$bench" time "$dir/receiver/out.txt" $((2 * records)) "$logbook" export --syslog "relp://127.0.0.1:$port" \
        --cursors "$dir/cursors" "$work/b.logbook" 2>> "$work/stderr.log")"
    kill "$forwarding"; wait "$forwarding" 2> /dev/null || true
    rows[both]+="$(awk -v n=$((2 * records)) -v s="$seconds" 'BEGIN { printf "%.0f ", n / s }')"
    stop_receiver
done

echo "| $records records over RELP to rsyslog (imrelp -> omfile) | records/s at the receiver (median) | spread of $rounds rounds |"
echo "|---|---:|---:|"
for row in "logbook:logbook export --syslog relp:// (a bundle; window 128)" \
           "rsyslog-128:rsyslog imfile -> omrelp, show's lines of it (window 128, the default)" \
           "rsyslog-1024:rsyslog imfile -> omrelp, show's lines of it (windowSize=\"1024\")" \
           "both:logbook and rsyslog (1024) at once, 2 x $records (the receiver takes at least this)"; do
    key="${row%%:*}"
    echo "${rows[$key]}" | tr ' ' '\n' | grep . | sort -n | awk -v name="${row#*:}" '
        { v[NR] = $1 } END { printf "| %s | %d | %d–%d |\n", name, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
