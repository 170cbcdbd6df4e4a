#!/usr/bin/env bash
# Builds the GGUF parser fuzz target with clang (libFuzzer + ASan + UBSan), writes a seed corpus with
# the GGUF writer and fuzzes for a fixed time. Exit 77 (CTest SKIP) when clang or libFuzzer is missing.
# usage: run_gguf_fuzz.sh CLANGXX SOURCE_DIR WORK_DIR [SECONDS]
set -euo pipefail
clangxx="$1" src="$2" work="$3" seconds="${4:-20}"
skip=77

if [[ -z "$clangxx" || ! -x "$(command -v "$clangxx" || true)" ]]; then
  echo "SKIP: clang++ not found; install clang and libclang-rt-dev to run the GGUF fuzzer"
  exit $skip
fi
mkdir -p "$work/obj" "$work/corpus" "$work/artifacts"
cd "$work"

# Probe the fuzzer runtime before building anything big.
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > probe.cpp
if ! "$clangxx" -fsanitize=fuzzer,address,undefined probe.cpp -o probe 2>probe.log; then
  echo "SKIP: $clangxx cannot link -fsanitize=fuzzer (libclang-rt-dev missing?):"
  head -5 probe.log
  exit $skip
fi

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$src/core/src" -I"$src/core/include")
objs=()
shopt -s nullglob
for source in "$src"/core/src/gguf/*.cpp "$src"/core/src/common/*.cpp; do
  obj="obj/$(basename "$(dirname "$source")")_$(basename "$source" .cpp).o"
  # Rebuild only what changed: a rerun of the test then costs just the fuzzing time.
  if [[ ! -f "$obj" || "$source" -nt "$obj" || -n "$(find "$src/core/src/gguf" "$src/core/include" -newer "$obj" -name '*.h' -print -quit)" ]]; then
    "$clangxx" "${flags[@]}" -c "$source" -o "$obj"
  fi
  objs+=("$obj")
done
"$clangxx" "${flags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/gguf_fuzz.cpp" "${objs[@]}" -o gguf_fuzz
"$clangxx" "${flags[@]}" "$src/tests/fuzz/gguf_fuzz_seeds.cpp" "${objs[@]}" -o gguf_fuzz_seeds
rm -f corpus/*
./gguf_fuzz_seeds corpus

set +e
echo "fuzzing the GGUF parser for ${seconds}s on $(ls corpus | wc -l) seeds"
./gguf_fuzz -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix=artifacts/ corpus 2>&1 | tail -25
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
  echo "FAIL: the fuzzer found a crash; reproducer in $work/artifacts/"
fi
exit "$status"
