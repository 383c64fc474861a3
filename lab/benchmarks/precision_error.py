"""Measures the error of the library's inference precisions (`ElmoModel.set_precision` /
`ElmoConfig.precision`: bf16, int8) against fp32 on the reference biLMs in tests/fixtures, and writes
results/precision_error.json and its table, results/precision_error.md (which docs/performance.md cites).

    python -m lab.benchmarks.precision_error measure [--out results/precision_error.json]
    python -m lab.benchmarks.precision_error table [--results results/precision_error.json] [--check]

`measure` runs each fixture biLM (AllenNLP's and bilm-tf's test models, trained) on its own fixture sentences, and
an original-size biLM with random weights on the AllenNLP sentences
(split on spaces, one batch) in fp32, then after `set_precision("bf16")` and `set_precision("int8")`, and
records for each the max abs / mean abs error against fp32 over every layer and real token, and the max abs
error ÷ the largest |h| of fp32 (as %), with the run's provenance and whether this CPU has native bf16
products (without them "bf16" computes in exact fp32, and its row is left out). A few seconds on a CPU.
`table` writes the Markdown table beside the results file from it (`--check`: exit 1 if it differs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from lab import ROOT
from spacy_elmo.precision import PRECISIONS

FIXTURES = {  # name: (options, weights, sentences file)
    "AllenNLP": (
        "tests/fixtures/allennlp_elmo/options.json",
        "tests/fixtures/allennlp_elmo/lm_weights.hdf5",
        "tests/fixtures/allennlp_elmo/sentences.json",
    ),
    "bilm-tf": (
        "tests/fixtures/bilm_tf/model/options.json",
        "tests/fixtures/bilm_tf/model/lm_weights.hdf5",
        "tests/fixtures/bilm_tf/model/lm_embeddings_sentences.json",
    ),
}
# the original ELMo's size (4096-cell, 512-projection, 2 layers) with random weights (seed 0), on the AllenNLP
# fixture's sentences: what a full-size model's layers do under each precision
ORIGINAL = "original size, random weights"
LOWER = tuple(p for p in PRECISIONS if p != "fp32")  # ElmoConfig.precision's settings besides the exact fp32


def _sentences(path: Path) -> list[list[str]]:
    data = json.loads(path.read_text(encoding="utf8"))
    flat = [s for item in data for s in (item if isinstance(item, list) else [item])]
    return [s.split() for s in flat]


def _error(got, exact, mask) -> dict:
    import torch

    keep = mask.bool()
    diffs = torch.cat([(g.float() - e)[keep].abs().flatten() for g, e in zip(got, exact)])
    top = max(e[keep].abs().max().item() for e in exact)
    return {
        "max_abs": diffs.max().item(),
        "mean_abs": diffs.mean().item(),
        "max_rel_percent": 100 * diffs.max().item() / top,
    }


def measure_fixture(name: str) -> dict:
    """{precision: errors} of one fixture biLM, switched with `set_precision`, against its own fp32
    outputs ("bf16" only where this CPU has native bf16 products, "int8" where it takes int8 ones)."""
    import torch

    from spacy_elmo import ElmoTokenizer, load_legacy
    from spacy_elmo.kernels.capabilities import int8_available, native_bf16_available

    saved = tempfile.TemporaryDirectory(prefix="spacy_elmo_precision_error_")
    if name == ORIGINAL:  # its seeded weights written to files, as the bench's: a precision switch reads them back
        from lab.benchmarks.bench import ensure_model

        folder = ensure_model("original", 0, Path(saved.name))
        options, weights = folder / "options.json", folder / "lm_weights.hdf5"
        sentences = ROOT / FIXTURES["AllenNLP"][2]
    else:
        options, weights, sentences = (ROOT / part for part in FIXTURES[name])
    model = load_legacy(options, weights).eval()
    batch = ElmoTokenizer()(_sentences(sentences))
    found = {}
    with torch.no_grad():
        exact = [h.float() for h in model(**batch).hidden_states]
        try:
            for precision in LOWER:
                if not {"bf16": native_bf16_available, "int8": int8_available}[precision]():
                    continue
                model.set_precision(precision)
                found[precision] = _error(model(**batch).hidden_states, exact, batch["attention_mask"])
        finally:
            model.set_precision("fp32")
            saved.cleanup()
    return found


def cmd_measure(args) -> int:
    from spacy_elmo.provenance import Provenance

    prov = Provenance(command=[sys.executable, *sys.argv])
    import torch

    torch.manual_seed(0)
    from spacy_elmo.kernels.capabilities import int8_available, native_bf16_available

    result = {
        "about": "Error of ElmoModel.set_precision's bf16 and int8 against fp32 on the fixture biLMs and an "
        "original-size biLM with random weights (CPU), written by lab/benchmarks/precision_error.py",
        "native_bf16": native_bf16_available(),
        "int8_products": int8_available(),
        "fixtures": {name: measure_fixture(name) for name in [*FIXTURES, ORIGINAL]},
    }
    result["provenance"] = prov.record(torch_threads=torch.get_num_threads())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    table = args.out.with_suffix(".md")
    table.write_text(render(result, args.out.name), encoding="utf8")
    print(f"wrote {args.out} and {table}")
    return 0


def render(result: dict, source: str = "precision_error.json") -> str:
    """The Markdown table of a results file (`source`: its name, beside the table)."""
    prov = result.get("provenance") or {}
    git = prov.get("git") or {}
    commit = (git.get("commit") or "unknown")[:7] + (" with uncommitted changes" if git.get("dirty") else "")
    machine = (prov.get("machine") or {}).get("cpu") or "?"
    lines = [
        "| precision | fixture | max abs | mean abs | max abs ÷ max \\|h\\| |",
        "| --- | --- | --- | --- | --- |",
    ]
    for precision in LOWER:
        for name, errors in result["fixtures"].items():
            if precision in errors:
                e = errors[precision]
                lines.append(
                    f"| {precision} | {name} | {e['max_abs']:.1e} | {e['mean_abs']:.1e} | {e['max_rel_percent']:.2f}% |"
                )
    lines += [
        "",
        f"Error against fp32 of `ElmoModel.set_precision(...)` on the fixture biLMs and an original-size one with "
        f"random weights, on CPU "
        f"({machine}, native bf16: {'yes' if result.get('native_bf16') else 'no'}"
        + (f", int8 products: {'yes' if result['int8_products'] else 'no'}" if "int8_products" in result else "")
        + f"), commit {commit}, "
        f"{prov.get('ended_utc', '?')}: [{source}]({source}), by `python -m lab.benchmarks.precision_error measure`.",
    ]
    return "\n".join(lines) + "\n"


def cmd_table(args) -> int:
    result = json.loads(args.results.read_text(encoding="utf8"))
    table = args.results.with_suffix(".md")
    text = render(result, args.results.name)
    if args.check:
        same = table.is_file() and table.read_text(encoding="utf8") == text
        if not same:
            print(f"{table} is not what {args.results} renders: run `python -m lab.benchmarks.precision_error table`")
        return 0 if same else 1
    table.write_text(text, encoding="utf8")
    print(f"wrote {table}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("measure")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "precision_error.json")
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("table")
    p.add_argument("--results", type=Path, default=ROOT / "results" / "precision_error.json")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_table)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
