"""Runs one pretraining of the project so that running it again continues it instead of starting over.

    python -m lab.experiments.pretrain_resumable --output work/bilm --seed 0 --config configs/pretrain_project.cfg -- \
        python -m torch.distributed.run --standalone --nproc_per_node 2 -m spacy_elmo pretrain \
        configs/pretrain_project.cfg --output work/bilm --paths.train work/corpus/lm/train.txt ...

- What the run reads is recorded in OUTPUT/run_inputs.json before it starts: the command, the
  sha256 of every file it names (config, training and held-out text, vocabulary, each file a glob
  matches; `spacy_elmo.provenance.input_hashes`) and the thread settings its processes train with
  (torchrun gives each of several processes OMP_NUM_THREADS=1 when it is not set; another thread
  count sums in another order, so a resume under other settings would not continue exactly).
- Run again with the same record, an unfinished run resumes from its last checkpoint (the command
  gets `--resume`, which restores model, optimizer, RNG and data position exactly), and a finished
  one (OUTPUT/provenance.json with exit status 0) is not run again. Any other OUTPUT (the settings
  or the data changed, or no record) is deleted and the run starts over.
- When it ends, OUTPUT/provenance.json records where the result came from (as
  lab/experiments/provenance_step.py does), with the checkpoint a resumed run started from.
- Ctrl-C prints one line (the checkpoint kept, and that running the same command again resumes)
  instead of the tracebacks of torchrun and its workers: their output is passed through until the
  interrupt and dropped after it.

Ctrl-C is answered at once: the main thread polls the child (`Popen.wait` would first wait for
it) and the threads copying its output do not take the signal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from lab.experiments.provenance_step import wrapper_arguments

RECORD = "run_inputs.json"


def worker_env(command: list[str], env: dict[str, str]) -> dict[str, str]:
    """The environment the processes of `command` train in: `env`, and for a torchrun launch of more than
    one process per node without OMP_NUM_THREADS, the OMP_NUM_THREADS=1 torchrun sets for them."""
    if Path(command[0]).name == "torchrun":
        launcher_args = command[1:]
    elif command[1:3] == ["-m", "torch.distributed.run"]:
        launcher_args = command[3:]
    else:
        return dict(env)
    if "OMP_NUM_THREADS" in env:
        return dict(env)
    from torch.distributed.run import determine_local_world_size, get_args_parser

    try:
        processes = determine_local_world_size(get_args_parser().parse_args(launcher_args).nproc_per_node)
    except (SystemExit, ValueError):  # torchrun will refuse these arguments itself
        return dict(env)
    return {**env, "OMP_NUM_THREADS": "1"} if processes > 1 else dict(env)


def run_record(command: list[str], output: Path, env: dict[str, str]) -> dict:
    """What OUTPUT/run_inputs.json holds for `command`, its processes training in `env` (`worker_env`):
    the command (the interpreter aside), the hashes of what it reads, and the thread settings of `env`."""
    from spacy_elmo.provenance import input_hashes, threads

    return {"command": command[1:], "inputs": input_hashes(command, exclude=[output]), "threads": threads(env)}


def latest_checkpoint(output: Path) -> str | None:
    """The name of the checkpoint `--resume` continues from (`checkpoints/latest`), if any."""
    pointer = output / "checkpoints" / "latest"
    if pointer.is_file():
        name = pointer.read_text(encoding="utf-8").strip()
        if (output / "checkpoints" / name / "state.json").is_file():
            return name
    return None


def finished(output: Path) -> bool:
    """Whether OUTPUT holds a run that ended well (its provenance says exit status 0)."""
    try:
        return json.loads((output / "provenance.json").read_text(encoding="utf-8")).get("exit_code") == 0
    except (OSError, ValueError):
        return False


def plan(output: Path, record: dict) -> str:
    """ "skip" (finished with this record), "resume" (unfinished, a checkpoint kept) or "start"."""
    try:
        same = json.loads((output / RECORD).read_text(encoding="utf-8")) == record
    except (OSError, ValueError):
        same = False
    if same and finished(output):
        return "skip"
    if same and latest_checkpoint(output):
        return "resume"
    return "start"


def _forward(stream, target, interrupted: threading.Event) -> None:
    """Copies a child's output to ours as it comes, until Ctrl-C (then drops it)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])  # Ctrl-C goes to the main thread, at once
    for chunk in iter(lambda: stream.read1(1 << 16), b""):
        if not interrupted.is_set():
            target.buffer.write(chunk)
            target.flush()


def run(command: list[str], output: Path, env: dict[str, str] | None = None) -> int:
    """Runs `command` (in `env`), passing its output through; on Ctrl-C prints one line and returns 130."""
    interrupted = threading.Event()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    threads = [
        threading.Thread(target=_forward, args=(child.stdout, sys.stdout, interrupted), daemon=True),
        threading.Thread(target=_forward, args=(child.stderr, sys.stderr, interrupted), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        while (code := child.poll()) is None:  # not child.wait(): on Ctrl-C it waits for the child first
            time.sleep(0.05)
    except KeyboardInterrupt:  # the terminal sent SIGINT to the whole process group, the child included
        interrupted.set()
        kept = latest_checkpoint(output)
        where = f"{output} keeps its last checkpoint ({kept})" if kept else f"no checkpoint was written to {output} yet"
        print(f"interrupted: {where}; run the same command again to resume", file=sys.stderr, flush=True)
        try:
            child.wait(timeout=60)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            child.kill()
        return 130
    for thread in threads:
        thread.join()
    return code


def main(argv: list[str] | None = None) -> int:
    args, command = wrapper_arguments(
        sys.argv[1:] if argv is None else argv,
        "pretrain_resumable.py",
        ("--output", "the pretraining's output directory"),
    )
    from spacy_elmo.provenance import Provenance

    output = args.output
    env = worker_env(command, dict(os.environ))  # set here, so the settings recorded are the ones given
    record = run_record(command, output, env)
    step = plan(output, record)
    if step == "skip":
        print(
            f"{output}: finished earlier with the same command, settings, data and thread settings; not run again",
            file=sys.stderr,
        )
        return 0
    if step == "resume":
        print(
            f"{output}: resuming from {latest_checkpoint(output)} (same command, settings, data and thread settings)",
            file=sys.stderr,
        )
        command = [*command, "--resume"]
    elif output.exists():
        print(
            f"{output}: starting over (the command, its settings, its data or its thread settings changed)",
            file=sys.stderr,
        )
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    (output / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    prov = Provenance(command=command, seed=args.seed, configs=args.config, env=env)
    resumed_from = latest_checkpoint(output) if step == "resume" else None
    code = run(command, output, env)
    if code != 130:
        prov.write(output / "provenance.json", exit_code=code, resumed_from=resumed_from)
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before or after the run itself
        print("interrupted", file=sys.stderr)
        sys.exit(130)
