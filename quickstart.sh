#!/usr/bin/env bash
# KV Studio quick start.
#   ./quickstart.sh         install everything, then open the app with the starter model loaded
#   ./quickstart.sh test    install everything, run the checks (ruff, mypy), then the whole test suite
# The first install compiles llama.cpp (about 10 minutes on 2 cores); pip caches the wheel.
# GPU builds: set CMAKE_ARGS first (see README, or `python -m kernels variants`).
set -euo pipefail
cd "$(dirname "$0")"
mode="${1:-run}"
case "$mode" in
  run)  extras="starter" ;;
  test) extras="starter,test" ;;
  *) echo "usage: ./quickstart.sh [run|test]" >&2; exit 2 ;;
esac

scripts/system-deps.sh

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# Every build has llama.cpp's RPC client, so any install can load across workers and be one
# (docs/several-machines.md); a GPU build adds the user's CMAKE_ARGS.
user_cmake_args="${CMAKE_ARGS:-}"
export CMAKE_ARGS="-DGGML_RPC=ON${user_cmake_args:+ $user_cmake_args}"
echo "Installing KV Studio ($extras); the first time compiles llama.cpp (about 10 minutes on 2 cores)..." >&2
.venv/bin/python -m pip install --quiet -e ".[$extras]"

# pip's wheel cache ignores CMAKE_ARGS: a wheel cached by an earlier install may lack RPC, and a
# GPU build is compiled afresh, once per set of args (kept out of the cache).
lib_dir="$(.venv/bin/python -c 'from app.backends.built_in import built_in_folder; print(built_in_folder())')"
marker=.venv/.llama-cmake-args
rebuilt=no
if [ -n "$user_cmake_args" ] && [ "$(cat "$marker" 2>/dev/null)" != "$CMAKE_ARGS" ]; then
  echo "Compiling llama.cpp with CMAKE_ARGS=$CMAKE_ARGS ..." >&2
  # A CUDA/HIP build gets KV Studio's Flash Attention kernel patches (kernels/patches).
  .venv/bin/python -m kernels build custom
  printf '%s' "$CMAKE_ARGS" > "$marker"
  rebuilt=yes
elif [ ! -f "$lib_dir/libggml-rpc.so" ]; then
  echo "The cached llama-cpp-python wheel has no RPC; compiling llama.cpp again with $CMAKE_ARGS ..." >&2
  .venv/bin/python -m pip cache remove 'llama_cpp_python*' >/dev/null 2>&1 || true
  .venv/bin/python -m pip install --quiet --force-reinstall --no-deps "llama-cpp-python==0.3.36"
  rebuilt=yes
fi
# llama.cpp's rpc-server beside those libraries, so `kvstudio worker` runs on this build too.
if [ "$rebuilt" = yes ] || [ ! -x "$lib_dir/ggml-rpc-server" ]; then
  .venv/bin/python -m kernels rpc-server
fi

if [ "$mode" = run ]; then
  exec .venv/bin/kvstudio gui --model starter
fi
shift || true

# The checks (CONTRIBUTING.md), before the tests; any finding fails the run.
lint_paths=(app tests benchmarks scripts kernels packaging)
if ! .venv/bin/ruff check --output-format concise "${lint_paths[@]}"; then
  echo "ruff check failed: fix the findings above (ruff check --fix handles some)." >&2
  exit 1
fi
if ! .venv/bin/ruff format --check "${lint_paths[@]}"; then
  echo "ruff format --check failed: run .venv/bin/ruff format ${lint_paths[*]}" >&2
  exit 1
fi
if ! .venv/bin/mypy; then
  echo "mypy failed: fix the type errors above." >&2
  exit 1
fi
if ! .venv/bin/lint-imports --no-cache; then
  echo "lint-imports failed: an import breaks the app's shape ([tool.importlinter] in pyproject.toml)." >&2
  exit 1
fi
# What the tests build on (the CPU backend package, the kernel proofs' objects, bytecode), compiled once
# into ~/.cache/kvstudio and timed apart from the tests (scripts/test_builds.py).
started=$SECONDS
export KVSTUDIO_TEST_BUILDS="$PWD/.venv/test-builds"
.venv/bin/python scripts/test_builds.py
echo "Test builds took $((SECONDS - started)) s" >&2
# Four test processes, each taking whole test files (so a module's shared engine stays one):
# most of a test's time is one thread (Python, Qt, a process starting), so on 2 cores two busy
# processes beside the run take less of the machine from four than from one; six were no
# faster (docs/testing.md). `-n 0` after `test` runs it in one process.
exec .venv/bin/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder "$@"
