"""The ledger of test looks, `results/test_looks.json`: one entry per scoring of a trained model on the test set.

Only lab/experiments/evaluate_runs.py appends to it (and scripts/reconstruct_test_looks.py, in git history at 2959825,
wrote the entries it rebuilt from git history); nobody edits it by hand. An entry says what was scored (task, fraction,
system, seed, the recipe: config sha256, `spacy train` settings beyond the run's data, seed and device,
training-data sha256, biLM weights sha256), the score, where and when (commit, dirty and its `dirty_paths`,
UTC), and why (`reason`).

The rule it serves (results/README.md, "Protocol"): a cell gets one look per recipe. `same_recipe_looks` finds the
earlier looks of the same task, fraction, system, seed and recipe; evaluate_runs.py refuses to score such a
run again unless told why (`--again REASON`, recorded), or unless its model is bit-identical to the one
looked at before (the same model gives the same score: no new information).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ABOUT = (
    "One entry per scoring of a trained model on its data's test set, appended by lab/experiments/evaluate_runs.py "
    "(entries whose source starts with 'reconstructed' were rebuilt from git history by "
    "scripts/reconstruct_test_looks.py, in git history at 2959825). Never edited by hand."
)
# per task: the score `spacy evaluate` writes for it
TASK_SCORE = {"ner": "ents_f", "pos": "tag_acc"}
# run names of lab/experiments/train_ner.py: [task_]system_pct[_sSEED] (the `all` workflow's runs have no task: NER)
RUN_NAME = re.compile(r"^(?:(?P<task>ner|pos)_)?(?P<system>[a-z][a-z0-9_]*?)_(?P<pct>\d+)(?:_s(?P<seed>\d+))?$")
# `spacy train` options that name the run's data, output, seed and device rather than its recipe (the data
# and the biLM enter the recipe by their sha256)
NOT_RECIPE = {"--output", "--system.seed", "--gpu-id", "--paths.train", "--paths.dev", "--paths.elmo"}
RECIPE_KEYS = ("config_sha256", "settings", "train_sha256", "bilm_sha256")


def parse_run(name: str) -> dict | None:
    """{task, system, fraction, seed (None when the name has none)} of a run name, or None."""
    match = RUN_NAME.match(name)
    if not match:
        return None
    return {
        "task": match["task"] or "ner",
        "system": match["system"],
        "fraction": match["pct"],
        "seed": int(match["seed"]) if match["seed"] is not None else None,
    }


def recipe(train_record: dict | None) -> dict:
    """What a training run was, from its provenance record: its config (name, sha256), its `spacy train`
    settings beyond data, output, seed and device, and the sha256 of its training data and biLM weights
    (None where the record does not say)."""
    record = train_record or {}
    command = [str(arg) for arg in record.get("command") or []]
    inputs = record.get("inputs") or {}
    if "train" not in command or command.index("train") + 1 >= len(command):
        return {"config": None, "config_sha256": None, "settings": None, "train_sha256": None, "bilm_sha256": None}
    at = command.index("train")
    config, options = command[at + 1], command[at + 2 :]
    pairs = [(options[i], options[i + 1]) for i in range(0, len(options) - 1, 2) if options[i].startswith("--")]
    given = dict(pairs)
    config_sha = inputs.get(config) or next(
        (c.get("sha256") for c in record.get("configs") or [] if c.get("path") == config), None
    )
    elmo = given.get("--paths.elmo")
    return {
        "config": Path(config).name,
        "config_sha256": config_sha,
        "settings": [f"{key} {value}" for key, value in pairs if key not in NOT_RECIPE],
        "train_sha256": inputs.get(given.get("--paths.train", "")),
        "bilm_sha256": bilm_sha256(inputs, elmo),
    }


def bilm_sha256(inputs: dict, elmo: str | None) -> str | None:
    """The weights' sha256 among a run's hashed inputs. A biLM outside the repository is named by its folder's name
    alone (provenance.portable), and its weights by "model.safetensors": that key is the biLM's, it has no other."""
    if not elmo:
        return None
    return inputs.get(f"{elmo}/model.safetensors") or (inputs.get("model.safetensors") if "/" not in elmo else None)


def run_fields(run: str, parsed: dict, train_record: dict) -> dict:
    """The fields of a committed run record (results/runs/...) that its training's provenance gives: which run it is
    and what it read (recipe, config, data and biLM sha256). lab/experiments/train_ner.py writes records with them and
    scripts/reconstruct_run_records.py (in git history at 2959825) rebuilt the published run's records with them."""
    rec = recipe(train_record)
    inputs = train_record.get("inputs") or {}
    return {
        "run": run,
        "task": parsed["task"],
        "fraction": parsed["fraction"],
        "system": parsed["system"],
        "seed": train_record.get("seed"),
        "settings": rec["settings"],
        "config": rec["config"],
        "config_sha256": rec["config_sha256"],
        "data_sha256": {key: value for key, value in inputs.items() if key.endswith(".spacy")},
        "bilm_sha256": rec["bilm_sha256"],
    }


def dirty_paths(git: dict, record: dict | None = None) -> list[str] | None:
    """The uncommitted paths of a look's scoring, from its provenance's `git` block; where that lacks them,
    from the run's committed record (results/runs/...: the scoring's provenance under "test", when it names
    the same commit); [] for a clean tree; None where no file says."""
    if git.get("dirty_paths") is not None:
        return list(git["dirty_paths"])
    scored = (((record or {}).get("test") or {}).get("provenance") or {}).get("git") or {}
    if scored.get("dirty_paths") is not None and scored.get("commit") == git.get("commit"):
        return list(scored["dirty_paths"])
    return [] if git.get("dirty") is False else None


def recipe_known(entry: dict) -> bool:
    """Whether an entry's recipe is fully known (config, settings and data; the biLM too for a run that has one)."""
    rec = entry.get("recipe") or {}
    return all(rec.get(key) is not None for key in ("config_sha256", "settings", "train_sha256"))


def same_recipe_looks(ledger: dict, look: dict) -> list[dict]:
    """The earlier looks at the same task, fraction, system and seed with the same recipe (entries whose
    recipe the record does not give are never counted as the same: they are shown, not matched)."""
    if not recipe_known(look):
        return []
    keys = ("task", "fraction", "system", "seed")
    return [
        entry
        for entry in ledger.get("looks", [])
        if all(entry.get(k) == look.get(k) for k in keys)
        and recipe_known(entry)
        and all((entry["recipe"].get(k) == look["recipe"].get(k)) for k in RECIPE_KEYS)
    ]


def load(path: Path) -> dict:
    """The ledger at `path` ({"about", "looks": []} when there is none yet)."""
    if path.is_file():
        return json.loads(path.read_text(encoding="utf8"))
    return {"about": ABOUT, "looks": []}


def append(path: Path, look: dict) -> dict:
    """Appends `look` to the ledger at `path`, numbered after the last entry; returns it as written."""
    ledger = load(path)
    look = {"look": len(ledger["looks"]) + 1, **look}
    ledger["looks"].append(look)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ledger, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    return look


def model_sha256(model: Path, skip: tuple[str, ...] = ("meta.json",)) -> str:
    """One sha256 over a trained pipeline's files (`model-best`: names and contents), those named in `skip` aside
    (by default meta.json, which holds the training's timings): two models with equal digests make the same
    predictions, so score the same."""
    import hashlib

    from spacy_elmo.provenance import sha256

    digest = hashlib.sha256()
    for path in sorted(p for p in model.rglob("*") if p.is_file() and p.relative_to(model).as_posix() not in skip):
        digest.update(f"{path.relative_to(model).as_posix()}\0{sha256(path)}\n".encode())
    return digest.hexdigest()
