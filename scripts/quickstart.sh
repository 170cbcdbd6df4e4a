#!/usr/bin/env bash
# One command from a fresh clone: install dependencies and the default model, build, and generate text
# with the default model on the CPU. Extra arguments go to `loom generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
exec ./build/bin/loom generate "$@"
