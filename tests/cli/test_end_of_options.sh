#!/usr/bin/env bash
# `--` ends the options of every subcommand (issue 17): text that starts with '-' can be passed after it,
# and a command without positional arguments accepts a bare `--` but refuses anything after it.
# usage: test_end_of_options.sh LOOM PLUGIN_DIR
set -euo pipefail
# Absolute paths: some checks run from inside the temp dir.
loom=$(realpath "$1")
LOOM_PLUGIN_PATH=$(realpath "$2")
export LOOM_PLUGIN_PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$loom" gguf synth --arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --ff 128 --vocab 512 -o "$tmp/tiny.gguf" >/dev/null
model=$tmp/tiny.gguf

# Positional text that looks like an option (even `--` itself, and `-m`, tokenize's own option).
for text in "-hello" "--help" "--" "-m"; do
  if out=$("$loom" tokenize --model "$model" --ids-only -- "$text" 2>&1); then
    [[ -n "$out" ]] || fail "tokenize -- '$text' printed nothing"
    echo "ok: tokenize -- '$text' -> $out"
  else
    fail "tokenize --model M -- '$text' exited non-zero: $out"
  fi
done
# The '-' is part of the text, not eaten by the option parser.
a=$("$loom" tokenize --model "$model" --ids-only --no-bos -- "-hello")
b=$("$loom" tokenize --model "$model" --ids-only --no-bos -- "hello")
[[ "$a" != "$b" ]] || fail "'-hello' and 'hello' tokenized alike: the '-' was lost"
# A second positional after `--` is still one too many.
if "$loom" tokenize --model "$model" -- one two >/dev/null 2>&1; then fail "tokenize -- one two was accepted"; fi

if out=$("$loom" generate --model "$model" --max-tokens 2 --temp 0 -- "-x" 2>&1); then
  echo "ok: generate -- '-x'"
else
  fail "generate -- '-x': $out"
fi
if out=$("$loom" gguf info -- "$model" 2>&1); then echo "ok: gguf info -- FILE"; else fail "gguf info -- FILE: $out"; fi
cp "$model" "$tmp/-dash.gguf"
(cd "$tmp" && "$loom" gguf info -- "-dash.gguf" >/dev/null) || fail "gguf info -- -dash.gguf"
printf '[backend]\nthreads = 1\n' > "$tmp/-c.toml"
(cd "$tmp" && "$loom" config check -- "-c.toml" >/dev/null) || fail "config check -- -c.toml"
"$loom" quantize "$model" "$tmp/q.gguf" --type Q8_0 --quiet -- >/dev/null || fail "quantize IN OUT --type Q8_0 --"
(cd "$tmp" && "$loom" quantize --type Q8_0 --quiet -- tiny.gguf "-q.gguf" >/dev/null) || fail "quantize -- IN -OUT"
[[ -f "$tmp/-q.gguf" ]] || fail "quantize -- did not write -q.gguf"

# Commands without positional arguments: a bare `--` is fine, anything after it is refused.
"$loom" plugins -- >/dev/null || fail "plugins -- exited non-zero"
for cmd in plugins "gguf synth" bench chat conformance perplexity serve; do
  # shellcheck disable=SC2086
  if err=$("$loom" $cmd -- stray 2>&1 </dev/null); then
    fail "'loom $cmd -- stray' was accepted"
  elif [[ "$err" != *"unexpected argument 'stray'"* ]]; then
    fail "'loom $cmd -- stray' did not name the stray argument: $err"
  else
    echo "ok: loom $cmd -- stray refused"
  fi
done

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all end-of-options checks passed"
