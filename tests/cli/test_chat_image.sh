#!/usr/bin/env bash
# `loom chat --image` and /image (issue 36) on a synthetic Gemma 3 + gemma3 mmproj pair: the image's rows
# are in the prompt (16 rows + the two markers), the second turn reuses the first turn's blocks, and a
# model without an encoder refuses --image by name.
# usage: test_chat_image.sh LOOM PLUGIN_DIR
set -euo pipefail
loom=$1
export LOOM_PLUGIN_PATH=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
image=$(dirname "$0")/../data/vision/shapes-150x100.png

"$loom" gguf synth --arch gemma3 --layers 6 --dim 128 --heads 4 --kv-heads 1 --head-dim 64 --ff 256 --vocab 512 \
  --ctx 512 --type F16 --image-markers -o "$tmp/text.gguf" >/dev/null
"$loom" gguf synth-mmproj --text-dim 128 -o "$tmp/proj.gguf" >/dev/null

# Without an encoder: refused before the conversation starts.
if out=$(printf 'hi\n' | "$loom" chat --model "$tmp/text.gguf" --image "$image" 2>&1); then fail "--image without an encoder succeeded"; fi
grep -q "takes no images" <<<"$out" || fail "--image without an encoder: no reason given: $out"

out=$(printf 'what is it\n/image %s\nand this one\n' "$image" | "$loom" chat --model "$tmp/text.gguf" --mmproj "$tmp/proj.gguf" \
  --image "$image" --max-tokens 4 --temp 0 --stats 2>&1)
echo "$out"
prompts=$(grep -Eo 'prompt [0-9]+ tokens \([0-9]+ from' <<<"$out" | grep -Eo '[0-9]+' | paste -sd' ')
read -r first first_cached second second_cached <<<"$prompts"
# Each image adds 18 prompt tokens (<start_of_image>, 16 rows, <end_of_image>).
[[ ${first:-0} -ge 18 ]] || fail "the first prompt holds no image rows ($prompts)"
[[ $((second - first)) -ge 18 ]] || fail "the second image's rows are not in the second prompt ($prompts)"
[[ ${second_cached:-0} -ge 16 ]] || fail "the second turn reused no blocks of the first ($prompts)"
grep -q "goes with your next message" <<<"$out" || fail "/image was not acknowledged"

if [[ $failures -gt 0 ]]; then exit 1; fi
echo "chat --image: ok"
