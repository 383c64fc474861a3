#!/usr/bin/env bash
# The GPU checks in a few minutes: the CUDA tests, the spaCy tests with spaCy on the GPU, then
# `python -m bench.gpu` (results → $1, default gpu.json; torch.profiler tables → folder $2 when given).
# The device image has a CUDA build of torch but not spaCy, thinc or pydantic, and reaches no package
# index, so this first installs the package (editable) and what it needs beyond the image from the
# wheels in .whl/ (WHEELS=…), keeping the image's torch. Here, where pip reaches PyPI:
#     python -m bench.device_wheels .whl
# then on the device machine (the device tool with carry [".whl"]):
#     bash bench/gpu.sh results/gpu.json [profiles]
# `bash bench/gpu.sh --check` runs only the install step, as pip's --dry-run (no GPU needed).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
wheels=${WHEELS:-.whl}

install() {  # $@: more pip options. One line and exit 1 if pip fails
    local constraints log
    constraints=$(mktemp)
    grep -vE '^torch\b' constraints.txt >"$constraints"  # the constraints, less torch: the image's build stays
    log=$("$python" -m pip install --no-index --find-links "$wheels" --no-build-isolation -c "$constraints" -e . "$@" 2>&1)
    local code=$?
    rm -f "$constraints"
    if [ $code -ne 0 ]; then
        echo "gpu.sh: installing the package from $wheels/ failed (python -m bench.device_wheels fetches the wheels): $(grep -m1 '^ERROR' <<<"$log" || tail -n1 <<<"$log")"
        exit 1
    fi
    grep -E '^(Would install|Successfully installed)' <<<"$log"
}

if [ "${1:-}" = "--check" ]; then
    install --dry-run
    exit 0
fi
out=${1:-gpu.json}
install
"$python" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1
status=0
"$python" -m pytest -q -p no:cacheprovider -x tests/kernels/test_kernel_equivalence.py tests/kernels/test_performance_paths.py tests/kernels/test_parity.py \
    tests/training/test_training_step.py || status=$?
# the spaCy component, its serialization, `spacy train` and fine-tuning with thinc's ops on the GPU (cupy)
"$python" -m pytest -q -p no:cacheprovider --spacy-gpu tests/spacy/test_spacy_training.py tests/spacy/test_spacy_component.py \
    tests/hf/test_serialization.py || status=$?
"$python" -m bench.gpu --json "$out" ${2:+--profile "$2"} || status=$?
exit $status
