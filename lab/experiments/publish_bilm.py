"""Publishes a pretrained biLM into the repository (results/bilm) so that every later session reads the
same bytes (issue 33).

    python -m lab.experiments.publish_bilm work/bilm results/bilm

Why a committed copy: a rebuild of the project biLM from a clean clone is bit-for-bit equal on the
machine that pretrained it (tests/project/test_workflows_pretrain.py: a resumed 2-process run ends with the
same sha256 as an uninterrupted one), but not across the CPUs machines of this kind come with
(results/bilm_rebuild.json: the same commit's code, config and corpus gave other weights on an
Intel Xeon than on an AMD EPYC). Runs that read the biLM are comparable across sessions only when
they read the same weights; the seeds workflow therefore reads the committed copy
(`--paths.elmo results/bilm`), and each run's record holds its sha256.

Copies the model directory's files (weights, config, tokenizer, vocabulary, card, pretraining
config, summary, metrics and provenance; not its checkpoints) and writes DEST/published.json: the
sha256 of each file copied, the source, the commit that published it and when. A DEST holding other
weights is refused unless --replace is given (the runs that read them must then be redone).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from spacy_elmo.provenance import git_state, portable, sha256, utc_now

SKIP = {"checkpoints", "published.json"}


def publish(source: Path, dest: Path, replace: bool = False) -> dict:
    weights = source / "model.safetensors"
    if not weights.is_file() or not (source / "config.json").is_file():
        raise SystemExit(f"{source}: not a biLM model directory (expected config.json and model.safetensors)")
    if not (source / "provenance.json").is_file():
        raise SystemExit(f"{source}/provenance.json: missing (a published biLM says where it came from)")
    digest = sha256(weights)
    publisher = git_state()  # before DEST changes the tree
    if (dest / "model.safetensors").is_file() and sha256(dest / "model.safetensors") != digest and not replace:
        raise SystemExit(
            f"{dest}/model.safetensors: holds other weights than {weights}; "
            "pass --replace to publish these (the runs that read the old ones must be redone)"
        )
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = {}
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if relative.parts[0] in SKIP or not path.is_file():
            continue
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / relative)
        files[str(relative)] = sha256(dest / relative)
    if files["model.safetensors"] != digest:
        raise SystemExit(f"{dest}/model.safetensors: the copy's sha256 differs from {weights}'s")
    record = {"source": portable(str(source)), "files": files, "published_utc": utc_now(), "published_by": publisher}
    (dest / "published.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a pretrained biLM directory (work/bilm)")
    parser.add_argument("dest", type=Path, help="where the repository keeps it (results/bilm)")
    parser.add_argument("--replace", action="store_true", help="publish over a DEST holding other weights")
    args = parser.parse_args(argv)
    record = publish(args.source, args.dest, args.replace)
    print(
        f"{args.dest}: model.safetensors {record['files']['model.safetensors'][:12]} "
        f"({len(record['files'])} files from {args.source})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
