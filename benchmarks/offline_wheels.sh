#!/usr/bin/env bash
# Wheels of the packages layer_mteb needs that a CUDA PyTorch image usually lacks (mteb and its datasets and
# pydantic stack, pytrec-eval, gguf, filelock), at the versions the GPU smoke test was checked with (PINNED below),
# for an offline Linux x86-64 host with Python 3.12 (override with PYTHON_VERSION). Run it where pip reaches a package
# index, then take DIR to the GPU host and run `bash benchmarks/gpu_smoke.sh --wheels DIR` there. 12 wheels, 11.3 MB
# in all. torch, transformers, sentence-transformers, accelerate, pandas, seaborn, scikit-learn, peft, pyarrow come
# from the host's own image: if its pyarrow is older than the datasets wheel needs, add an older `datasets==X` (mteb
# takes >= 2.19) as an argument, which replaces the pinned version (as any NAME==VERSION does; other names are added).
#   bash benchmarks/offline_wheels.sh DIR [NAME==VERSION ...]
#   bash benchmarks/offline_wheels.sh --installed    # the active environment's versions of these packages, as PINNED
# To refresh the pins: install the new versions in the project's environment, pass the smoke with them on a GPU host
# (its wheels from `offline_wheels.sh DIR NAME==VERSION ...`), then paste `--installed`'s output over PINNED.
set -euo pipefail
PINNED="mteb==2.26.24 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 pydantic==2.14.4 pydantic-core==2.50.5
annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 pytrec-eval-terrier==0.5.11 gguf==0.19.0
filelock==4.3.1"
if [[ "${1:-}" == "--installed" ]]; then
  python=${PYTHON:-python3}
  for spec in $PINNED; do
    name=${spec%%==*}
    printf '%s==%s\n' "$name" "$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")"
  done | paste -sd' '
  exit 0
fi
dir=${1:?usage: offline_wheels.sh DIR [NAME==VERSION ...] | offline_wheels.sh --installed}
shift
declare -A given
for extra in "$@"; do given[${extra%%==*}]=$extra; done
specs=()
for spec in $PINNED; do
  name=${spec%%==*}
  specs+=("${given[$name]:-$spec}")
  unset "given[$name]"
done
specs+=("${given[@]}")
mkdir -p "$dir"
"${PYTHON:-python3}" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
  --python-version "${PYTHON_VERSION:-3.12}" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dir" "${specs[@]}"
ls -l "$dir"
