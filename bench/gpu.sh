#!/usr/bin/env bash
# The GPU checks in a few minutes: the CUDA tests, the spaCy tests with spaCy on the GPU, then
# `python -m bench.gpu` (results → $1, default gpu.json; torch.profiler tables → folder $2 when given).
# On a machine with a CUDA build of torch and the package's requirements installed:
#     bash bench/gpu.sh results/gpu.json
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu.json}
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1
status=0
python3 -m pytest -q -p no:cacheprovider -x tests/test_kernel_equivalence.py tests/test_performance_paths.py tests/test_parity.py \
    tests/test_training_step.py || status=$?
# the spaCy component, its serialization, `spacy train` and fine-tuning with thinc's ops on the GPU (cupy)
python3 -m pytest -q -p no:cacheprovider --spacy-gpu tests/test_spacy_training.py tests/test_spacy_component.py \
    tests/test_serialization.py || status=$?
python3 -m bench.gpu --json "$out" ${2:+--profile "$2"} || status=$?
exit $status
