#!/usr/bin/env bash
# Builds the Python wheel (pyproject.toml, scikit-build-core) into BUILD_DIR/wheelhouse, reusing
# BUILD_DIR's CMake build so only the Python module is compiled on top of it. Skips with a message when
# nanobind or scikit-build-core is missing (scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
if ! python3 -c "import nanobind, scikit_build_core" 2>/dev/null; then
  echo "build_wheel: skipped (pip install nanobind scikit-build-core)"
  exit 0
fi
rm -rf "$build_dir/wheelhouse"
python3 -m pip wheel . -q --disable-pip-version-check --no-build-isolation --no-deps -w "$build_dir/wheelhouse" -C build-dir="$build_dir"
ls "$build_dir"/wheelhouse/*.whl
