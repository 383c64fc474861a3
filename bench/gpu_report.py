"""Markdown tables of a `python -m bench.gpu` result file (appended to bench/RESULTS.md).

python -m bench.gpu_report bench/results/gpu_h100_<commit>.json [--append bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _num(value, digits=0) -> str:
    return f"{value:,.{digits}f}"


def render(report: dict, source: str) -> str:
    lines = [
        f"## GPU benchmark, {report['started'].replace('T', ' ')[:16]} UTC ({report['device']})",
        "",
        f"From `{source}` (`bash bench/gpu.sh`, commit {report['commit'][:7]}); torch {report['torch']}, "
        f"CUDA {report['cuda']}, Python {report['python']}; {report['architecture']} architecture with seeded "
        "random weights. Measured in the same run: GEMM "
        + ", ".join(f"{k.split('_')[0]} {_num(v, 0)} TFLOP/s" for k, v in report["gemm"].items())
        + " (8192³ products).",
        "",
    ]
    inference = report.get("inference")
    if inference:
        lines += [
            f"Inference, batch {inference['batch']} (~{inference['words_per_batch'] / inference['batch']:.0f}-word "
            "sentences, nearly all-distinct words, token cache off, host→device copies included):",
            "",
            "| LSTM kernel | precision | words/s | positions/s | bf16 roofline | max abs error vs packed fp32 "
            "(relative) |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for name, entry in inference["modes"].items():
            kernel, precision = name.rsplit("_", 1)
            if "error" in entry:
                lines.append(f"| {kernel} | {precision} | failed: {entry['error'][:80]} | | | |")
                continue
            error = (
                f"{entry['max_abs_error_vs_packed_fp32']:.2e} ({entry['relative_error_vs_packed_fp32']:.1e})"
                if "max_abs_error_vs_packed_fp32" in entry
                else "reference"
            )
            lines.append(
                f"| {kernel} | {precision} | {_num(entry['words_per_s'])} | {_num(entry['positions_per_s'])} | "
                f"{entry['fraction_of_bf16_roofline']:.1%} | {error} |"
            )
        breakdown = inference.get("breakdown_bf16")
        if breakdown:
            parts = ", ".join(f"{k[:-2].replace('_', ' ')} {v * 1e3:.1f} ms" for k, v in breakdown.items())
            lines += ["", f"One bf16 batch, timed by part: {parts}."]
        lines.append("")
    for run in report.get("training", []):
        lines += [
            f"Pretraining steps, {run['rows']} × {run['steps']} words ({run['words_per_step']:,} per step), sampled "
            f"softmax with {run['negatives']:,} negatives over {run['vocab']:,} words, Adagrad, clip 10:",
            "",
            "| LSTM kernel | precision | words/s | s/step |",
            "| --- | --- | ---: | ---: |",
        ]
        for name, entry in run["modes"].items():
            kernel, precision = name.rsplit("_", 1)
            if "error" in entry:
                lines.append(f"| {kernel} | {precision} | failed: {entry['error'][:80]} | |")
            else:
                lines.append(
                    f"| {kernel} | {precision} | {_num(entry['words_per_s'])} | {entry['seconds_per_step']:.3f} |"
                )
        lines.append("")
    runs = report.get("pretrain_cli")
    if runs:
        lines += [
            "`spacy-elmo pretrain configs/pretrain_original.cfg` end to end (generated Zipfian text, data loading and "
            "char ids included; median words/s of the logged windows after the first):",
            "",
            "| precision | words per step | vocabulary | softmax | words/s (windows) | words/s (whole run) |",
            "| --- | ---: | ---: | --- | ---: | ---: |",
        ]
        for run in runs:
            if "error" in run:
                lines.append(f"| | | | failed: {run['error'][:100]} | | |")
                continue
            lines.append(
                f"| {run['precision']} | {run['batch_tokens']:,} | {run['vocab']:,} | {run['softmax']} | "
                f"{_num(run['words_per_s_median_window'])} | {_num(run['words_per_s_whole_run'])} |"
            )
        lines.append("")
    pipe = report.get("pipe")
    if pipe:
        if "error" in pipe:
            lines.append(f"`nlp.pipe` on the GPU failed: {pipe['error'][:200]}")
        else:
            lines.append(
                f"`nlp.pipe` with the `elmo` component on the GPU (batch 128): {_num(pipe['pipe_words_per_s'])} "
                "words/s, "
                f"{pipe['pipe_over_raw']:.0%} of the raw model on the same sentences ({_num(pipe['raw_words_per_s'])} "
                "words/s, "
                "all layers copied to the host)."
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("result")
    parser.add_argument("--append", default=None)
    args = parser.parse_args(argv)
    report = json.loads(Path(args.result).read_text(encoding="utf-8"))
    text = render(report, args.result)
    if args.append:
        with open(args.append, "a", encoding="utf-8") as handle:
            handle.write("\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
