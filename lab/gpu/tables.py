"""The GPU record's tables (the summary printed there, the table files here) and `python -m lab.gpu record`: the
returned $OUT folder into bench/results (runs.jsonl, gpu_<gpu>_<commit>/, gpu.md)."""

import contextlib
import json
import re
from pathlib import Path

from lab import ROOT
from lab.gpu.common import RECORD, RUNS, SCHEMA

# --- tables: the record's figures, for the summary there and the table files here --------------------------------


def _num(value, digits: int = 0) -> str:
    if value is None:
        return ""
    return f"{value:,.{digits}f}"


def tables(record: dict) -> list[dict]:
    """The record's tables ({title, columns, rows}): ceilings, inference, nlp.pipe, pretraining, step, tests."""
    parts = record.get("parts", {})
    out = []
    gemm = parts.get("gemm") or {}
    if gemm:
        out.append(
            {
                "title": "Ceilings measured in this run",
                "columns": ["bf16 TFLOP/s", "tf32 TFLOP/s", "fp32 TFLOP/s", "copy GB/s (read + write)"],
                "rows": [
                    [_num(gemm.get(k), 1) for k in ("bf16_tflops", "tf32_tflops", "fp32_tflops", "copy_gb_per_s")]
                ],
            }
        )
    rows = []
    for r in (parts.get("inference") or {}).get("rows", []):
        note = r.get("error") or r.get("skipped") or ""
        error = f"{100 * r['relative_error']:.2f}% ({r['max_abs_error']:.1e})" if "relative_error" in r else ""
        rows.append(
            [
                r["arch"],
                str(r["batch"]),
                r["mode"],
                r["kernel"] + (f" → {r['kernel_used']}" if r.get("kernel_used") not in (None, r["kernel"]) else ""),
                _num(r.get("words_per_s")),
                _num(1000 * r["seconds_per_batch"], 2) if "seconds_per_batch" in r else "",
                f"{100 * r['fraction_of_bf16_peak']:.1f}%" if "fraction_of_bf16_peak" in r else "",
                error,
                r.get("lever") or "",
                note,
            ]
        )
    if rows:
        out.append(
            {
                "title": "Inference, raw ElmoModel (random weights; token cache off unless the lever says so)",
                "columns": [
                    "arch",
                    "batch",
                    "precision",
                    "kernel",
                    "words/s",
                    "ms/batch",
                    "of bf16 peak",
                    "error vs fp32 (max abs ÷ max |h|)",
                    "lever",
                    "notes",
                ],
                "rows": rows,
            }
        )
    rows = []
    for r in (parts.get("pipe") or {}).get("rows", []):
        if "words_per_s" not in r:
            rows.append([r["what"], "", "", "", r.get("error") or r.get("skipped") or ""])
            continue
        for key, rate in r["words_per_s"].items():
            ratio = (r.get("over_raw") or {}).get(key)
            rows.append([r["what"], key, _num(rate), f"{100 * ratio:.0f}%" if ratio else "", ""])
    if rows:
        out.append(
            {
                "title": "nlp.pipe against the raw model",
                "columns": ["sentences", "run", "words/s", "of raw", "notes"],
                "rows": rows,
            }
        )
    pretrain = parts.get("pretrain") or {}
    rows = []
    for r in pretrain.get("rows", []):
        rows.append(
            [
                r["precision"],
                _num(r["batch_tokens"]),
                str(r["steps"]),
                _num(r.get("vocab_size")),
                str(r.get("softmax") or ""),
                _num(r.get("words_per_s_steady")),
                _num(r.get("words_per_s_train")),
                _num(r.get("words_per_s_end_to_end")),
                _num(r.get("peak_gpu_memory_mib")),
                _num(r.get("heldout_ppl"), 1),
                r.get("lever") or r.get("error") or r.get("skipped") or "",
            ]
        )
    if rows:
        columns = [
            "precision",
            "batch_tokens",
            "steps",
            "vocabulary",
            "softmax",
            "steady words/s",
            "train-loop words/s",
        ]
        columns += ["end-to-end words/s", "peak GPU MiB", "held-out ppl", "lever / notes"]
        out.append(
            {
                "title": "Pretraining, `spacy-elmo pretrain` of the original-size config",
                "columns": columns,
                "rows": rows,
            }
        )
    compiled = parts.get("step") or {}
    rows = [
        [p["phase"], str(p["steps"]), _num(p["words_per_s"]), _num(p["seconds"], 1), _num(p["data_seconds"], 2)]
        for p in compiled.get("phases", [])
    ]
    if rows or compiled.get("error") or compiled.get("timed_out"):
        note = compiled.get("error") or ("stopped at its time box" if compiled.get("timed_out") else "")
        if note:
            rows.append(["(end)", "", "", "", note])
        out.append(
            {
                "title": "The pretraining step's levers (bf16), one run: the fused LSTM kernel, torch.compile",
                "columns": ["phase", "steps", "words/s", "seconds", "of which data"],
                "rows": rows,
            }
        )
    rows = [
        [
            name,
            str(t.get("summary") or ""),
            str(t.get("exit")),
            _num(t.get("seconds"), 0),
            ", ".join(t.get("failed", [])[:12]),
        ]
        for name, t in (parts.get("tests") or {}).items()
        if isinstance(t, dict) and "exit" in t
    ]
    if rows:
        out.append({"title": "Tests", "columns": ["session", "result", "exit", "seconds", "failed"], "rows": rows})
    return out


def targets(record: dict) -> dict:
    """The issue's targets, read off the record (None where a figure is missing)."""
    parts = record.get("parts", {})
    infer = [r for r in (parts.get("inference") or {}).get("rows", []) if "words_per_s" in r]
    arch, batch = record["settings"]["inference"]["lever_arch"], record["settings"]["inference"]["lever_batch"]

    def rate(mode, kernel):
        found = [
            r
            for r in infer
            if (r["arch"], r["batch"], r["mode"], r["kernel"], r["lever"]) == (arch, batch, mode, kernel, None)
        ]
        return found[0]["words_per_s"] if found else None

    pipe = {}
    for r in (parts.get("pipe") or {}).get("rows", []):
        if r.get("what", "").startswith("synthetic") and "over_raw" in r:
            pipe[r["what"]] = r["over_raw"]
    errors = {
        r["mode"]: r["relative_error"]
        for r in infer
        if (r["arch"], r["batch"], r["kernel"], r["lever"]) == (arch, batch, "auto", None) and "relative_error" in r
    }
    reference = None
    with contextlib.suppress(OSError, KeyError, ValueError):
        stated = json.loads((ROOT / "results" / "precision_error.json").read_text(encoding="utf-8"))
        reference = stated["fixtures"]["original size, random weights"]["bf16"]["max_rel_percent"] / 100
    pre = (parts.get("pretrain") or {}).get("rows", [])
    steady = [r["words_per_s_steady"] for r in pre if r.get("words_per_s_steady")]
    return {
        f"inference {arch} batch {batch} bf16, default kernel (words/s; target 500,000)": rate("bf16", "auto"),
        f"inference {arch} batch {batch} bf16 autocast, default kernel (words/s)": rate("bf16-autocast", "auto"),
        f"inference {arch} batch {batch} bf16 autocast, cuda_graphs (words/s)": rate("bf16-autocast", "cuda_graphs"),
        f"bf16 error against fp32, {arch} batch {batch}, default kernel (max abs ÷ max |h|)": errors or None,
        "the same on the CPU (results/precision_error.json, original size, random weights, bf16)": reference,
        "nlp.pipe over raw (target 90%)": pipe or None,
        "pretraining steady words/s, best run (target 280,000)": max(steady) if steady else None,
        "bf16 held-out perplexity over fp32's, less 1 (target within ±1%)": (parts.get("pretrain") or {}).get(
            "bf16_ppl_vs_fp32"
        ),
    }


def markdown(table: dict) -> str:
    lines = [f"**{table['title']}**", "", "| " + " | ".join(table["columns"]) + " |"]
    lines.append("| " + " | ".join("---" for _ in table["columns"]) + " |")
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def summary(record: dict) -> str:
    head = f"GPU benchmark: {record.get('machine', {}).get('gpu') or record.get('machine', {}).get('cpu')}, "
    head += f"commit {record.get('commit')}, status {json.dumps(record.get('status'))}"
    body = "\n\n".join(markdown(t) for t in tables(record))
    return head + "\n\n" + body + "\n\ntargets: " + json.dumps(targets(record), indent=1, default=str)


# --- here: the record into bench/results -------------------------------------------------------------------------

MACHINE_PATHS = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root|opt|usr|var)/[^\s'\",:;)\]]*")


def scrub(text: str) -> str:
    """A log as a committed record may hold it: a machine's folders by their last name (site-packages/x.py, TMP)."""

    def short(match: re.Match) -> str:
        path = match.group(0)
        for marker in ("site-packages/", "spacy_elmo_gpu_site/"):
            if marker in path:
                return "site-packages/" + path.split(marker, 1)[1]
        for folder in ("spacy_elmo/", "lab/", "tests/", "configs/"):
            if "/" + folder in path:
                return folder + path.split("/" + folder, 1)[1]
        return "TMP/" + Path(path).name if path.startswith("/tmp/") else Path(path).name

    return MACHINE_PATHS.sub(short, text)


def gpu_short_name(name: str) -> str:
    """'NVIDIA H200' → 'h200', 'NVIDIA H100 80GB HBM3' → 'h100'."""
    words = [w for w in re.split(r"[\s_-]+", name or "") if w and w.upper() not in ("NVIDIA", "TESLA", "GEFORCE")]
    return (words[0] if words else "gpu").lower()


def record_run(args) -> int:
    folder = Path(args.folder)
    source = folder / RECORD
    if not source.is_file():
        raise SystemExit(f"lab.gpu record: {source} not found (the $OUT files of `bash lab/gpu/gpu.sh`)")
    record = json.loads(source.read_text(encoding="utf-8"))
    missing = [k for k in ("schema", "commit", "machine", "settings", "parts", "status") if k not in record]
    if missing:
        raise SystemExit(f"lab.gpu record: {source}: not a record of `python -m lab.gpu run` (no {', '.join(missing)})")
    machine = record["machine"]
    gpu = machine.get("gpu") or "cpu"
    commit = (record.get("commit") or "unknown")[:7]
    name = f"gpu_{gpu_short_name(gpu)}_{commit}" + ("_quick" if record.get("quick") else "")
    into = Path(args.into) / name
    if into.exists():
        raise SystemExit(f"lab.gpu record: {into} exists; move it away first (a record is never overwritten)")
    into.mkdir(parents=True)
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):  # (not a write cut short: .gpu.json.tmp...)
            text = path.read_text(encoding="utf-8", errors="replace")
            (into / path.name).write_text(scrub(text), encoding="utf-8")
    started = (record.get("runs") or [{}])[0].get("started_utc") or ""  # 2026-12-04T16:10:03Z
    date = f"{started[:10]} {started[11:16]} UTC" if started else ""
    dirty = record.get("dirty") or []
    entry = {
        "title": f"GPU benchmark, {date} ({gpu})",
        "kind": "gpu",
        "schema": SCHEMA,
        "date": date,
        "commit": commit + ("-dirty" if dirty else ""),
        "dirty": dirty,
        "left_behind": record.get("left_behind", []),
        "tree": record.get("tree"),
        "machine": json.loads(scrub(json.dumps(machine))),
        "settings": record["settings"],
        "status": record["status"],
        "targets": targets(record),
        "tables": tables(record),
        "source": f"bench/results/{name}/{RECORD}",
    }
    runs = Path(args.runs)
    with runs.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    table = write_table(runs)
    print(f"lab.gpu record: {into}; appended to {runs}; wrote {table}")
    return 0


def readable(value) -> str:
    """A target's figure as a reader takes it in: rates with thousands separators, ratios to 4 digits, dicts of
    them as `key: value` lists; None as "not measured"."""
    if value is None:
        return "not measured"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {readable(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def write_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/gpu.md: every GPU run of this harness in `runs`, newest first, its tables and targets."""
    records = [json.loads(line) for line in runs.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = [r for r in records if r.get("kind") == "gpu" and r.get("schema") == SCHEMA]
    lines = [f"<!-- written by `python -m lab.gpu record` from {runs.name}: every run of lab/gpu/, newest first -->"]
    for r in reversed(chosen):
        lines += ["", f"## {r['title']}", "", f"Commit {r['commit']}; record: {r['source']}.", ""]
        lines += [f"- {k}: {readable(v)}" for k, v in r.get("targets", {}).items()]
        for table in r.get("tables", []):
            lines += ["", markdown(table)]
    out = out or runs.with_name("gpu.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
