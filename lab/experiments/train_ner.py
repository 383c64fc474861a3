"""Trains one system (NER, tagger, ...) on several training-data fractions and seeds with `spacy train`, a few runs at a time.

On a small CPU, two single-threaded `spacy train` runs side by side finish in about the time of one
run using both cores (the training loop is mostly serial), so the project trains the 10% and 100%
models together. Each run's console output goes to `{out}/{name}_{pct}.log`; a failed run prints the
end of its log and makes this script exit non-zero.

    python -m lab.experiments.train_ner configs/ner_elmo.cfg --name elmo --fractions 10 100 \
        --corpus work/corpus --out work/training --jobs 2 -- --paths.elmo work/bilm

Arguments after `--` go to every `spacy train` unchanged (config overrides), then `--settings`, then
`--fraction-settings PCT SETTINGS` to the runs on train_PCT only (e.g. fine-tuning at 10%).

With `--seeds 0 1 2` every fraction is trained once per seed (`--system.seed`, which the configs
pass on to `training.seed`), into `{out}/{name}_{pct}_s{seed}`; without it, once with `--seed`
into `{out}/{name}_{pct}`. Every run writes `provenance.json` (spacy_elmo.provenance: commit,
dirty paths, a copy of the config, command, seed, machine, UTC start/end, exit status, and the
sha256 of what it read: config, corpus, biLM) into its output folder when it ends.

A run whose folder already holds `model-last` and a `provenance.json` saying it finished (exit
status 0) with the same command and the same inputs is not trained again, so a workflow cut short
redoes only the trainings that did not finish. One that finished with another command or inputs (a
changed config or setting) is moved, with its log, to `{out}.replaced/{name}-{its end time}` before
the new run starts; a run that did not finish is simply trained again. Ctrl-C prints one line; the trainings it cut off
are redone next time.

With `--records DIR` (the workflows pass `results/runs/{out folder}`), every finished run also leaves a small record
`DIR/{name}.json` (`write_record`; results/README.md says what it holds), committed with the results so that it
outlives the session's work folder. A run whose folder is gone (another session) but whose record has the same
command, inputs and thread settings and holds a test score is not trained again: its result is the record's (the
seeds report reads it), and with no model there is nothing to score on test again. Any other record is trained
again and rewritten (the committed history keeps the earlier record).
"""  # noqa: E501 - the first line is the script's --help description, whole

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from lab.experiments import looks_ledger
from lab.experiments.provenance_step import SETTINGS_HELP, settings_as_options
from spacy_elmo.provenance import portable

INTERRUPTED = threading.Event()  # set by Ctrl-C: the runs it cut off report nothing


def train_commands(args: argparse.Namespace, extra: list[str]) -> dict[str, tuple[list[str], int]]:
    """{run name: (spacy train command, seed)}, seed by seed (a cut-off run leaves whole seeds, not whole fractions)."""
    commands = {}
    fraction_options: dict[str, list[str]] = {}
    for pct, settings in args.fraction_settings:
        fraction_options[pct] = [*fraction_options.get(pct, []), *settings_as_options(settings)]
    seeds = args.seeds if args.seeds else [args.seed]
    for seed in seeds:
        for pct in args.fractions:
            name = f"{args.name}_{pct}_s{seed}" if args.seeds else f"{args.name}_{pct}"
            options = {
                "--output": args.out / name,
                "--paths.train": args.corpus / f"train_{pct}.spacy",
                "--paths.dev": args.corpus / "dev.spacy",
                "--training.max_steps": args.steps,
                "--training.eval_frequency": args.eval_frequency,
                "--training.patience": args.patience,
                "--system.seed": seed,
                "--gpu-id": args.gpu_id,
            }
            command = [sys.executable, "-m", "spacy", "train", str(args.config)]  # command[4]: the config
            command += [str(part) for option in options.items() for part in option]
            commands[name] = ([*command, *extra, *fraction_options.get(pct, [])], seed)
    return commands


def finished_before(folder: Path, command: list[str], inputs: dict[str, str], threads: dict[str, str]) -> bool:
    """Whether `folder` holds a training that finished with this command (the interpreter aside), these
    inputs and these thread settings (`--jobs` > 1 runs each training on one thread; another thread count
    sums in another order, and the trained model differs): `model-last` and a provenance.json with exit
    status 0 that records all three."""
    try:
        record = json.loads((folder / "provenance.json").read_text(encoding="utf8"))
    except (OSError, ValueError):
        return False
    return (
        (folder / "model-last").is_dir()
        and record.get("exit_code") == 0
        and record.get("command", [])[1:] == [portable(arg) for arg in command[1:]]
        and record.get("inputs") == inputs
        and (record.get("machine") or {}).get("threads") == threads
    )


def move_aside(name: str, stamp: str, *paths: Path) -> Path:
    """Moves `paths` (all in one folder, named `name` + a suffix: a run folder and its log, a score and its
    record) to `{folder}.replaced/{name}-{stamp}{suffix}`: outside the folder, so nothing that scans it reads
    them again, and nothing published from them is lost. Returns where the first one went."""
    replaced = paths[0].parent.with_name(paths[0].parent.name + ".replaced")
    replaced.mkdir(parents=True, exist_ok=True)
    moved = []
    for path in paths:
        if path.exists():
            moved.append(path.rename(replaced / f"{name}-{stamp}{path.name[len(name) :]}"))
    return moved[0]


def set_aside(folder: Path, log: Path) -> Path | None:
    """Moves a run that finished earlier (exit status 0) out of the way of a new one, with its log, to
    `{out}.replaced/{name}-{its UTC end}` (`move_aside`). Returns where it went (None: no finished run there)."""
    try:
        record = json.loads((folder / "provenance.json").read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None
    if record.get("exit_code") != 0:
        return None
    ended = str(record.get("ended_utc", "unknown")).replace(":", "").replace("-", "")
    return move_aside(folder.name, ended, folder, log)


# per task: the dev score model-best is chosen by (meta.json performance key, console log column)
DEV_SCORE = {"ner": ("ents_f", "ENTS_F"), "pos": ("tag_acc", "TAG_ACC")}


def dev_curve(log: Path, column: str) -> list[list[float]]:
    """[[step, dev score %], ...] from a `spacy train` console log (the column named `column`; the loss
    headers are two words over one number, so the column is indexed from the end)."""
    header, points = None, []
    for line in log.read_text(encoding="utf8", errors="replace").splitlines():
        cells = line.split()
        if column in cells and "#" in cells:
            header = cells
        elif header and len(cells) >= 4 and cells[0].isdigit():
            try:
                points.append([int(cells[header.index("#")]), float(cells[header.index(column) - len(header)])])
            except (ValueError, IndexError):
                continue
    return points


def write_record(records: Path, name: str, folder: Path, log: Path, prov: dict) -> Path:
    """The committed record of a finished run (`records/{name}.json`): what it was, what it read, what it reached on
    dev."""
    parsed = looks_ledger.parse_run(name) or {"task": "ner", "system": name, "fraction": None, "seed": None}
    key, column = DEV_SCORE.get(parsed["task"], DEV_SCORE["ner"])
    try:
        best = (
            json.loads((folder / "model-best" / "meta.json").read_text(encoding="utf8")).get("performance", {}).get(key)
        )
    except (OSError, ValueError):
        best = None
    record = {
        **looks_ledger.run_fields(name, parsed, prov),
        "threads": (prov.get("machine") or {}).get("threads"),
        "command": prov["command"][1:],
        "inputs": prov.get("inputs"),
        "best_dev": {key: round(best * 100, 2) if isinstance(best, (int, float)) else None},
        "dev_curve": dev_curve(log, column) if log.is_file() else [],
        "minutes": prov.get("minutes"),
        "test": None,
        "provenance": prov,
    }
    records.mkdir(parents=True, exist_ok=True)
    path = records / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    return path


def reusable_record(records: Path | None, name: str, command: list[str], inputs: dict, threads: dict) -> Path | None:
    """The committed record of `name` when it stands for this training: same command (the interpreter aside),
    inputs and thread settings, and scored on test already (a record has no model: it can't be scored again)."""
    path = records / f"{name}.json" if records else None
    try:
        record = json.loads(path.read_text(encoding="utf8")) if path else None
    except (OSError, ValueError):
        return None
    if not record or not record.get("test") or record["test"].get("score") is None:
        return None
    same = (
        record.get("command") == [portable(arg) for arg in command[1:]]
        and record.get("inputs") == inputs
        and record.get("threads") == threads
    )
    return path if same else None


def run_one(name: str, command: list[str], seed: int, out: Path, env: dict, records: Path | None = None) -> bool:
    """Runs one training with its output in `{out}/{name}.log`; prints a summary; True if it succeeded."""
    from spacy_elmo.provenance import Provenance, input_hashes, threads

    folder = out / name
    inputs = input_hashes(command, exclude=[folder])
    if finished_before(folder, command, inputs, threads(env)):
        print(f"[{name}] finished earlier with the same command, inputs and threads: not trained again", flush=True)
        if records and not (records / f"{name}.json").is_file():
            record = json.loads((folder / "provenance.json").read_text(encoding="utf8"))
            write_record(records, name, folder, out / f"{name}.log", record)
        return True
    reused = reusable_record(records, name, command, inputs, threads(env))
    if reused is not None:
        print(
            f"[{name}] reused the committed record {reused}: the same command, inputs and threads, scored on test "
            "already; not trained again (no model here: its scores are the record's)",
            flush=True,
        )
        return True
    if INTERRUPTED.is_set():
        return False
    path = out / f"{name}.log"
    replaced = set_aside(folder, path)
    if replaced is not None:
        print(
            f"[{name}] an earlier finished run with another command, inputs or threads moved to {replaced}", flush=True
        )
    (folder / "provenance.json").unlink(missing_ok=True)  # written again only when this run ends
    print(f"[{name}] started, log: {path}", flush=True)
    prov = Provenance(command=command, seed=seed, configs=[command[4]], env=env)
    started = time.time()
    with open(path, "w", encoding="utf8") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0 and INTERRUPTED.wait(1.0):  # cut off by Ctrl-C: nothing to report or record
        return False
    minutes = (time.time() - started) / 60
    record = prov.write(
        folder / "provenance.json", exit_code=code, log=str(path), minutes=round(minutes, 2), inputs=inputs
    )
    lines = path.read_text(encoding="utf8", errors="replace").splitlines()
    if code == 0 and records:
        print(f"[{name}] record: {write_record(records, name, folder, path, record)}", flush=True)
    if code == 0:
        scores = "\n".join(line for line in lines if line.strip()[:1].isdigit())
        print(f"[{name}] done in {minutes:.1f} min\n{scores}", flush=True)
    else:
        tail = "\n".join(lines[-30:])
        print(f"[{name}] FAILED (exit {code}) after {minutes:.1f} min; last lines:\n{tail}", flush=True)
    return code == 0


def run_all(commands: dict[str, tuple[list[str], int]], out: Path, jobs: int, records: Path | None = None) -> int:
    """Runs the commands, at most `jobs` at once; returns the number of failed runs.

    Ctrl-C (SIGINT, which the terminal also sends to the running trainings) raises KeyboardInterrupt
    here after the runs that were going have stopped; runs not started yet are not started."""
    env = dict(os.environ)
    if jobs > 1:  # one thread per run: the runs share the cores
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    def interrupt(signum, frame):
        INTERRUPTED.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [
            pool.submit(run_one, name, command, seed, out, env, records) for name, (command, seed) in commands.items()
        ]
        while wait(futures, timeout=0.1).not_done:  # short waits: Python runs the Ctrl-C handler between them
            pass
        succeeded = [future.result() for future in futures]
    except KeyboardInterrupt:
        INTERRUPTED.set()  # the line first: a workflow runner may kill this process soon after Ctrl-C
        print(
            f"interrupted: finished trainings in {out} are kept; run the same command again to do the rest", flush=True
        )
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    pool.shutdown()
    return succeeded.count(False)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--name", required=True, help="system name: outputs are {out}/{name}_{pct}")
    parser.add_argument("--fractions", nargs="+", default=["10", "100"], help="train_{pct}.spacy files to use")
    parser.add_argument("--corpus", type=Path, required=True, help="folder with train_{pct}.spacy and dev.spacy")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--eval-frequency", type=int, default=400)
    parser.add_argument("--patience", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the one run per fraction (without --seeds)")
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="train every fraction once per seed, into {name}_{pct}_s{seed}"
    )
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (1 on a GPU; up to the CPU cores)")
    parser.add_argument(
        "--records", type=Path, help="folder for each finished run's committed record {name}.json (results/runs/...)"
    )
    parser.add_argument("--settings", default="", help=SETTINGS_HELP + "; after the arguments given after --")
    parser.add_argument(
        "--fraction-settings",
        nargs=2,
        action="append",
        default=[],
        metavar=("PCT", "SETTINGS"),
        help="more settings (as --settings) for the runs on train_PCT only, after every other argument",
    )
    args = parser.parse_args(argv)
    extra = [*extra, *settings_as_options(args.settings)]
    for pct, _ in args.fraction_settings:
        if pct not in args.fractions:
            parser.error(f"--fraction-settings {pct}: not one of --fractions ({' '.join(args.fractions)})")
    if not args.config.is_file():
        parser.error(f"config not found: {args.config}")
    missing = [
        str(args.corpus / f"train_{pct}.spacy")
        for pct in args.fractions
        if not (args.corpus / f"train_{pct}.spacy").is_file()
    ]
    if missing or not (args.corpus / "dev.spacy").is_file():
        parser.error(
            f"missing corpus files (run the preprocess step): {', '.join(missing) or args.corpus / 'dev.spacy'}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        failed = run_all(train_commands(args, extra), args.out, max(1, args.jobs), args.records)
    except KeyboardInterrupt:
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
