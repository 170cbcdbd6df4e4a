#!/usr/bin/env bash
# `loom plan` (issue 35, item 4): the layer groups and the sequences that fit, read from a synthetic
# gemma3 without loading it; bad options are refused by name.
# usage: test_plan.sh LOOM
set -euo pipefail
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 6 layers: 5 local with a 64-token window, 1 global; 2 KV heads of 16 (dim 64 / 4 heads).
"$loom" gguf synth --arch gemma3 --layers 6 --dim 64 --heads 4 --kv-heads 2 --ff 128 --vocab 512 --sliding-window 64 \
  -o "$tmp/g3.gguf" >/dev/null
out=$("$loom" plan --model "$tmp/g3.gguf" --memory 1MiB --kv-type f16 --ctx 1000)
echo "$out"
grep -Eq '^full attention +1 +- +128 B$' <<<"$out" || fail "the full-attention group (1 layer, 2x2x16x2 = 128 B per token)"
grep -Eq '^sliding window +5 +64 +640 B$' <<<"$out" || fail "the sliding group (5 layers, window 64, 640 B per token)"
grep -Eq '^all layers +768 B$' <<<"$out" || fail "768 B per token over all layers"
# 1000 tokens (1008 in blocks of 16): 1 MiB / (768 x 1008) = 1 sequence as allocated; windowed, the
# sliding layers keep 64 + 16 tokens: 1 MiB / (128 x 1008 + 640 x 80) = 5.
grep -Eq '^1000 tokens +1 +5( |$)' <<<"$out" || fail "1000-token sequences: 1 as allocated, 5 windowed"

if err=$("$loom" plan --model "$tmp/g3.gguf" --ctx zero 2>&1); then fail "--ctx zero accepted"; fi
grep -q -- "--ctx must be a positive number" <<<"$err" || fail "--ctx zero: $err"
if err=$("$loom" plan --model "$tmp/g3.gguf" --kv-type q3 2>&1); then fail "--kv-type q3 accepted"; fi
grep -q -- "--kv-type must be" <<<"$err" || fail "--kv-type q3: $err"
if err=$("$loom" plan --model "$tmp/missing.gguf" 2>&1); then fail "a missing model accepted"; fi
grep -q "missing.gguf" <<<"$err" || fail "a missing model: $err"

((failures == 0)) && echo PASS
exit $((failures > 0))
