#!/usr/bin/env bash
# Loom against llama.cpp (built from the llama-cpp-python 0.3.36 sdist, cached) on one GGUF file:
# tg / pp, batched decode and serving at concurrency 1/4/16, alternating, one table of ratios and a
# JSON report. `--help` lists the options; scripts/bench_vs_llama_cpp.py has the details.
set -euo pipefail
exec python3 "$(dirname "$0")/bench_vs_llama_cpp.py" "$@"
