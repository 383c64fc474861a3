"""`python -m lab.gpu`: the GPU benchmark (issue 54) in one prepared command, and its record.

On the device machine (no network; the device tool carries `.gpu/`, which `python -m lab.gpu.pack` fills here):

    bash lab/gpu/gpu.sh                          # everything below, results under $OUT (gpu.json, logs, profiles)
    bash lab/gpu/gpu.sh --parts pipe,tests       # a rerun of some parts, into the same gpu.json
    bash lab/gpu/gpu.sh --device cpu --quick   # the same code paths on a CPU, tiny settings (a check of the harness)

Then here, on the files that came back:

    python -m lab.gpu record FOLDER          # FOLDER/gpu.json → bench/results/runs.jsonl (kind "gpu"),
                                             # bench/results/gpu_<gpu>_<commit>/ and bench/results/gpu.md

`run` takes the commit it measures from `.gpu/stamp.json` (`python -m lab.gpu.pack stamp`, here, just before the
call), never from git there: the device tool sends the working tree with the git metadata of the session's start.
It checks the tree it got against the stamp's file hashes and records what differs. It unpacks the carried
packages (`.gpu/site.tar.xz`), checks that its Python and torch are inside the range setup.cfg declares
(`declared_range`; outside it the run stops before any part), and runs each part in its own process with its own
time box, in this order (HEAD's tests first, then the inference rows, then the levers):

- `tests`: `pytest --spacy-gpu tests/spacy tests/hf/test_serialization.py` and the CUDA kernel and training-step
  tests, side by side, each log under $OUT;
- `gemm`: the GPU's bf16, tf32 and fp32 matrix-product rates and a device-to-device copy (the ceilings);
- `inference`: the raw `ElmoModel` (original and small sizes, random weights of the right shape) at batch 1, 32
  and 128 in fp32, bf16 (`set_precision("bf16")`, the project's bf16) and bf16 autocast, with the default kernel
  choice and `cuda_graphs`; bf16's error against fp32 on the same batch; levers: the other kernels, the token
  cache, batch 512; a torch.profiler table;
- `pretrain`: `python -m spacy_elmo pretrain configs/pretrain_original.cfg` on the carried corpus, fp32 and bf16 at
  one `batch_tokens` for the same steps (held-out perplexity after them), and bf16 at a larger `batch_tokens`:
  steady, train-loop and end-to-end words/s, peak GPU memory (nvidia-smi);
- `pipe`: `nlp.pipe` with the `elmo` component on the GPU (`spacy.require_gpu()`) against the raw model on the
  same sentences; levers: Docs made beforehand, the component's length bucketing over larger `batch_size`,
  larger `max_batch_tokens`, thinc's mixed precision;
- `step`: the pretraining step's levers in one run: the fused LSTM kernel, then `torch.compile` of the token
  encoder, each after steps with the default kernels; a profile of one step.

Every part writes its rows into $OUT/gpu.json as it goes, so a part stopped at its time box (or the whole call
stopped at its limit) leaves what finished. The fixed settings of each part are in the record (`settings`).
"""

import argparse
import os

from lab import ROOT
from lab.gpu.common import DEADLINE, PARTS, PREP, RESULTS, RUNS
from lab.gpu.orchestrate import check_packages, orchestrate
from lab.gpu.parts import run_part, step_child
from lab.gpu.tables import record_run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def device_args(p):
        p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "gpu_out"), help="results folder ($OUT)")
        p.add_argument("--prep", default=str(PREP), help="the carried folder (site.tar.xz, corpus/, stamp.json)")
        p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        p.add_argument("--quick", action="store_true", help="tiny settings: a check of the harness's code paths")

    run = sub.add_parser("run", help="every part (or --parts), on the device machine")
    device_args(run)
    run.add_argument("--parts", default="", help=f"comma-separated, of {','.join(PARTS)} (a rerun adds to gpu.json)")
    run.add_argument("--deadline", type=float, default=None, help=f"seconds for the whole run (GPU default {DEADLINE})")
    part = sub.add_parser("part", help="one part in this process (what `run` starts)")
    part.add_argument("part", choices=PARTS)
    part.add_argument("--box", type=float, required=True)
    device_args(part)
    rec = sub.add_parser("record", help="here: a returned $OUT folder into bench/results and runs.jsonl")
    rec.add_argument("folder")
    rec.add_argument("--runs", default=str(RUNS))
    rec.add_argument("--into", default=str(RESULTS))
    sub.add_parser("check-packages", help="(what `run` starts) the packages the parts import, and their versions")
    child = sub.add_parser("step-child", help="(what the step part starts) its steps, in this process")
    for name in ("--output", "--profile", "--settings", "--overrides"):
        child.add_argument(name, required=True)
    args = parser.parse_args(argv)
    commands = {
        "run": orchestrate,
        "part": run_part,
        "record": record_run,
        "check-packages": check_packages,
        "step-child": step_child,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
