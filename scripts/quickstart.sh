#!/usr/bin/env bash
# One command from a fresh clone: install dependencies and the two default models, build, continue a
# text with the base model (`loom generate`, extra arguments go to it), then answer one chat question
# with the chat model (`loom chat`, fed from a pipe), both on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/bin/loom generate "$@"
echo
echo "--- loom chat (the default chat model) ---"
echo "> Write a short Python function that reverses a string."
echo "Write a short Python function that reverses a string." | ./build/bin/loom chat --temp 0 --max-tokens 200
