#!/usr/bin/env bash
# GPU check for the CUDA backend, for a machine with an NVIDIA GPU (written for one H200; about
# 8 minutes there). Builds Loom with CUDA, runs the conformance suite on libloom_cuda.so, then
# `loom bench --backend cuda` on synthetic Llama-3-8B-shaped models (Q4_0 and BF16) and writes JSON
# under $OUT (default ./gpu-results):
#   conformance.json        every case vs the CPU reference (default config)
#   conformance-gemm.json   MATMUL/GET_ROWS cases again with {"gemm_min_tokens": 1}, so the cuBLAS
#                           path is compared too (fp16 activations: float-weight cases may exceed
#                           their 1e-4 tolerance; quantized ones must pass)
#   bench-<type>-decode.json, bench-<type>-prefill512.json, bench-<type>-prefill4096.json
#   summary.json            decode tokens/s at batch 1/8/64/256 with the fraction of HBM bandwidth,
#                           prefill tokens/s at 512/4096 with the fraction of peak dense FLOP/s
# Cost: the synthetic models are generated on the spot into $MODEL_DIR (default /tmp/loom-gpu-check):
# about 4.5 GB (Q4_0) and 16 GB (BF16) of disk, reused when present. SKIP_BF16=1 skips the BF16 one.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-${1:-./gpu-results}}
BUILD=${BUILD:-$ROOT/build-gpu}
MODEL_DIR=${MODEL_DIR:-/tmp/loom-gpu-check}
mkdir -p "$OUT" "$MODEL_DIR"
OUT=$(cd "$OUT" && pwd)
log() { echo "[gpu-check $(date +%H:%M:%S)] $*" | tee -a "$OUT/gpu-check.log"; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv" || true
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo unknown)

# ---- build --------------------------------------------------------------------------------------------
log "configure + build (Release, CUDA on, -j$(nproc))"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_PLUGIN_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$NVCC" -DLOOM_BUILD_TESTS=OFF > "$OUT/configure.log" 2>&1
cmake --build "$BUILD" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
LOOM="$BUILD/bin/loom"
PLUGINS="$BUILD/lib/loom/plugins"
export LOOM_REFERENCE_BACKEND="$PLUGINS/libloom_cpu.so"
"$LOOM" plugins > "$OUT/plugins.txt" 2>&1 || true

# ---- conformance ------------------------------------------------------------------------------------
log "conformance (default config)"
set +e
timeout 300 "$LOOM" conformance --plugin "$PLUGINS/libloom_cuda.so" --json "$OUT/conformance.json" \
  --junit "$OUT/conformance.xml" > "$OUT/conformance.txt" 2>&1
CONF_RC=$?
log "conformance exit $CONF_RC: $(tail -1 "$OUT/conformance.txt")"
timeout 120 "$LOOM" conformance --plugin "$PLUGINS/libloom_cuda.so" --plugin-config '{"gemm_min_tokens": 1}' \
  --filter matmul --json "$OUT/conformance-gemm.json" > "$OUT/conformance-gemm.txt" 2>&1
log "conformance (cuBLAS path) exit $?: $(tail -1 "$OUT/conformance-gemm.txt")"
set -e

# ---- synthetic Llama-3-8B-shaped models ---------------------------------------------------------------
SHAPE=(--arch llama --layers 32 --dim 4096 --heads 32 --kv-heads 8 --ff 14336 --vocab 128256 --ctx 8192)
TYPES=(Q4_0)
[ "${SKIP_BF16:-0}" = 1 ] || TYPES+=(BF16)
for type in "${TYPES[@]}"; do
  model="$MODEL_DIR/llama3-8b-shape-$type.gguf"
  if [ ! -s "$model" ]; then
    log "synthesising $model"
    timeout 600 "$LOOM" gguf synth "${SHAPE[@]}" --type "$type" -o "$model" > "$OUT/synth-$type.log" 2>&1
  fi
done

# ---- bench -------------------------------------------------------------------------------------------
bench() {  # type name args...
  local type=$1 name=$2
  shift 2
  log "bench $type $name"
  set +e
  timeout 240 "$LOOM" bench --model "$MODEL_DIR/llama3-8b-shape-$type.gguf" --backend cuda --reference-tokens 0 \
    --json "$OUT/bench-$type-$name.json" "$@" > "$OUT/bench-$type-$name.txt" 2>&1
  local rc=$?
  set -e
  [ $rc = 0 ] || log "bench $type $name failed (exit $rc): $(tail -3 "$OUT/bench-$type-$name.txt" | tr '\n' ' ')"
}
for type in "${TYPES[@]}"; do
  bench "$type" decode --pp 16 --tg 64 --batch 1,8,64,256
  bench "$type" prefill512 --pp 512 --tg 2 --batch 1
  bench "$type" prefill4096 --pp 4096 --tg 2 --batch 1
done

# ---- summary: fractions of the GPU's peaks (bench's own fraction is against host RAM bandwidth) -------
python3 - "$OUT" "$GPU_NAME" "$CONF_RC" <<'PY' || log "summary failed (python3 missing?)"
import json, os, sys
out, gpu, conf_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
# Peak HBM bandwidth (GB/s) and dense BF16/FP16 tensor FLOP/s (TFLOP/s) from the vendors' data sheets;
# override with PEAK_BW_GBS / PEAK_TFLOPS.
peaks = {"H200": (4800, 989), "H100": (3350, 989), "A100": (2039, 312), "L40S": (864, 362), "RTX 4090": (1008, 165)}
bw, tf = next((v for k, v in peaks.items() if k in gpu), (0, 0))
bw = float(os.environ.get("PEAK_BW_GBS", bw)); tf = float(os.environ.get("PEAK_TFLOPS", tf))
L, D, KV, FF, V = 32, 4096, 1024, 14336, 128256
params = L * (D * D * 2 + 2 * D * KV + 3 * D * FF) + V * D  # matmul weights per token (output head included)
summary = {"gpu": gpu, "peak_bandwidth_gb_s": bw, "peak_tflops": tf, "matmul_params": params,
           "conformance_exit": conf_rc, "models": {}}
for t in ("Q4_0", "BF16"):
    def load(name):
        p = os.path.join(out, f"bench-{t}-{name}.json")
        return json.load(open(p)) if os.path.exists(p) else None
    dec, pre = load("decode"), {n: load(f"prefill{n}") for n in (512, 4096)}
    if dec is None and not any(pre.values()):
        continue
    m = {}
    if dec:
        wb = dec["weight_bytes_per_token"]
        m["weight_bytes_per_step"] = wb
        m["decode"] = [{"batch": b["batch"], "tokens_per_s": b["decode_tokens_per_s"],
                        # a decode step reads every weight once, whatever the batch
                        "hbm_fraction": (b["decode_tokens_per_s"] / b["batch"]) * wb / (bw * 1e9) if bw else None}
                       for b in dec["batched_decode"]]
    m["prefill"] = [{"tokens": n, "tokens_per_s": p["pp"]["tokens_per_s"],
                     "flops_fraction": p["pp"]["tokens_per_s"] * 2 * params / (tf * 1e12) if tf else None}
                    for n, p in pre.items() if p]
    summary["models"][t] = m
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
log "done; results in $OUT"
exit "$CONF_RC"
