#!/usr/bin/env bash
# Start N `loom serve` replicas and vllm-router in front of them, all on 127.0.0.1, for trying out
# scale-out on one machine (docs/scale-out.md explains a real multi-machine deployment).
#
#   scripts/cluster.sh [--replicas N] [--model GGUF] [--policy kv_aware|cache_aware|round_robin|...]
#                      [--router-port P] [--worker-port P] [--event-port P] [--metrics-port P] [--config loom.toml]
#                      [--loom build/bin/loom] [--block-size 16]
#
# Replica i listens on worker-port + i and publishes its prefix-cache events on event-port + 2i
# (replay on event-port + 2i + 1), which the router subscribes to with --policy kv_aware. The script
# prints "cluster: ready <router url>" once the router answers, and stops everything on Ctrl-C or
# SIGTERM. The router's Prometheus metrics listen on metrics-port (default router-port + 1; the router's
# own default, 29000, is one port for every router on the machine). Logs go to a temporary folder it
# prints. Needs `pip install vllm-router` (scripts/setup.sh).
set -euo pipefail

replicas=3
model=""
policy=kv_aware
router_port=8000
worker_port=8100
event_port=5600
metrics_port=""
config=""
block_size=16
here="$(cd "$(dirname "$0")/.." && pwd)"
loom="$here/build/bin/loom"

while (($#)); do
  case "$1" in
    --replicas) replicas=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --router-port) router_port=$2; shift 2 ;;
    --worker-port) worker_port=$2; shift 2 ;;
    --event-port) event_port=$2; shift 2 ;;
    --metrics-port) metrics_port=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --loom) loom=$2; shift 2 ;;
    --block-size) block_size=$2; shift 2 ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "cluster: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v vllm-router >/dev/null || { echo "cluster: vllm-router not found (pip install vllm-router)" >&2; exit 3; }
[[ -x "$loom" ]] || { echo "cluster: $loom is not built (cmake --build build)" >&2; exit 3; }

logs=$(mktemp -d -t loom-cluster-XXXXXX)
pids=()
stop() {
  trap - INT TERM EXIT
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

worker_urls=()
router_args=()
for ((i = 0; i < replicas; i++)); do
  port=$((worker_port + i))
  url="http://127.0.0.1:$port"
  cfg="$logs/replica-$i.toml"
  { [[ -n "$config" ]] && cat "$config"; echo; } > "$cfg"
  # Every replica publishes its KV events (a router can subscribe later); kv_aware subscribes now.
  pub=$((event_port + 2 * i))
  cat >> "$cfg" <<EOF

[server.kv_events]
enabled = true
mode = "bind"
endpoint = "tcp://127.0.0.1:$pub"
replay_endpoint = "tcp://127.0.0.1:$((pub + 1))"
EOF
  if [[ "$policy" == kv_aware ]]; then
    router_args+=(--kv-event-source "$url=tcp://127.0.0.1:$pub" --kv-event-replay-source "$url=tcp://127.0.0.1:$((pub + 1))")
  fi
  model_args=()
  [[ -n "$model" ]] && model_args=(--model "$model")
  "$loom" serve --config "$cfg" "${model_args[@]}" --host 127.0.0.1 --port "$port" \
    > "$logs/replica-$i.out" 2> "$logs/replica-$i.err" &
  pids+=($!)
  worker_urls+=("$url")
done

# Each replica prints its address once it serves.
for ((i = 0; i < replicas; i++)); do
  for _ in $(seq 600); do
    grep -q "listening on" "$logs/replica-$i.out" 2>/dev/null && break
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "cluster: replica $i failed:" >&2; cat "$logs/replica-$i.err" >&2; exit 1; }
    sleep 0.1
  done
done
echo "cluster: ${replicas} replicas up (logs in $logs)"

if [[ "$policy" == kv_aware ]]; then
  router_args+=(--kv-event-block-size "$block_size" --kv-event-model loom)
fi
# Health checks every 2 s, one failure marks a replica down and one success brings it back, so a
# restarted replica rejoins within seconds (the router's defaults: 60 s, 3 and 2).
vllm-router --host 127.0.0.1 --port "$router_port" --prometheus-host 127.0.0.1 --prometheus-port "${metrics_port:-$((router_port + 1))}" --worker-urls "${worker_urls[@]}" --policy "$policy" \
  --worker-startup-check-interval 1 --health-check-interval-secs 2 --health-failure-threshold 1 \
  --health-success-threshold 1 --cb-timeout-duration-secs 2 "${router_args[@]}" > "$logs/router.out" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  if python3 - "$router_port" <<'PY' 2>/dev/null; then break; fi
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2).read()
PY
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "cluster: vllm-router failed:" >&2; tail -20 "$logs/router.out" >&2; exit 1; }
  sleep 0.1
done
echo "cluster: ready http://127.0.0.1:$router_port (policy $policy)"
# A replica may die and be restarted by hand (the router retries elsewhere meanwhile); the
# cluster stops when the router does.
wait "${pids[-1]}" || true
echo "cluster: the router exited; stopping" >&2
