#!/usr/bin/env bash
# `loom plan` (issue 35): the layer groups, the window rings and the sequences that fit, read from a synthetic
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
  --ctx 4096 -o "$tmp/g3.gguf" >/dev/null
out=$("$loom" plan --model "$tmp/g3.gguf" --memory 4MiB --kv-type f16 --ctx 1000)
echo "$out"
grep -Eq '^full attention +1 +- +128 B$' <<<"$out" || fail "the full-attention group (1 layer, 2x2x16x2 = 128 B per token)"
grep -Eq '^sliding window +5 +64 +640 B$' <<<"$out" || fail "the sliding group (5 layers, window 64, 640 B per token)"
grep -Eq '^all layers +768 B$' <<<"$out" || fail "768 B per token over all layers"
# Window rings of 64 + 511 tokens (576 in blocks of 16, 640 x 576 B), balanced for 1024-token sequences
# (a ring, a quarter ring of checkpoints, 128 x 1024 B of the pool): 4 MiB / 591872 B = 7 rings, and
# 1 checkpoint; the pool keeps (4 MiB - 8 x 368640 B) / 2048 B = 608 blocks for the full layer.
grep -Eq '^window rings 7 of 576 tokens .*1 more' <<<"$out" || fail "7 window rings of 576 tokens and 1 checkpoint"
# 1000 tokens (63 blocks): 608 / 63 = 9 by the pool, at most 7 by the rings; with every layer keeping
# every token, 4 MiB / (768 x 16 B) = 341 blocks, 5 sequences.
grep -Eq '^1000 tokens +7 +5( |$)' <<<"$out" || fail "1000-token sequences: 7 with rings, 5 full"
full=$(printf '[kv]\nsliding_layers = "full"\n' >"$tmp/full.toml"; "$loom" plan --config "$tmp/full.toml" --model "$tmp/g3.gguf" --memory 4MiB --ctx 1000)
grep -Eq '^1000 tokens +5 +5( |$)' <<<"$full" || fail "sliding_layers = full: 5 sequences of 1000 tokens"
if grep -q "window rings" <<<"$full"; then fail "sliding_layers = full still plans rings"; fi

if err=$("$loom" plan --model "$tmp/g3.gguf" --ctx zero 2>&1); then fail "--ctx zero accepted"; fi
grep -q -- "--ctx must be a positive number" <<<"$err" || fail "--ctx zero: $err"
if err=$("$loom" plan --model "$tmp/g3.gguf" --kv-type q3 2>&1); then fail "--kv-type q3 accepted"; fi
grep -q -- "--kv-type must be" <<<"$err" || fail "--kv-type q3: $err"
if err=$("$loom" plan --model "$tmp/missing.gguf" 2>&1); then fail "a missing model accepted"; fi
grep -q "missing.gguf" <<<"$err" || fail "a missing model: $err"

((failures == 0)) && echo PASS
exit $((failures > 0))
