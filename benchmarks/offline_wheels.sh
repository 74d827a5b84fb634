#!/usr/bin/env bash
# Wheels of the packages layer_mteb needs that a CUDA PyTorch image usually lacks (mteb and its datasets and
# pydantic stack, pytrec-eval, gguf), at the versions this environment has, for an offline Linux x86-64 host with
# Python 3.12 (override with PYTHON_VERSION). Run it where pip reaches a package index, then take DIR to the GPU host
# and run `bash benchmarks/gpu_smoke.sh --wheels DIR` there. About 11 MB. torch, transformers,
# sentence-transformers, accelerate, pandas, seaborn, scikit-learn, peft, pyarrow come from the host's own image:
# if its pyarrow is older than the datasets wheel needs, add an older `datasets==X` (mteb takes >= 2.19) as an
# argument, which replaces the default version.
#   bash benchmarks/offline_wheels.sh DIR [NAME==VERSION ...]
set -euo pipefail
dir=${1:?usage: offline_wheels.sh DIR [NAME==VERSION ...]}
shift
python=${PYTHON:-python3}
if ! "$python" -c "import mteb" 2>/dev/null; then
  echo "offline_wheels.sh: $python has no mteb: activate the project's environment (make setup; source .venv/bin/activate) or set PYTHON" >&2
  exit 2
fi
names="mteb datasets dill multiprocess pydantic pydantic-core annotated-types typing-inspection typing-extensions
pytrec-eval-terrier gguf filelock"
declare -A pinned
for extra in "$@"; do pinned[${extra%%==*}]=$extra; done
specs=()
for name in $names; do
  if [[ -n "${pinned[$name]:-}" ]]; then
    specs+=("${pinned[$name]}")
  else
    specs+=("$name==$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")")
  fi
done
for extra in "$@"; do [[ " $names " == *" ${extra%%==*} "* ]] || specs+=("$extra"); done
mkdir -p "$dir"
"$python" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
  --python-version "${PYTHON_VERSION:-3.12}" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dir" "${specs[@]}"
ls -l "$dir"
