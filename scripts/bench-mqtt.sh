#!/usr/bin/env bash
# MQTT ingest benchmark (not a test, not in CI): QoS 1 from a Mosquitto broker into the
# release `weir` (mqtt source → WAL, sync = "always" → blackhole), next to
# `mosquitto_sub -q 1 -c` writing to a file and a minimal durable consumer (`ref`), on
# the same broker in the same run.
#
#   ./scripts/bench-mqtt.sh [--markdown] [N] [RUNS]
#       # N messages per case (default 100000), RUNS runs of each case (default 5),
#       # rotating consumers; --markdown: one table row per case (medians of its runs,
#       # the ratios' ranges in brackets) on stdout, the usual report on stderr
#
# Cases: the broker's window (max_inflight_messages) at 20 (Mosquitto's default) and at
# 1000, each with 100 B and 1 KiB payloads (WEIR_BENCH_WINDOWS and WEIR_BENCH_SIZES pick
# others); max_queued_messages 0 (no limit: the default
# 1000 would drop what is queued behind a full window). weir's expected_broker_window is
# set to the broker's window.
#
# Method, the same for every consumer: a fresh broker per case; weir, mosquitto_sub and
# ref each connect once with a persistent session (clean_session = false) and subscribe,
# then go offline; N QoS 1 messages are published (every one acked by the broker), so
# the broker queues N for each session; then each consumer is started alone and timed
# from its start until it has acknowledged N messages (mosquitto_sub: exits after N
# with -C; ref: times itself from its CONNECT to its last PUBACK, leaving out Python's
# start-up; weir: /status sources.mq.mqtt.acked reaches N,
# polled every 5 ms by one process over a kept connection).
# Printed per case: messages/s and payload MB/s of each, the ratio weir / mosquitto_sub,
# weir's CPU seconds (utime + stime from /proc) and peak RSS (VmHWM), the zero-loss check
# (mosquitto_sub's line count, weir's received, the blackhole's records and ref's
# received, each = N, and ref's distinct sequence numbers = N),
# weir's measured mean ack latency (PUBLISH received → PUBACK sent, from /status) and
# Little's law: window ÷ throughput = the mean time a message spends in flight, which
# at window 20 is what bounds the rate (throughput = window ÷ latency).
#
# The ceiling: with acks withheld until durable, at most `window` messages are in
# flight per (fsync + broker round trip), so no consumer that acks only durable
# messages can pass window ÷ (fsync p50 + round trip). fsync p50 is the WAL's own
# (/status wal.fsync_p50_us, this run); the round trip is measured on the same broker
# right after weir's run: 1000 QoS 1 PUBLISH → PUBACK exchanges one at a time, mean.
# weir ÷ ceiling says how close weir is to what durability allows. That ceiling counts
# none of the broker's own time to send a window (about 7 µs per message with
# mosquitto_sub here), so a second one adds it: window ÷ (fsync p50 + window ÷ mosquitto_sub's rate),
# the rate of mosquitto_sub if it fsynced once per window (`÷sub+fs`).
#
# Both ceilings are computed. A third consumer measures what a durable consumer reaches:
# `ref` (scripts/mqtt-bench-client.py) is the simplest one there is, one thread that
# reads what the socket holds, writes it to a file, fdatasyncs, then sends those
# messages' PUBACKs in one write. It has no thread hand-overs, no WAL framing and no
# bounds, so weir ÷ ref is weir's own cost, and ref ÷ ceiling is how much of the
# computed ceiling this broker and disk let any consumer that acks only durable messages
# reach. `ref m/fs` is its messages per fdatasync. The three consumers drain in rotating
# order. Each case runs RUNS times; a summary line per case gives the medians of the
# runs' ratios.
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
n="${1:-100000}"
runs="${2:-5}"
command -v jq >/dev/null || apt-get install -y -qq jq >/dev/null
if ! command -v mosquitto_pub >/dev/null || ! command -v mosquitto_sub >/dev/null; then
  apt-get install -y -qq mosquitto-clients >/dev/null
fi
broker_bin="$(scripts/install-mosquitto.sh)"
# WEIR_BENCH_BROKER_NODELAY=1 sets Mosquitto's set_tcp_nodelay (off by default: the
# broker's Nagle algorithm then holds back the rest of a refilled window until the
# client's next write acknowledges its first segment).
broker_nodelay=
if [ "${WEIR_BENCH_BROKER_NODELAY:-}" = 1 ]; then broker_nodelay=$'set_tcp_nodelay true\n'; fi
# WEIR_BENCH_BIN runs a given build instead (to compare two builds in turn).
bin="${WEIR_BENCH_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release -q -p weir
  bin="${CARGO_TARGET_DIR:-target}/release/weir"
fi
work="$(mktemp -d)"
broker_pid=
weir_pid=
# (`kill 0` would signal the whole process group: only kill a pid that is set.)
cleanup() {
  for p in "$weir_pid" "$broker_pid"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
status_port=19474
hz=$(getconf CLK_TCK)
now() { date +%s.%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mqtt_field() { # FIELD → sources.mq.mqtt.FIELD from /status (empty when not answering)
  curl -fsS "http://127.0.0.1:$status_port/status" 2>/dev/null | jq -r ".sources.mq.mqtt.$1" 2>/dev/null || true
}
sink_records() {
  curl -fsS "http://127.0.0.1:$status_port/status" | jq -r '.sinks.null.records'
}
wait_until() { # SECONDS CONDITION… → polls every 20 ms
  local deadline
  deadline=$(echo "$(now) + $1" | bc)
  shift
  until "$@"; do
    if (($(echo "$(now) > $deadline" | bc))); then
      echo "timed out: $*" >&2
      return 1
    fi
    sleep 0.02
  done
}
# wait_acked N: returns once /status says weir acked N messages. One process polling
# every 5 ms over a kept connection: a curl and a jq per poll would take a sizeable share
# of a core from weir on a 2-core machine, while mosquitto_sub is not polled at all.
wait_acked() {
  python3 - "$status_port" "$1" <<'PY'
import http.client, json, sys, time

port, n = int(sys.argv[1]), int(sys.argv[2])
deadline, conn = time.monotonic() + 600, None
while time.monotonic() < deadline:
    try:
        conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/status")
        acked = json.loads(conn.getresponse().read())["sources"]["mq"]["mqtt"]["acked"]
        if acked is not None and acked >= n:
            sys.exit(0)
    except (OSError, http.client.HTTPException, KeyError, ValueError):
        conn = None
    time.sleep(0.005)
sys.exit("timed out waiting for weir to ack %d" % n)
PY
}
connected() { [ "$(mqtt_field connected)" = true ]; }
stop_weir() {
  kill -TERM "$weir_pid"
  wait "$weir_pid" 2>/dev/null || true
  weir_pid=
}

# The publisher, the round-trip probe and `ref` (see scripts/mqtt-bench-client.py).
client() { python3 scripts/mqtt-bench-client.py "$@"; }
publish() { client publish "$broker_port" "$1" "$2"; } # N SIZE
# rtt: the mean QoS 1 PUBLISH → PUBACK round trip on the broker, in ms.
rtt() { client rtt "$broker_port"; }

start_broker() { # WINDOW
  local port
  port=$(free_port)
  cat >"$work/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_inflight_messages $1
max_queued_messages 0
max_queued_bytes 0
${broker_nodelay}log_dest stderr
log_type error
log_type warning
CONF
  "$broker_bin" -c "$work/mosquitto.conf" 2>"$work/mosquitto.log" &
  broker_pid=$!
  broker_port=$port
  wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
}

weir_config() { # WINDOW → the config file
  cat >"$work/weir.toml" <<CONF
[runtime]
data_dir = "$work/data"
status_addr = "127.0.0.1:$status_port"
shutdown_timeout = "5s"

[wal]
max_disk = "2 GiB"
segment_bytes = "64 MiB"
on_full = "block"

[sources.mq]
type = "mqtt"
url = "mqtt://127.0.0.1:$broker_port"
client_id = "weir-bench"
topics = ["bench/#"]
qos = 1
keepalive = "30s"
expected_broker_window = $1
max_message_bytes = "16 KiB"

[sinks.null]
type = "blackhole"
inputs = ["mq"]
CONF
}

start_weir() {
  "$bin" run "$work/weir.toml" 2>"$work/weir.log" &
  weir_pid=$!
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# md_figure FILE FORMAT: the median of a case's runs; md_ratio FILE: the median with the
# range in brackets, as docs/benchmarks.md shows them.
md_figure() { printf "$2" "$(median <"$1")"; }
md_ratio() { sort -g "$1" | awk -v m="$(median <"$1")" 'NR == 1 {lo = $1} {hi = $1}
  END {printf (lo == hi ? "%.2f" : "%.2f (%.2f–%.2f)"), m, lo, hi}'; }

md_intro
md "$n QoS 1 messages per case, $runs runs per case in rotating order; each figure is the median of the case's runs." ""
md_row "broker window" payload "weir msg/s" "÷ mosquitto_sub" "weir CPU" "fsync p50" "round trip" "msg/fsync" \
  "÷ ceiling" "÷ sub+fsync" "ref msg/s" "weir ÷ ref" "ref ÷ ceiling"
md_row ---: ---: ---: ---: ---: ---: ---: ---: ---: ---: ---: ---: ---:

printf '%-7s %-6s %-4s %12s %9s %12s %7s %8s %9s %10s %11s %9s %8s %10s %8s %8s %9s %10s %6s %8s %9s %s\n' \
  window size run "weir msg/s" "weir MB/s" "sub msg/s" ratio "weir CPU" "peak RSS" \
  "ack lat ms" "Little ms" "fsync ms" "rtt ms" "ceiling/s" "÷ceil" "÷sub+fs" "msg/fsync" \
  "ref msg/s" "÷ref" "ref÷ceil" "ref m/fs" "zero loss (sub, weir received, sink, ref)"
for window in ${WEIR_BENCH_WINDOWS:-20 1000}; do
  for size in ${WEIR_BENCH_SIZES:-100 1024}; do
    : >"$work/ratios"
    : >"$work/ceilings"
    : >"$work/sub_ceilings"
    : >"$work/refs"
    : >"$work/ref_ceilings"
    for f in weir_rates cpus fsync_ms rtts per_fsync ref_rates; do : >"$work/$f"; done
    for run in $(seq 1 "$runs"); do
      rm -rf "$work/data"
      start_broker "$window"
      weir_config "$window"

      # Both sessions exist (persistent, subscribed) before anything is published.
      start_weir
      wait_until 20 connected
      sleep 0.3 # the SUBACK follows the CONNACK
      stop_weir
      mosquitto_sub -h 127.0.0.1 -p "$broker_port" -q 1 -c -i bench-sub -t 'bench/#' -E
      client setup "$broker_port" bench-ref

      publish "$n" "$size"

      # Rotate which consumer drains first, so that drift hits all alike.
      case $((run % 3)) in
        0) order="weir sub ref" ;;
        1) order="sub ref weir" ;;
        *) order="ref weir sub" ;;
      esac
      for consumer in $order; do
        if [ "$consumer" = ref ]; then
          # The yardstick: one thread, read → write + fdatasync → acks (no hand-overs).
          # Timed by itself from its CONNECT (without the interpreter's start-up).
          read -r ref_received ref_distinct ref_fsyncs _ ref_secs < <(client drain \
            "$broker_port" bench-ref "$n" "$work/ref.out")
        elif [ "$consumer" = sub ]; then
          # mosquitto_sub drains its queue to a file.
          t0=$(now)
          TIMEFORMAT='%U %S'
          { time mosquitto_sub -h 127.0.0.1 -p "$broker_port" -q 1 -c -i bench-sub -t 'bench/#' \
            -C "$n" >"$work/sub.out"; } 2>"$work/sub.time"
          t1=$(now)
          sub_secs=$(echo "$t1 - $t0" | bc -l)
          sub_lines=$(wc -l <"$work/sub.out")
        else
          # weir drains its queue into the WAL (each unit fsynced before its acks).
          t0=$(now)
          start_weir
          wait_acked "$n"
          t1=$(now)
          weir_secs=$(echo "$t1 - $t0" | bc -l)
          ticks=$(awk '{print $14 + $15}' "/proc/$weir_pid/stat")
          hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$weir_pid/status")
          received=$(mqtt_field received)
          latency=$(mqtt_field ack_latency_ms_mean)
          wal=$(curl -fsS "http://127.0.0.1:$status_port/status" | jq -c .wal)
          fsync_us=$(jq -r .fsync_p50_us <<<"$wal")
          fsyncs=$(jq -r .fsyncs <<<"$wal")
          wait_until 60 bash -c "[ \"\$(curl -fsS http://127.0.0.1:$status_port/status | jq .sinks.null.records)\" -ge $n ]" || true
          records=$(sink_records)
          stop_weir
        fi
      done
      rtt_ms=$(rtt)
      kill "$broker_pid" && wait "$broker_pid" 2>/dev/null || true
      broker_pid=

      weir_rate=$(echo "$n / $weir_secs" | bc -l)
      sub_rate=$(echo "$n / $sub_secs" | bc -l)
      ratio=$(echo "$weir_rate / $sub_rate" | bc -l)
      ceiling=$(echo "$window / (($fsync_us / 1000 + $rtt_ms) / 1000)" | bc -l)
      of_ceiling=$(echo "$weir_rate / $ceiling" | bc -l)
      sub_ceiling=$(echo "$window / ($fsync_us / 1000000 + $window / $sub_rate)" | bc -l)
      of_sub_ceiling=$(echo "$weir_rate / $sub_ceiling" | bc -l)
      ref_rate=$(echo "$n / $ref_secs" | bc -l)
      of_ref=$(echo "$weir_rate / $ref_rate" | bc -l)
      echo "$of_ref" >>"$work/refs"
      echo "$(echo "$ref_rate / $ceiling" | bc -l)" >>"$work/ref_ceilings"
      echo "$of_sub_ceiling" >>"$work/sub_ceilings"
      echo "$ratio" >>"$work/ratios"
      echo "$of_ceiling" >>"$work/ceilings"
      echo "$weir_rate" >>"$work/weir_rates"
      echo "$ticks / $hz" | bc -l >>"$work/cpus"
      echo "$fsync_us / 1000" | bc -l >>"$work/fsync_ms"
      echo "$rtt_ms" >>"$work/rtts"
      echo "$n / $fsyncs" | bc -l >>"$work/per_fsync"
      echo "$ref_rate" >>"$work/ref_rates"
      loss="ok"
      if [ "$sub_lines" -ne "$n" ] || [ "$received" -ne "$n" ] || [ "$records" -ne "$n" ] ||
        [ "$ref_received" -ne "$n" ] || [ "$ref_distinct" -ne "$n" ]; then
        loss="MISMATCH"
      fi
      printf '%-7s %-6s %-4s %12.0f %9.1f %12.0f %7.2f %7.2fs %6d MiB %10.2f %11.2f %9.3f %8.3f %10.0f %8.2f %8.2f %9.1f %10.0f %6.2f %8.2f %9.1f %s\n' \
        "$window" "$size" "$run" "$weir_rate" "$(echo "$weir_rate * $size / 1000000" | bc -l)" \
        "$sub_rate" "$ratio" "$(echo "$ticks / $hz" | bc -l)" \
        "$((hwm / 1024))" "$latency" "$(echo "1000 * $window / $weir_rate" | bc -l)" \
        "$(echo "$fsync_us / 1000" | bc -l)" "$rtt_ms" "$ceiling" "$of_ceiling" "$of_sub_ceiling" \
        "$(echo "$n / $fsyncs" | bc -l)" "$ref_rate" "$of_ref" "$(echo "$ref_rate / $ceiling" | bc -l)" \
        "$(echo "$n / $ref_fsyncs" | bc -l)" \
        "$loss ($sub_lines, $received, $records, $ref_received of $n)"
    done
    printf '%-7s %-6s %-4s median of %s runs: weir ÷ mosquitto_sub %.2f, weir ÷ ceiling %.2f, weir ÷ (sub + fsync) %.2f, weir ÷ ref %.2f, ref ÷ ceiling %.2f\n' \
      "$window" "$size" "all" "$runs" "$(median <"$work/ratios")" "$(median <"$work/ceilings")" "$(median <"$work/sub_ceilings")" \
      "$(median <"$work/refs")" "$(median <"$work/ref_ceilings")"
    md_row "$window" "$([ "$size" = 1024 ] && echo "1 KiB" || echo "$size B")" \
      "$(md_figure "$work/weir_rates" %.0f)" "$(md_ratio "$work/ratios")" \
      "$(md_figure "$work/cpus" "%.2f s")" "$(md_figure "$work/fsync_ms" "%.2f ms")" \
      "$(md_figure "$work/rtts" "%.2f ms")" "$(md_figure "$work/per_fsync" %.1f)" \
      "$(md_ratio "$work/ceilings")" "$(md_ratio "$work/sub_ceilings")" \
      "$(md_figure "$work/ref_rates" %.0f)" "$(md_ratio "$work/refs")" "$(md_ratio "$work/ref_ceilings")"
  done
done
