#!/usr/bin/env bash
# The GPU benchmark (issue 54) in one command: `python -m lab.gpu run` with its output also in $OUT/log.txt.
#     bash lab/gpu/gpu.sh                          # on the device machine, carrying .gpu (python -m lab.gpu.pack)
#     bash lab/gpu/gpu.sh --parts pipe,tests       # some parts only
#     bash lab/gpu/gpu.sh --device cpu --quick     # the same code paths on a CPU, tiny settings (OUT defaults to gpu_out/)
# Results: $OUT/gpu.json (the record, written as each part goes), log.txt, tests_*.txt, profile_*.txt; then, here,
# `python -m lab.gpu record FOLDER` appends the record to bench/results/runs.jsonl. docs/performance.md says more.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT="${OUT:-$PWD/gpu_out}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
"${PYTHON:-python3}" -m lab.gpu run --out "$OUT" "$@" 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
