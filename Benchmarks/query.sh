#!/usr/bin/env bash
# `logbook query` (SQL over typed records through SQLite virtual tables) against lnav over the same
# records as text lines and jq over them as JSON lines: three questions, each answered by the three
# tools in every round (rounds interleaved), as median seconds with spread, records/s, peak RSS
# and the ratio to Logbook; the answers are printed side by side and checked against Logbook's.
#   a. warnings and errors: count(*) WHERE level >= 'warning'
#   b. per template: count, avg and the 99th percentile of the second argument (the ms)
#   c. one metadata key: count(*) WHERE user = 'u42'
# The records (QueryBench, Sources/QueryBench): 4 threads, 80% info "request {} took {} ms" with
# metadata user and duration_us, 15% warning "slow request {} took {} ms, budget {} ms" with user
# and route, 5% error "request {} failed after {} ms" with user, attempt and an attached error,
# written through a lossless ring into archive files, so that every record is kept.
# Usage: Benchmarks/query.sh [ROUNDS] [--quick]   (default 3 rounds of 10,000,000 records;
#        --quick: 1,000,000 records; RECORDS=N sets any other number)
# Run time on a 2-core VM: about 30 minutes at 10M records (jq is ~85% of it), 3 minutes with
# --quick. Disk: about 500 bytes per record under /var/tmp (5 GB at 10M), removed at the end.
# Needs lnav, jq and GNU time (/usr/bin/time): installed with apt-get when missing and root.
# On demand only, not in CI.
set -euo pipefail
cd "$(dirname "$0")"
rounds=3
records="${RECORDS:-10000000}"
for arg in "$@"; do
  case "$arg" in
    --quick) records=1000000 ;;
    [1-9]*) rounds="$arg" ;;
    *) echo "usage: $0 [ROUNDS] [--quick]   (RECORDS=N for another number of records)" >&2; exit 2 ;;
  esac
done

missing=()
command -v lnav > /dev/null || missing+=(lnav)
command -v jq > /dev/null || missing+=(jq)
[ -x /usr/bin/time ] || missing+=(time)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "installing ${missing[*]} with apt-get" >&2
    apt-get update -qq > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  else
    echo "query.sh needs ${missing[*]} (apt-get update && apt-get install ${missing[*]})" >&2; exit 1
  fi
fi

need=$(( records * 500 + (256 << 20) ))
free=$(( $(df --output=avail -k /var/tmp | tail -n 1) * 1024 ))
if [ "$free" -lt "$need" ]; then
  echo "query.sh needs about $(( need >> 20 )) MiB free under /var/tmp for $records records; $(( free >> 20 )) MiB are" >&2
  exit 1
fi

work="$(mktemp -d /var/tmp/logbook-query-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT

swift build -c release --product QueryBench > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
(cd .. && swift build -c release --product logbook --scratch-path /tmp/qbench-root) > "$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }
writer="$(swift build -c release --show-bin-path)/QueryBench"
export LOGBOOK="$(cd .. && swift build -c release --scratch-path /tmp/qbench-root --show-bin-path)/logbook"
export BUNDLE="$work/records.logbook" TEXT="$work/records.log" JSONL="$work/records.jsonl"
export LNAV_HOME="$work/home"  # lnav's HOME: its format below, its state, never the real home's

seconds_since() { awk -v start="$1" -v end="$(date +%s%N)" 'BEGIN { printf "%.1f", (end - start) / 1e9 }'; }

echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "Tools: $(lnav -V | head -n 1), $(jq --version), logbook $(git -C .. rev-parse --short HEAD 2>/dev/null || echo '?') (work tree as is)"
echo

start=$(date +%s%N)
"$writer" "$BUNDLE" "$records"
written="$(seconds_since "$start")"
kept="$("$LOGBOOK" query "$BUNDLE" "SELECT count(*) FROM records" | tail -n 1 | tr -d ' ')"
if [ "$kept" != "$records" ]; then
  echo "the bundle keeps $kept records of the $records written (\`logbook query B \"SELECT count(*) FROM records\"\`)" >&2
  exit 1
fi
start=$(date +%s%N); "$LOGBOOK" show "$BUNDLE" > "$TEXT"; shown="$(seconds_since "$start")"
start=$(date +%s%N); "$LOGBOOK" show --json "$BUNDLE" > "$JSONL"; shown_json="$(seconds_since "$start")"
lines=$(wc -l < "$TEXT")
[ "$lines" = "$records" ] && [ "$(wc -l < "$JSONL")" = "$records" ] \
  || { echo "logbook show gave $lines text lines and $(wc -l < "$JSONL") JSON lines for $records records" >&2; exit 1; }
size() { du -sh --apparent-size "$1" | cut -f 1; }
printf "%d records from 4 threads: bundle %s (QueryBench %ss), text %s (show %ss), JSON lines %s (show --json %ss);\n" \
  "$records" "$(size "$BUNDLE")" "$written" "$(size "$TEXT")" "$shown" "$(size "$JSONL")" "$shown_json"
echo "$(( records / 1000 )) records per user; $rounds interleaved rounds; whole processes, outputs to files."
echo

# lnav does not know the text lines of `logbook show` (it takes them as generic_log, without a
# body), so a format: time, level, logger, and the body (message, metadata key=value, error=...).
mkdir -p "$LNAV_HOME/.lnav/formats/installed"
cat > "$LNAV_HOME/.lnav/formats/installed/logbook_log.json" <<'EOF'
{
  "$schema": "https://lnav.org/schemas/format-v1.schema.json",
  "logbook_log": {
    "title": "Logbook text lines",
    "description": "Lines of `logbook show`: time, level, logger: message key=value... error=type: description",
    "regex": {
      "std": {
        "pattern": "^(?<timestamp>\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d+Z) (?<level>[a-z]+) +(?<logger>[^:]+): (?<body>.*)$"
      }
    },
    "level-field": "level",
    "level": {
      "trace": "^trace$", "debug": "^debug$", "info": "^info$", "notice": "^notice$",
      "warning": "^warning$", "error": "^error$", "critical": "^critical$"
    },
    "value": { "logger": { "kind": "string", "identifier": true } },
    "sample": [
      { "line": "2026-11-28T18:33:09.642713134Z notice   net: message" },
      { "line": "2026-11-28T18:34:59.864110825Z error    api: request 16 failed after 98 ms attempt=3 user=u16 error=QueryBench.UpstreamError: upstream answered 500" }
    ]
  }
}
EOF

# One command per question and tool, run by `bash -c` under /usr/bin/time (whose %M is the peak
# RSS of the largest process of a pipeline), with the address space capped at 3/4 of the memory so
# that a tool that holds everything fails instead of taking the machine down.
questions=(a b c)
tools=(logbook lnav jq)
describe() {
  case "$1" in
    a) echo "a. warnings and errors" ;;
    b) echo "b. per template: count, avg, p99 of arg2" ;;
    c) echo "c. metadata user = 'u42'" ;;
  esac
}
cell() {
  case "$1.$2" in
    a.logbook) "$LOGBOOK" query "$BUNDLE" "SELECT count(*) FROM records WHERE level >= 'warning'" ;;
    a.lnav) HOME="$LNAV_HOME" lnav -n -c ";SELECT count(*) FROM logbook_log WHERE log_level >= 'warning'" "$TEXT" ;;
    a.jq) jq -c 'select(.level=="warning" or .level=="error" or .level=="critical")' "$JSONL" | wc -l ;;
    b.logbook) "$LOGBOOK" query "$BUNDLE" "SELECT template, count(*), avg(arg2), percentile(arg2, 99) FROM records GROUP BY template" ;;
    # The template: the message (the body before its first ` key=`) with each number as {}; arg2:
    # the number before " ms" after "took" or "after"; p99 by nearest rank (window functions).
    # `|| ''` copies a string before regexp_replace: lnav 0.11.1's regexp_replace reads past the
    # end of the log_body or regexp_match value it is given and returns garbage groups without it.
    b.lnav) HOME="$LNAV_HOME" lnav -n -c ";WITH t AS (SELECT regexp_replace(regexp_match('^(.*?)(?: [a-z_]+=.*)?\$', log_body || '') || '', '\\d+', '{}') AS template, CAST(regexp_match('(?:took|after) (\\d+) ms', log_body || '') AS INTEGER) AS ms FROM logbook_log), r AS (SELECT template, ms, row_number() OVER (PARTITION BY template ORDER BY ms) AS rn, count(*) OVER (PARTITION BY template) AS n FROM t) SELECT template, count(*), avg(ms), min(CASE WHEN rn * 100 >= 99 * n THEN ms END) FROM r GROUP BY template" "$TEXT" ;;
    # JSON lines carry no template: the message with each number as {} again, arg2 from args.
    b.jq) jq -n -r '[inputs | {t: (.message | gsub("[0-9]+"; "{}")), v: .args[1].value}] | group_by(.t) | .[]
                    | (map(.v) | sort) as $v | [.[0].t, ($v | length), ($v | add / length), $v[(($v | length) * 99 + 99) / 100 | floor | . - 1]]
                    | @tsv' "$JSONL" ;;
    c.logbook) "$LOGBOOK" query "$BUNDLE" "SELECT count(*) FROM records WHERE json_extract(metadata, '\$.user') = 'u42'" ;;
    # In a text line the metadata is `key=value` after the message, sorted by key.
    c.lnav) HOME="$LNAV_HOME" lnav -n -c ";SELECT count(*) FROM logbook_log WHERE log_body REGEXP '(^| )user=u42( |\$)'" "$TEXT" ;;
    c.jq) jq -c 'select(.metadata.user=="u42")' "$JSONL" | wc -l ;;
  esac
}
export -f cell
export memory_cap=$(( $(awk '/MemTotal/ { print $2 }' /proc/meminfo) * 3 / 4 ))

for round in $(seq "$rounds"); do
  echo "round $round of $rounds" >&2
  for q in "${questions[@]}"; do
    for tool in "${tools[@]}"; do
      out="$work/out.$q.$tool"
      start=$(date +%s%N)
      if /usr/bin/time -o "$work/rss" -f %M bash -c 'ulimit -v "$memory_cap"; set -o pipefail; cell "$@"' _ "$q" "$tool" \
           > "$out.new" 2> "$work/err"; then
        end=$(date +%s%N)
        echo "$q $tool $(( end - start )) $(tail -n 1 "$work/rss")" >> "$work/times"
        # Each round must give the answer of the first.
        if [ -f "$out" ] && ! cmp -s "$out" "$out.new"; then echo "$q $tool" >> "$work/unstable"; fi
        mv "$out.new" "$out"
      else
        echo "$q $tool failed in round $round:" >&2
        grep -v '^Command exited\|^Command terminated' "$work/err" | tail -n 5 >&2 || true
        echo "$q $tool" >> "$work/failed"
        echo "failed" > "$out"
      fi
    done
  done
done

# The answers as comparable lines: a number (a, c), or per template `template|count|avg|p99` (b),
# from Logbook's table, lnav's table and jq's TSV: the last three fields numbers, the template the
# fields before them.
answer() {
  if [ "$1" = b ]; then
    awk '{ if (NF >= 4 && $(NF-2) ~ /^[0-9]+$/ && $(NF-1) ~ /^[0-9.e+-]+$/ && $NF ~ /^[0-9.e+-]+$/) {
             t = $1; for (i = 2; i <= NF - 3; i++) t = t " " $i
             printf "%s|%s|%.12g|%s\n", t, $(NF-2), $(NF-1), $NF } }' "$work/out.$1.$2" | sort
  else
    awk 'NF { last = $0 } END { gsub(/ /, "", last); print last }' "$work/out.$1.$2"
  fi
}
# Logbook's percentile comes from a histogram of relative accuracy 2^-11 (LogbookStatistics), the
# others sort: a p99 within 0.1% is the same answer; counts equal, averages within 1e-9 relative.
compare() {
  if [ "$1" != b ]; then
    [ "$(answer "$1" logbook)" = "$(answer "$1" "$2")" ] && echo "same" || echo "DIFFERENT"
    return
  fi
  awk -F '|' 'NR == FNR { want[$1] = $0; n++; next }
    { if (!($1 in want)) { bad = 1; next }
      split(want[$1], w, "|"); seen++
      if ($2 != w[2]) bad = 1
      if ($3 - w[3] > 1e-9 * w[3] || w[3] - $3 > 1e-9 * w[3]) bad = 1
      if ($4 != w[4]) { near = 1; if ($4 - w[4] > 0.001 * w[4] || w[4] - $4 > 0.001 * w[4]) bad = 1 } }
    END { if (bad || seen != n || n == 0) print "DIFFERENT"; else if (near) print "same (p99 within 0.1%: Logbook histogram)"; else print "same" }' \
    <(answer b logbook) <(answer b "$2")
}

echo "| question | tool | median s | spread s | records/s | peak RSS MiB | ratio to Logbook |"
echo "|---|---|---:|---:|---:|---:|---:|"
for q in "${questions[@]}"; do
  base=$(awk -v q="$q" '$1 == q && $2 == "logbook" { print $3 }' "$work/times" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  for tool in "${tools[@]}"; do
    awk -v q="$q" -v t="$tool" '$1 == q && $2 == t { print $3, $4 }' "$work/times" | sort -n > "$work/row"
    n=$(wc -l < "$work/row")
    if [ "$n" = 0 ]; then
      echo "| $(describe "$q") | $tool | failed | | | | |"
      continue
    fi
    median=$(sed -n "$(( (n + 1) / 2 ))p" "$work/row" | cut -d ' ' -f 1)
    rss=$(sort -k 2 -n "$work/row" | tail -n 1 | cut -d ' ' -f 2)
    awk -v name="$(describe "$q")" -v tool="$tool" -v m="$median" -v lo="$(head -n 1 "$work/row" | cut -d ' ' -f 1)" \
        -v hi="$(tail -n 1 "$work/row" | cut -d ' ' -f 1)" -v r="$records" -v rss="$rss" -v base="${base:-0}" -v n="$n" -v rounds="$rounds" \
      'BEGIN { rate = r / (m / 1e9)
               printf "| %s | %s%s | %.2f | %.2f–%.2f | %s | %.0f | %s |\n", name, tool, (n < rounds ? " (" n " of " rounds " rounds)" : ""),
                 m / 1e9, lo / 1e9, hi / 1e9, (rate >= 1e6 ? sprintf("%.2f M", rate / 1e6) : sprintf("%.0f k", rate / 1e3)),
                 rss / 1024, (base > 0 ? sprintf("%.1f×", m / base) : "–") }'
  done
done

echo
echo "Answers (last round; each tool's against Logbook's):"
for q in "${questions[@]}"; do
  echo
  echo "$(describe "$q"):"
  for tool in "${tools[@]}"; do
    verdict="$([ "$tool" = logbook ] && echo "(reference)" || compare "$q" "$tool")"
    grep -qx "failed" "$work/out.$q.$tool" && verdict="FAILED"
    if [ "$q" = b ]; then
      echo "  $tool: $verdict"
      answer "$q" "$tool" | awk -F '|' '{ printf "    %-42s %10s  avg %-12.4f p99 %s\n", $1, $2, $3, $4 }'
    else
      printf "  %-8s %-12s %s\n" "$tool:" "$(answer "$q" "$tool")" "$verdict"
    fi
  done
done
if [ -f "$work/unstable" ]; then echo; echo "Answers that changed between rounds: $(sort -u "$work/unstable" | tr '\n' ' ')"; fi
if [ -f "$work/failed" ]; then echo; echo "Failed runs: $(sort "$work/failed" | uniq -c | tr '\n' ' ')"; fi
echo
echo "Memory cap for each command: $(( memory_cap >> 20 )) GiB of address space (ulimit -v)."
