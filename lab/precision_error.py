"""Measures the error of the options that trade exactness for speed (int8, bf16 and fp16 autocast) on the
reference biLMs in tests/fixtures, writes it to results/precision_error.json, and the docs' table from it.

    python scripts/precision_error.py measure [--out results/precision_error.json]
    python scripts/precision_error.py doc [--results results/precision_error.json] [--doc docs/performance.md] [--check]

`measure` runs each fixture biLM (AllenNLP's and bilm-tf's test models, trained) on its own fixture sentences
(split on spaces, one batch) in fp32, then with `quantize_int8`, then under CPU autocast to bfloat16 and to
float16, and records for each the max abs / mean abs error against fp32 over every layer and real token, and
the max abs error ÷ the largest |h| of fp32 (as %), with the run's provenance. A few seconds on a CPU.
`doc` writes the rows of docs/performance.md's table between `<!-- precision-error:start -->` and
`<!-- precision-error:end -->` from the results file (`--check`: exit 1 if the doc differs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab import doc_regions

ROOT = Path(__file__).resolve().parents[1]
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
OPTIONS = {  # name: (how, in the doc)
    "int8": (
        "int8 dynamic quantization (CPU)",
        "`spacy_elmo.hf.quantization.quantize_int8(model)`; undo with `quantization.dequantize(model)`",
    ),
    "bf16": ("bf16 autocast", '`with torch.autocast("cuda", dtype=torch.bfloat16):` (also `"cpu"`)'),
    "fp16": ("fp16 autocast", '`with torch.autocast("cuda", dtype=torch.float16):`'),
}
REGION = "precision-error"  # doc_regions.markers(REGION): its markers in docs/performance.md


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
    """{option: errors} of one fixture biLM against its own fp32 outputs."""
    import torch

    from spacy_elmo import ElmoTokenizer, load_legacy
    from spacy_elmo.hf.quantization import dequantize, quantize_int8

    options, weights, sentences = (ROOT / part for part in FIXTURES[name])
    model = load_legacy(options, weights).eval()
    batch = ElmoTokenizer()(_sentences(sentences))
    with torch.no_grad():
        exact = [h.float() for h in model(**batch).hidden_states]
        found = {}
        quantize_int8(model)
        try:
            found["int8"] = _error(model(**batch).hidden_states, exact, batch["attention_mask"])
        finally:
            dequantize(model)
        for option, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            with torch.autocast("cpu", dtype=dtype):
                found[option] = _error(model(**batch).hidden_states, exact, batch["attention_mask"])
    return found


def cmd_measure(args) -> int:
    from spacy_elmo.provenance import Provenance

    prov = Provenance(command=[sys.executable, *sys.argv])
    import torch

    torch.manual_seed(0)
    result = {
        "about": "Error of int8 / bf16 / fp16 against fp32 on the fixture biLMs (CPU), written by "
        "scripts/precision_error.py",
        "fixtures": {name: measure_fixture(name) for name in FIXTURES},
    }
    result["provenance"] = prov.record(torch_threads=torch.get_num_threads())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    print(f"wrote {args.out}")
    return 0


def render(result: dict) -> str:
    """The table's rows, from a results file."""
    prov = result.get("provenance") or {}
    git = prov.get("git") or {}
    commit = (git.get("commit") or "unknown")[:7] + (
        " with uncommitted changes elsewhere in the tree" if git.get("dirty") else ""
    )
    machine = (prov.get("machine") or {}).get("cpu") or "?"
    lines = [
        "| option | how | measured error (fixtures: trained biLMs, max abs / mean abs / max abs ÷ max \\|h\\|) |",
        "| --- | --- | --- |",
    ]
    for option, (title, how) in OPTIONS.items():
        parts = [
            f"{name} {e[option]['max_abs']:.1e} / {e[option]['mean_abs']:.1e} / {e[option]['max_rel_percent']:.2f}%"
            for name, e in result["fixtures"].items()
        ]
        lines.append(f"| {title} | {how} | {'; '.join(parts)} |")
    lines += [
        "",
        f"(Measured on CPU by `python scripts/precision_error.py measure`, {prov.get('ended_utc', '?')}, commit "
        f"{commit}, "
        f"{machine}: [results/precision_error.json](../results/precision_error.json).)",
    ]
    return "\n".join(lines)


def splice(text: str, block: str, where: str = "the text") -> str:
    return doc_regions.splice(text, REGION, f"\n{block}\n", where=where)


def cmd_doc(args) -> int:
    result = json.loads(args.results.read_text(encoding="utf8"))
    current = args.doc.read_text(encoding="utf8")
    updated = splice(current, render(result), where=str(args.doc))
    done = doc_regions.write_or_check(
        {args.doc: (current, updated)}, args.check, "python scripts/precision_error.py doc"
    )
    if done == 0 and not args.check:
        print(f"wrote the precision table of {args.doc} from {args.results}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("measure")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "precision_error.json")
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("doc")
    p.add_argument("--results", type=Path, default=ROOT / "results" / "precision_error.json")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_doc)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
