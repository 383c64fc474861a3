"""lab/gpu/ and lab/gpu/pack.py, the GPU harness: its quick CPU run goes through every part and leaves a record
with the commit, machine, settings and figures of each row, which `record` appends to the log of runs; the tree
check, the carried packages and the scrubbing of machine paths."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.gpu import common, orchestrate, parts, tables
from lab.gpu import pack as gpu_pack

ROOT = Path(__file__).resolve().parents[2]
LINES = ROOT / "assets" / "confirmation" / "ud_english_lines" / "dev.conllu"  # real English, in the repository
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root|opt)/")  # as tests/project/test_portable_records.py


def corpus_from_treebank(folder: Path, sentences: int = 300) -> None:
    """train.txt and heldout.txt of tokenized English sentences (the treebank's word forms, one sentence a line)."""
    lines, words = [], []
    for line in LINES.read_text(encoding="utf-8").splitlines():
        if not line.strip() and words:
            lines.append(" ".join(words))
            words = []
        elif line and not line.startswith("#") and line.split("\t")[0].isdigit():
            words.append(line.split("\t")[1])
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text("\n".join(lines[:sentences]) + "\n", encoding="utf-8")
    (folder / "heldout.txt").write_text("\n".join(lines[sentences : sentences + 40]) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_the_quick_cpu_run_records_every_part_and_record_appends_it(tmp_path):
    prep, out = tmp_path / "prep", tmp_path / "out"
    corpus_from_treebank(prep / "corpus")
    subprocess.run([sys.executable, "-m", "lab.gpu.pack", "stamp", "--dest", str(prep)], cwd=ROOT, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", "lab/gpu/gpu.sh", "--device", "cpu", "--quick", "--prep", str(prep)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((out / "gpu.json").read_text(encoding="utf-8"))

    # where it ran and what: the stamped commit (not git's view there), the tree checked against the stamp
    assert record["commit"] == head and record["tree"]["same"] is True and record["tree"]["files"] > 100
    assert record["machine"]["device"] == "cpu" and record["machine"]["torch"] and record["machine"]["python"]
    assert record["machine"]["spacy"] and record["site"]["check"]["unmet"] == []
    assert set(record["settings"]) >= set(common.PARTS) and record["settings"]["pretrain"]["batch_tokens"] == 256
    assert [record["status"][part]["exit"] for part in common.PARTS] == [0] * len(common.PARTS)
    assert list(record["status"]) == common.PARTS and common.PARTS[:3] == ["tests", "gemm", "inference"]  # tests first
    assert record["range"]["torch"]["inside"] is True and record["range"]["python"]["inside"] is True

    # inference: every planned row, timed, with bf16's error against fp32; cuda_graphs refused on a CPU, in its row
    rows = record["parts"]["inference"]["rows"]
    plan = [spec for spec in parts._inference_plan(record["settings"]["inference"]) if "profile" not in spec]
    assert [(r["mode"], r["kernel"], r["batch"], r["lever"]) for r in rows] == [
        (p["mode"], p["kernel"], p["batch"], p["lever"]) for p in plan
    ]
    for row in rows:
        if row["kernel"] == "cuda_graphs":
            assert "CUDA" in row["error"] and "words_per_s" not in row
        else:
            assert row["words_per_s"] > 0 and row["seconds_per_batch"] > 0 and row["kernel_used"] in ("packed", "eager")
    cached = [r for r in rows if r["lever"] == "token cache on"]
    assert len(cached) == 2 and all(0 < r["cache_hit_rate"] <= 1 for r in cached)
    bf16 = [r for r in rows if r["mode"] != "fp32" and r["kernel"] != "cuda_graphs" and r["batch"] == 3]
    assert [r for r in bf16 if "relative_error" not in r] == [cached[1]]  # Zipfian text: no fp32 row to compare
    assert all(0 < r["relative_error"] < 0.1 for r in bf16 if r is not cached[1])
    assert "Name" in (out / "profile_inference.txt").read_text(encoding="utf-8")

    # pretraining: fp32 and bf16 for the same steps with their held-out perplexity, and the larger batch
    pre = record["parts"]["pretrain"]
    assert [(r["precision"], r["batch_tokens"]) for r in pre["rows"]] == [("fp32", 256), ("bf16", 256), ("bf16", 1024)]
    for row in pre["rows"]:
        assert row["heldout_ppl"] > 1 and row["vocab_size"] > 100 and row["softmax"].startswith("sampled")
        assert row["words_per_s_train"] > 0 and row["words_per_s_end_to_end"] > 0
    assert all(r["words_per_s_steady"] > 0 for r in pre["rows"][:2])
    assert abs(pre["bf16_ppl_vs_fp32"]) < 0.5 and "TMP" in pre["command"] and "/tmp/" not in pre["command"]

    # nlp.pipe against the raw model on the same sentences, and its levers
    pipe = record["parts"]["pipe"]["rows"]
    assert len(pipe) == 5 and all("error" not in r for r in pipe), pipe
    assert all(r["words_per_s"]["raw"] > 0 and all(v > 0 for v in r["over_raw"].values()) for r in pipe)
    assert "pipe texts, batch_size 4" in pipe[0]["words_per_s"] and pipe[3]["max_batch_tokens"] == 16384

    tests = record["parts"]["tests"]
    assert set(tests) == {"spacy_gpu", "cuda"} and all(
        t["exit"] == 0 and "passed" in t["summary"] for t in tests.values()
    )
    step = record["parts"]["step"]
    phases = [p["phase"] for p in step["phases"]]
    assert phases == ["default warm-up", "default", "fused warm-up", "fused", "compiling", "compiled"]
    assert step["fused_over_default"] > 0 and step["compiled_over_default"] > 0
    assert "Name" in (out / "profile_pretrain.txt").read_text(encoding="utf-8")
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back
    assert "targets:" in done.stdout and (out / "log.txt").read_text(encoding="utf-8").count("lab.gpu: part") == 6

    # here: the record into the log of runs, its files into bench/results/<name>/ without machine paths
    runs, results = tmp_path / "runs.jsonl", tmp_path / "results"
    runs.write_text(json.dumps({"kind": "inference", "tables": []}) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "lab.gpu", "record", str(out), "--runs", str(runs), "--into", str(results)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    entry = json.loads(runs.read_text(encoding="utf-8").splitlines()[-1])
    assert entry["kind"] == "gpu" and entry["schema"] == common.SCHEMA and entry["commit"].startswith(head[:7])
    assert entry["machine"]["device"] == "cpu" and entry["settings"] == record["settings"]
    assert [t["title"].split(",")[0].split(" ")[0] for t in entry["tables"]][:3] == [
        "Ceilings",
        "Inference",
        "nlp.pipe",
    ]
    inference = entry["tables"][1]
    assert len(inference["rows"]) == len(rows) and all(len(r) == len(inference["columns"]) for r in inference["rows"])
    folder = results / f"gpu_cpu_{head[:7]}_quick"
    assert entry["source"] == f"bench/results/{folder.name}/gpu.json"
    copied = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    assert {"gpu.json", "log.txt", "tests_spacy_gpu.txt", "tests_cuda.txt"} <= set(copied)
    assert not [name for name, text in copied.items() if MACHINE_PATH.search(text)]
    table = (tmp_path / "gpu.md").read_text(encoding="utf-8")
    assert entry["title"] in table and "| tiny | 3 | bf16 |" in table
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode != 0 and "exists" in again.stderr and len(runs.read_text().splitlines()) == 2


def test_the_declared_range_is_setup_cfgs_and_a_version_outside_it_is_told(tmp_path):
    """The harness measures only a Python and torch inside the range setup.cfg declares (a local tag such as
    +cu130 does not count); its own setup.cfg is read, comments between the requirements skipped."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    declared = orchestrate.declared_range()
    assert f"torch{declared['torch']}" in parser["options"]["install_requires"].replace(" ", "")
    assert declared["python"] == parser["options"]["python_requires"]
    cfg = tmp_path / "setup.cfg"
    cfg.write_text(
        "[options]\npython_requires = >=3.10\ninstall_requires =\n    spacy>=3.8\n    # torch<2 is not this line\n"
        "    torch>=2.4.1,<3\n    numpy\n",
        encoding="utf-8",
    )
    assert orchestrate.declared_range(cfg) == {"python": ">=3.10", "torch": "<3,>=2.4.1"}
    declared = orchestrate.declared_range(cfg)
    inside = orchestrate.versions_in_range(declared, {"python": "3.12.3", "torch": "2.9.0+cu130"})
    assert inside == {
        "python": {"found": "3.12.3", "declared": ">=3.10", "inside": True},
        "torch": {"found": "2.9.0+cu130", "declared": "<3,>=2.4.1", "inside": True},
    }
    outside = orchestrate.versions_in_range(declared, {"python": "3.9.18", "torch": "2.3.1+cu121"})
    assert [v["inside"] for v in outside.values()] == [False, False]


def test_the_tree_check_names_changed_and_missing_files(tmp_path):
    for name, text in (("a.txt", "one"), ("b/c.txt", "two"), ("d.txt", "three")):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    stamp = {"files": {name: common.blob_sha1(tmp_path / name) for name in ("a.txt", "b/c.txt", "d.txt")}}
    assert (
        common.blob_sha1(tmp_path / "a.txt")
        == subprocess.run(
            ["git", "hash-object", str(tmp_path / "a.txt")], capture_output=True, text=True
        ).stdout.strip()
    )
    assert common.check_tree(stamp, tmp_path) == {"files": 3, "differ": [], "missing": [], "same": True}
    (tmp_path / "b" / "c.txt").write_text("changed")
    (tmp_path / "d.txt").unlink()
    changed = {"files": 3, "differ": ["b/c.txt"], "missing": ["d.txt"], "same": False}
    assert common.check_tree(stamp, tmp_path) == changed


def test_the_stamp_tells_changes_from_files_left_behind(tmp_path):
    """A file taken out of the index and moved away for the call (docs/performance.md) is left behind, not a
    change; a modified file is a change; neither a file left behind nor an ignored one is among those sent."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)

    git("init", "-q")
    for name in ("kept.txt", "big.bin", "code.py", ".gitignore"):
        (repo / name).write_text("/ignored/\n" if name == ".gitignore" else name)
    git("add", ".")
    git("commit", "-q", "-m", "x")
    (repo / "ignored").mkdir()
    (repo / "ignored" / "x.txt").write_text("not sent")
    (repo / "code.py").write_text("changed")
    git("rm", "-q", "--cached", "big.bin")
    (repo / "big.bin").unlink()
    stamp = json.loads(gpu_pack.stamp(tmp_path / "prep", repo).read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert stamp["commit"] == head and stamp["dirty"] == ["code.py"] and stamp["left_behind"] == ["big.bin"]
    assert sorted(stamp["files"]) == [".gitignore", "code.py", "kept.txt"]
    assert common.check_tree(stamp, repo)["same"] is True


def test_a_record_names_no_folder_of_the_machine():
    text = (
        "Model saved to /tmp/tmpab12/run0\n"
        'File "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 3\n'
        "/tmp/spacy_elmo_gpu_site/spacy/language.py:12: warning\n"
        "at /root/repo/spacy_elmo/hf/modeling_elmo.py:40 and /work/wt/lab/gpu/parts.py\n"
    )
    assert tables.scrub(text) == (
        "Model saved to TMP/run0\n"
        'File "site-packages/torch/nn/modules/module.py", line 3\n'
        "site-packages/spacy/language.py:12: warning\n"
        "at spacy_elmo/hf/modeling_elmo.py:40 and lab/gpu/parts.py\n"
    )
    assert tables.gpu_short_name("NVIDIA H200") == "h200" and tables.gpu_short_name("NVIDIA H100 80GB HBM3") == "h100"


def test_steady_speed_is_taken_after_the_warm_up_steps():
    records = [{"event": "start", "step": 0}] + [
        {"step": s, "words": 100 * s, "train_seconds": 2.0 * s if s <= 10 else 20 + (s - 10), "words_per_s": 1.0}
        for s in range(5, 35, 5)
    ]
    assert parts.steady_rate(records, 10) == pytest.approx(100.0)  # 2000 words in the 20 s after step 10
    assert parts.steady_rate(records, 40) is None


def test_the_carried_packages_are_the_requirements_the_image_lacks():
    carried = gpu_pack.carried()
    assert {"spacy", "thinc", "pydantic", "pydantic-core", "confection", "blis", "srsly"} <= set(carried)
    assert not {"torch", "numpy", "transformers", "h5py", "safetensors", "tqdm"} & set(carried)  # the image's own
    assert "typing-extensions" in carried  # newer than the image may hold (CARRY_ALWAYS)
    from importlib.metadata import version

    assert carried["spacy"] == version("spacy") and carried["thinc"] == version("thinc")


@pytest.mark.slow
def test_the_packed_site_unpacks_with_the_package_entry_points(tmp_path):
    """The package's own wheel through install, prune, pack and the harness's unpack: its metadata arrives with
    the spaCy entry points setup.cfg declares, its code stays behind (the checkout's is imported)."""
    wheel = gpu_pack.package_wheel(tmp_path / "wheels")
    folder = tmp_path / "site"
    gpu_pack.install([wheel], folder)
    assert (folder / "spacy_elmo" / "__init__.py").is_file()
    gpu_pack.prune(folder)
    archive = gpu_pack.pack(folder, tmp_path / "prep", {"python": gpu_pack.DEVICE_TAG})
    assert json.loads((tmp_path / "prep" / "site.json").read_text())["python"] == "cp312 linux x86_64"
    unpacked = tmp_path / "unpacked"
    manifest = orchestrate.unpack_site(archive, unpacked)
    assert manifest["python"] == gpu_pack.DEVICE_TAG and manifest["unpacked_bytes"] > 0
    assert not (unpacked / "spacy_elmo").exists() and not (unpacked / "bin").exists()
    (info,) = unpacked.glob("spacy_elmo-*.dist-info")
    points = (info / "entry_points.txt").read_text(encoding="utf-8")
    setup = (ROOT / "setup.cfg").read_text(encoding="utf-8")
    for name in ("elmo = spacy_elmo.spacy.component:make_elmo", "spacy-elmo.ElmoBiLM.v1"):
        assert name in points and name in setup
