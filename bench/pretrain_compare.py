"""End-to-end pretraining words/s with two LSTM implementations, alternating, in one invocation.

    python bench/pretrain_compare.py configs/pretrain_project.cfg --steps 30 [--rounds 2]
        [--implementations eager,fused] [--corpus text.txt] [--append-results bench/RESULTS.md]
        [--section.key value ...]

Each round runs `spacy-elmo pretrain`'s own code path (`read_settings` + `build_run` + `train`:
vocabulary, data pipeline, training steps, checkpoint and export) once per implementation, for
the same fixed number of steps on the same text, with `model.lstm_implementation` set on the
model's config after it is built ([model] settings are the architecture; the kernel is not one).
Rounds alternate the order.  words/s = words trained / training seconds as `train`
reports them (data loading inside the step loop included).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--implementations", default="eager,fused")
    parser.add_argument("--corpus", help="training text (default: a generated Zipfian corpus)")
    parser.add_argument("--append-results")
    args, extra = parser.parse_known_args(argv)
    import torch

    from bench.train_throughput import synthetic_corpus
    from spacy_elmo.training.pretrain import train
    from spacy_elmo.training.run import build_run
    from spacy_elmo.training.settings import parse_overrides, read_settings

    implementations = [name.strip() for name in args.implementations.split(",") if name.strip()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()
    runs = {name: [] for name in implementations}
    with tempfile.TemporaryDirectory(prefix="elmo-pretrain-compare-") as tmp:
        corpus = Path(args.corpus) if args.corpus else synthetic_corpus(Path(tmp) / "corpus.txt")
        overrides = {
            "paths.train": str(corpus),
            "paths.heldout": None,
            "training.max_steps": args.steps,
            "training.checkpoint_every": 10**9,
            **parse_overrides(extra),
        }
        for round_index in range(args.rounds):
            order = implementations if round_index % 2 == 0 else implementations[::-1]
            for name in order:
                settings = read_settings(args.config, overrides)
                threads = torch.get_num_threads()
                try:
                    run = build_run(settings, Path(tmp) / f"out-{name}-{round_index}")
                    run.model.config.lstm_implementation = name
                    assert run.model.elmo.encoder.config.lstm_implementation == name
                    final = train(run, progress=False)
                finally:
                    torch.set_num_threads(threads)
                runs[name].append({"words": final["words"], "seconds": final["train_seconds"]})
                print(f"round {round_index} {name}: {final['words'] / final['train_seconds']:.0f} words/s", flush=True)
    result = {
        "config": Path(args.config).name,
        "steps": args.steps,
        "rounds": args.rounds,
        "corpus": corpus.name,
        "overrides": extra,
        "implementations": {
            name: {
                "words_per_s": sum(r["words"] for r in rs) / sum(r["seconds"] for r in rs),
                "per_round_words_per_s": [r["words"] / r["seconds"] for r in rs],
                "words": sum(r["words"] for r in rs),
            }
            for name, rs in runs.items()
        },
        "threads": torch.get_num_threads(),
    }
    base = result["implementations"][implementations[0]]["words_per_s"]
    result["speedup_over_" + implementations[0]] = {
        n: r["words_per_s"] / base for n, r in result["implementations"].items()
    }
    print(json.dumps(result, indent=2))
    if args.append_results:
        from bench.machine import describe
        from bench.train_throughput import commit_words

        load_end = os.getloadavg()
        lines = [
            f"## End-to-end pretraining, eager vs fused LSTM, {started} ({result['config']})",
            "",
            f"Machine: {describe()['cpu']}, {os.cpu_count()} cores; torch {torch.__version__}, "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}. Commit "
            f"{commit_words(ROOT)}. "
            f"Load average at start {'/'.join(f'{x:.2f}' for x in load_start)}, at end "
            f"{'/'.join(f'{x:.2f}' for x in load_end)}.",
            "",
            f"Command: `python bench/pretrain_compare.py {' '.join(argv if argv is not None else sys.argv[1:])}` — "
            f"the pretrain command's code path (build_run + train) for {args.steps} steps per run, {args.rounds} "
            "rounds "
            f"alternating the order, corpus {result['corpus']}.",
            "",
            f"| lstm_implementation | words/s (all rounds) | per round | vs {implementations[0]} |",
            "| --- | ---: | --- | ---: |",
        ]
        for name, r in result["implementations"].items():
            rounds = ", ".join(f"{x:.0f}" for x in r["per_round_words_per_s"])
            lines.append(f"| {name} | {r['words_per_s']:.0f} | {rounds} | {r['words_per_s'] / base:.2f}× |")
        path = Path(args.append_results)
        path.write_text(
            path.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8"
        )
        print(f"appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
