#!/usr/bin/env bash
# The Python API's tests against the installed wheel: a fresh virtualenv (it sees the system's pytest and
# numpy, not the build tree), the wheel that scripts/build_wheel.sh made from the build, then pytest.
# Exit 77 (skipped) when no wheel was built (nanobind or scikit-build-core missing).
set -euo pipefail
build_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
wheel=$(ls "$build_dir"/wheelhouse/loom_engine-*.whl 2>/dev/null | head -1 || true)
if [[ -z $wheel ]]; then
  echo "skipped: no wheel in $build_dir/wheelhouse (scripts/build_wheel.sh builds it; needs nanobind and scikit-build-core)"
  exit 77
fi
venv="$build_dir/python-test-venv"
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
cd "$venv"  # not the source tree: `import loom` must find the installed package
exec "$venv/bin/python" -m pytest -v -p no:cacheprovider "$here"
