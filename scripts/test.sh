#!/usr/bin/env bash
# Builds Loom (Release, warnings as errors) and runs every test through CTest: unit tests, loader and
# config tests, the conformance suite over every in-tree plugin, the SDK example, and the fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
bash scripts/build_wheel.sh build  # the Python package, on top of the build; tests/python installs it in a fresh venv
ctest --test-dir build --output-on-failure -j"$jobs" "$@"
