#!/usr/bin/env bash
# Builds a fuzz target with clang (libFuzzer + ASan + UBSan), writes its seed corpus and fuzzes for a
# fixed time. Exit 77 (CTest SKIP) when clang or libFuzzer is missing. Targets:
#   gguf   GgufFile::from_memory (seeds from the GGUF writer)
#   image  decode_image and parse_data_url (seeds: PNG, JPEG and WebP from the libraries' encoders)
#   safetensors  SafetensorsFile::from_memory (seeds: small files in the format's layout)
# usage: run_fuzz.sh CLANGXX SOURCE_DIR WORK_DIR SECONDS TARGET
set -euo pipefail
clangxx="$1" src="$2" work="$3" seconds="${4:-20}" target="${5:-gguf}"
skip=77
case "$target" in
  gguf) sources=("$src"/core/src/gguf/*.cpp) libs=() ;;
  # The decoders only: the rest of vision/ (the encoder) needs the whole core.
  image) sources=("$src"/core/src/vision/image_decode.cpp "$src"/core/src/vision/data_url.cpp "$src"/core/src/common/base64.cpp)
         read -r -a libs <<< "$(pkg-config --libs libpng libturbojpeg libwebp)" ;;
  safetensors) sources=("$src"/core/src/hf/safetensors_file.cpp "$src"/core/src/gguf/mapped_file.cpp) libs=() ;;
  *) echo "unknown fuzz target '$target'"; exit 2 ;;
esac

if [[ -z "$clangxx" || ! -x "$(command -v "$clangxx" || true)" ]]; then
  echo "SKIP: clang++ not found; install clang and libclang-rt-dev to run the $target fuzzer"
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
for source in "${sources[@]}"; do
  obj="obj/$(basename "$(dirname "$source")")_$(basename "$source" .cpp).o"
  # Rebuild only what changed: a rerun of the test then costs just the fuzzing time.
  if [[ ! -f "$obj" || "$source" -nt "$obj" || -n "$(find "$(dirname "$source")" "$src/core/include" -newer "$obj" -name '*.h' -print -quit)" ]]; then
    "$clangxx" "${flags[@]}" -c "$source" -o "$obj"
  fi
  objs+=("$obj")
done
"$clangxx" "${flags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/${target}_fuzz.cpp" "${objs[@]}" "${libs[@]}" -o "${target}_fuzz"
"$clangxx" "${flags[@]}" "$src/tests/fuzz/${target}_fuzz_seeds.cpp" "${objs[@]}" "${libs[@]}" -o "${target}_fuzz_seeds"
rm -f corpus/*
"./${target}_fuzz_seeds" corpus

set +e
echo "fuzzing $target for ${seconds}s on $(ls corpus | wc -l) seeds"
# libFuzzer's own exit code for a finding is 77, CTest's skip: a finding must fail the test.
"./${target}_fuzz" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix=artifacts/ corpus 2>&1 | tail -25
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
  echo "FAIL: the fuzzer found a crash; reproducer in $work/artifacts/"
fi
exit "$status"
