"""Writes the GPU speed figures of the prose docs from the newest `bench/results/*/gpu.json`, so they are
generated, never typed: docs/performance.md's summary (between `<!-- gpu-speed:start -->` and
`<!-- gpu-speed:end -->`) and docs/pretraining.md's bf16 speed-up (between `<!-- gpu-bf16:start -->` and
`<!-- gpu-bf16:end -->`), spliced by scripts/doc_regions.py, the lab's one marker-splicing helper.

    python -m bench.readme_speed            # rewrite both
    python -m bench.readme_speed --check    # exit 1 if either differs from what would be written

A target is judged on what a user runs, over the whole run: inference on the model's own call, pretraining
on `spacy-elmo pretrain` end to end (the `pretrain_cli` entry), `nlp.pipe` on the pipeline. The synthetic
training-step benchmark (`training`: one fixed batch, no data loading) is reported as what it is and judges
no target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "scripts") not in sys.path:
    sys.path.append(str(ROOT / "scripts"))  # scripts/doc_regions.py: the lab's one marker-splicing helper
import doc_regions  # noqa: E402

SPEED, BF16 = "gpu-speed", "gpu-bf16"  # the regions (doc_regions.markers gives their markers)
TARGETS = {"inference": 100_000, "pretrain": 50_000, "pipe": 0.9}  # issue 13's GPU targets
DOCS = {"docs/performance.md": SPEED, "docs/pretraining.md": BF16}


COMPLETE = ("inference", "training", "pretrain_cli", "pipe")  # the parts of a finished `python -m bench.gpu`


def newest_result(root: Path = ROOT) -> tuple[Path, dict]:
    """The newest GPU record that holds every part of the benchmark. A run that stopped part way (its
    directory's NOTE.md says why) stays in bench/results as evidence of what it did measure, but the
    prose figures come from one complete run, never from two runs stitched together."""
    results = sorted(
        ((json.loads(p.read_text(encoding="utf-8")), p) for p in (root / "bench" / "results").glob("*/gpu.json")),
        key=lambda item: item[0]["started"],
    )
    complete = [(report, path) for report, path in results if all(part in report for part in COMPLETE)]
    if not complete:
        raise SystemExit("no complete bench/results/*/gpu.json: run `bash bench/gpu.sh` on a GPU machine first")
    report, path = complete[-1]
    return path, report


def _verdict(value: float, target: float) -> str:
    return "**met**" if value >= target else "**not met**"


def _tree(report: dict) -> str:
    """The recorded state of the measured checkout: clean, dirty (with its paths), or not recorded."""
    git = report.get("git") or {}
    if git.get("dirty") is None:
        return "tree state not recorded"
    if git["dirty"]:
        return "dirty tree: " + ", ".join(f"`{p}`" for p in git.get("dirty_paths", []))
    return "clean tree"


def _source(path: Path, report: dict, doc: str) -> str:
    """Commit, tree state, date and a link (from `doc`) to the result file `ROOT/bench/results/NAME/gpu.json`."""
    root = path.parents[3]
    link = Path(os.path.relpath(path, (root / doc).parent)).as_posix()
    return (
        f"commit {report['commit'][:7]}, {_tree(report)}, {report['started'][:10]}; "
        f"[{path.relative_to(root).as_posix()}]({link})"
    )


def _cli(report: dict) -> dict:
    """{precision: run} of the `spacy-elmo pretrain` runs that finished."""
    return {run["precision"]: run for run in report.get("pretrain_cli", []) if "error" not in run}


def _inference_line(report: dict) -> str:
    modes = report["inference"]["modes"]
    auto_bf16 = modes["eager_bf16"]["words_per_s"]  # what `auto` runs on CUDA under autocast
    return (
        f"- **inference** (the model called on batches of {report['inference']['batch']} sentences under bf16 "
        "autocast, "
        f"host→device copies included): **{auto_bf16:,.0f} words/s** with the default kernel (`auto` → eager), "
        f'{modes["cuda_graphs_bf16"]["words_per_s"]:,.0f} with `lstm_implementation="cuda_graphs"`; fp32 (packed): '
        f"{modes['packed_fp32']['words_per_s']:,.0f}; bf16's largest error is "
        f"{modes['eager_bf16']['relative_error_vs_packed_fp32']:.1%} of the largest fp32 value. "
        f"Target {TARGETS['inference']:,} words/s: {_verdict(auto_bf16, TARGETS['inference'])}."
    )


def _pretrain_line(report: dict) -> str:
    """Judged on `spacy-elmo pretrain` in bf16 over its whole run; never on the step benchmark."""
    target = f"Target {TARGETS['pretrain']:,} words/s over the whole run of `spacy-elmo pretrain`"
    bf16 = _cli(report).get("bf16")
    if bf16 is None:
        return (
            f"- **pretraining**: `spacy-elmo pretrain` was not measured (or failed) in this run. {target}: "
            "**not judged** (the training-step benchmark below does not stand in for the command)."
        )
    fp32 = _cli(report).get("fp32")
    text = (
        f'- **pretraining** (`spacy-elmo pretrain configs/pretrain_original.cfg` with `training.precision = "bf16"`, '
        f"end to end on generated text: {bf16['steps']} steps of {bf16['batch_tokens']:,} words, {bf16['softmax']} "
        f"softmax over {bf16['vocab']:,} words): **{bf16['words_per_s_whole_run']:,.0f} words/s over the whole run** "
        f"({bf16['words_per_s_median_window']:,.0f} once warm: the median of the logged windows after the first)"
    )
    if fp32:
        text += f"; fp32: {fp32['words_per_s_whole_run']:,.0f} ({fp32['words_per_s_median_window']:,.0f} once warm)"
    return text + f". {target}: {_verdict(bf16['words_per_s_whole_run'], TARGETS['pretrain'])}."


def _step_line(report: dict) -> str:
    """The synthetic step benchmark, said to be one; it judges no target."""
    train = max(report["training"], key=lambda run: run["rows"])
    kernel, best = max(
        ((name, entry["words_per_s"]) for name, entry in train["modes"].items() if "words_per_s" in entry),
        key=lambda item: item[1],
    )
    return (
        f"- the training step alone (forward, backward and Adagrad update of one fixed batch of {train['rows']} × "
        f"{train['steps']} words, no data loading; sampled softmax with {train['negatives']:,} negatives over "
        f"{train['vocab']:,} words): {best:,.0f} words/s ({kernel.replace('_', ', ')}); a benchmark of the step, "
        "not of the command, so it judges no target;"
    )


def _pipe_line(report: dict) -> str:
    pipe = report["pipe"]
    return (
        f"- `nlp.pipe` with the `elmo` component: {pipe['pipe_over_raw']:.0%} of the raw model's words/s on the same "
        f"sentences ({pipe['pipe_words_per_s']:,.0f} vs {pipe['raw_words_per_s']:,.0f}). "
        f"Target {TARGETS['pipe']:.0%}: {_verdict(pipe['pipe_over_raw'], TARGETS['pipe'])}."
    )


def render(path: Path, report: dict) -> str:
    """docs/performance.md's GPU summary (what goes between the gpu-speed markers)."""
    return "\n".join(
        [
            "",
            f"On one {report['device']} (`bash bench/gpu.sh`, {_source(path, report, 'docs/performance.md')}), the "
            "original "
            "architecture with seeded random weights; each target is judged on what a user runs:",
            "",
            _inference_line(report),
            _pretrain_line(report),
            _step_line(report),
            _pipe_line(report),
            "",
        ]
    )


def render_bf16(path: Path, report: dict) -> str:
    """docs/pretraining.md's measured speed-up of `training.precision = "bf16"` over fp32, end to end."""
    cli = _cli(report)
    if "bf16" not in cli or "fp32" not in cli:
        body = (
            f'The speed of `training.precision = "bf16"` against fp32 is not measured end to end in the newest GPU '
            f"result ({_source(path, report, 'docs/pretraining.md')})."
        )
    else:
        bf16, fp32 = cli["bf16"], cli["fp32"]
        whole = bf16["words_per_s_whole_run"] / fp32["words_per_s_whole_run"]
        warm = bf16["words_per_s_median_window"] / fp32["words_per_s_median_window"]
        low, high = sorted((whole, warm))
        body = (
            f'Measured speed of `training.precision = "bf16"` against fp32: {low:.2f}–{high:.2f}× the words/s. On one '
            f"{report['device']}, `spacy-elmo pretrain configs/pretrain_original.cfg` end to end ({bf16['steps']} "
            "steps of "
            f"{bf16['batch_tokens']:,} words, {bf16['softmax']} softmax) ran {whole:.2f}× fp32's words/s over the "
            "whole run "
            f"({bf16['words_per_s_whole_run']:,.0f} vs {fp32['words_per_s_whole_run']:,.0f}) and {warm:.2f}× once warm "
            f"({bf16['words_per_s_median_window']:,.0f} vs {fp32['words_per_s_median_window']:,.0f}, medians of the "
            "logged "
            f"windows after the first); from {_source(path, report, 'docs/pretraining.md')}, written by "
            "`python -m bench.readme_speed`."
        )
    return f"\n{body}\n"


def updated(root: Path = ROOT) -> dict[Path, tuple[str, str]]:
    """{doc path: (current text, text with its generated block rewritten)}."""
    path, report = newest_result(root)
    blocks = {SPEED: render(path, report), BF16: render_bf16(path, report)}
    out = {}
    for doc, name in DOCS.items():
        current = (root / doc).read_text(encoding="utf-8")
        out[root / doc] = (current, doc_regions.splice(current, name, blocks[name], where=doc))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    return doc_regions.write_or_check(updated(), args.check, "python -m bench.readme_speed")


if __name__ == "__main__":
    sys.exit(main())
