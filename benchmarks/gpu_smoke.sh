#!/usr/bin/env bash
# The GPU smoke test (benchmarks/gpu_smoke.py, its docstring says what it checks) from a checkout of this project,
# on a GPU host with no hub access: about 5 minutes on one H100.
#   bash benchmarks/gpu_smoke.sh [--wheels DIR] [gpu_smoke.py options: --quick, --work DIR, --out DIR, --device cuda:N]
# --wheels DIR: the host's Python lacks layer_mteb's dependencies (mteb, datasets, pydantic, ...): install the wheels
# in DIR (made by benchmarks/offline_wheels.sh on a connected machine) into a private folder first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--wheels" ]]; then
  wheels=${2:?--wheels needs a folder}
  shift 2
  site=${TMPDIR:-/tmp}/layer_mteb_site
  python3 -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$site" "$wheels"/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! python3 -c "import polars" 2>/dev/null; then
  echo "polars is not installed: mteb's import of it gets a stand-in that fails on use (benchmarks/polars_stand_in);" \
    "the smoke's tasks never use it, real Retrieval and Reranking tasks would fail"
  export PYTHONPATH="$PWD/benchmarks/polars_stand_in${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # layer_mteb from this checkout
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
exec python3 benchmarks/gpu_smoke.py "$@"
