"""The configs ship with the package (spacy_elmo/configs is the repository's configs/): an installed
wheel carries them, and `spacy-elmo init-config` writes one that spaCy's config loader accepts."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import spacy

from spacy_elmo.cli import main
from spacy_elmo.tools.init_config import shipped_configs
from spacy_elmo.training.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = sorted(p.name for p in (ROOT / "configs").glob("*.cfg"))


def test_package_configs_are_the_project_configs():
    assert TOP_LEVEL and sorted(p.name for p in shipped_configs().values()) == TOP_LEVEL
    for path in shipped_configs().values():
        assert path.read_bytes() == (ROOT / "configs" / path.name).read_bytes()


def test_wheel_contains_the_configs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "configs", src / "configs")
    shutil.copytree(
        ROOT / "spacy_elmo", src / "spacy_elmo", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("spacy_elmo-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n.split("/")[-1] for n in names if n.startswith("spacy_elmo/configs/")) == TOP_LEVEL
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("spacy_elmo/configs/ner_elmo.cfg") == (ROOT / "configs" / "ner_elmo.cfg").read_bytes()


@pytest.mark.parametrize("name", ["ner_elmo", "tagger_elmo", "textcat_elmo", "ner_baseline"])
def test_init_config_writes_a_config_spacy_loads(name, tmp_path, tiny_model_dir, capsys):
    out = tmp_path / f"{name}.cfg"
    assert main(["init-config", name, str(out)]) == 0
    config = spacy.util.load_config(out, overrides={"paths.elmo": str(tiny_model_dir)} if "elmo" in name else {})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    assert ("elmo" in nlp.pipe_names) == ("elmo" in name)
    assert main(["init-config", name, str(out)]) == 2  # no silent overwrite
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert main(["init-config", name, str(out), "--force"]) == 0


def test_init_config_pretraining_and_unknown_names(tmp_path, capsys):
    out = tmp_path / "small.cfg"
    assert main(["init-config", "pretrain_small", str(out)]) == 0
    assert load_settings(out)["model"]["projection_dim"] == 128
    assert main(["init-config", "ner_elmoo", str(tmp_path / "x.cfg")]) == 2
    err = capsys.readouterr().err
    assert "no shipped config 'ner_elmoo'" in err and "ner_elmo" in err


def test_init_config_lang_takes_the_language_tokenizer_from_spacy(tmp_path, tiny_model_dir):
    """--lang writes the language's own tokenizer, as `spacy init config --lang` does: a Chinese config
    splits Chinese text (the English tokenizer keeps a clause without spaces as one or two tokens)."""
    out = tmp_path / "zh.cfg"
    assert main(["init-config", "ner_elmo", str(out), "--lang", "zh"]) == 0
    config = spacy.util.load_config(out, overrides={"paths.elmo": str(tiny_model_dir)})
    zh_defaults = spacy.util.get_lang_class("zh").default_config
    assert config["nlp"]["lang"] == "zh" and config["nlp"]["tokenizer"] == zh_defaults["nlp"]["tokenizer"]
    assert config["initialize"]["tokenizer"] == zh_defaults["initialize"]["tokenizer"]
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    assert [t.text for t in nlp.make_doc("杨过在北京练功。")] == list("杨过在北京练功。")  # spaCy's default: char
    # the tokenizer's own settings are overrides like any other, e.g. the segmenter
    assert (
        main(
            [
                "init-config",
                "ner_elmo",
                str(out),
                "--lang",
                "zh",
                "--force",
                "--nlp.tokenizer.segmenter",
                "pkuseg",
                "--initialize.tokenizer.pkuseg_model",
                "spacy_ontonotes",
            ]
        )
        == 0
    )
    config = spacy.util.load_config(out)
    assert config["nlp"]["tokenizer"]["segmenter"] == "pkuseg"
    assert config["initialize"]["tokenizer"]["pkuseg_model"] == "spacy_ontonotes"
    # a language with spaCy's rule-based tokenizer: the shipped config, byte for byte, but its lang
    assert main(["init-config", "ner_elmo", str(out), "--lang", "en", "--force"]) == 0
    assert out.read_bytes() == (ROOT / "configs" / "ner_elmo.cfg").read_bytes()


@pytest.mark.parametrize(
    "args, message",
    [
        (["ner_elmo", "--lang", "qq"], "--lang 'qq': spaCy has no such language"),
        (["ner_elmo", "--nlp.lang", "qq"], "--lang 'qq': spaCy has no such language"),
        (["pretrain_small", "--lang", "qq"], "--lang 'qq': spaCy has no such language"),
        (
            ["ner_elmo", "--lang", "zh", "--nlp.tokenizer.segmenter", "nope"],
            "segmenter: at root: 'nope' is not <enum 'Segmenter'> (expected one of char, jieba, pkuseg)",
        ),
    ],
)
def test_init_config_bad_language_is_one_line(args, message, tmp_path, capsys):
    out = tmp_path / "x.cfg"
    assert main(["init-config", args[0], str(out), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("jieba") is not None, reason="jieba is installed")
def test_init_config_names_a_missing_segmenter_package(tmp_path, capsys):
    """A segmenter that needs a package not installed here (jieba) fails when the config is written."""
    assert (
        main(["init-config", "ner_elmo", str(tmp_path / "x.cfg"), "--lang", "zh", "--nlp.tokenizer.segmenter", "jieba"])
        == 2
    )
    err = capsys.readouterr().err
    assert "spacy.zh.ChineseTokenizer (language 'zh') needs a package not installed here" in err and "jieba" in err


REVISION = "0123456789abcdef0123456789abcdef01234567"

# more names, in one fresh process (huggingface_hub reads HF_HUB_OFFLINE and the cache's place when imported)
_MORE = """
import contextlib, io, json, sys
from spacy_elmo.cli import main

results = []
for args in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results.append((main(["init-config", "ner_elmo_trf", "-", *args]), err.getvalue()))
print(json.dumps(results))
"""


@pytest.mark.slow
def test_init_config_says_in_one_line_when_the_transformer_is_not_here(tmp_path, tiny_model_dir, tiny_bert_dir):
    """`init-config ner_elmo_trf --paths.transformer NAME`, as a user types it, offline (HF_HUB_OFFLINE=1) and
    with the hub unreachable: a name that is neither a folder nor a hub id in the local cache is one line and
    exit 2, nothing written, at once (transformers would print six tracebacks when training starts); a local
    folder and a cached hub id, bare (as `roberta-base`) or with its owner, give the config."""
    cache = tmp_path / "hub"
    for repo in ("models--tiny-bert", "models--test-org--tiny-bert"):  # the hub cache's layout
        shutil.copytree(tiny_bert_dir, cache / repo / "snapshots" / REVISION)
        (cache / repo / "refs").mkdir()
        (cache / repo / "refs" / "main").write_text(REVISION)
    base = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    offline = {**base, "HF_HUB_OFFLINE": "1"}
    unreachable = {**base, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}  # refused at once
    elmo = ["--paths.elmo", str(tiny_model_dir)]
    config = tmp_path / "trf.cfg"
    config.write_text("# mine\n")

    for transformer, env, why in [
        ("roberta-base", offline, "as a Hugging Face hub id it is not in the local cache, and HF_HUB_OFFLINE is set"),
        ("FacebookAI/roberta-base", unreachable, "not in the local cache, and the hub cannot be reached ("),
    ]:
        command = ["-m", "spacy_elmo", "init-config", "ner_elmo_trf", str(config), "--force", *elmo]
        done = subprocess.run(
            [sys.executable, *command, "--paths.transformer", transformer],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"error: --paths.transformer {transformer!r}: no such directory: {transformer}")
        assert why in done.stderr and "Retrying in" not in done.stderr, done.stderr
        assert config.read_text() == "# mine\n"  # nothing written

    missing = str(tmp_path / "no-such-bert")
    cases = [
        [*elmo, "--paths.transformer", missing],
        [*elmo, "--components.transformer.model.name", "roberta-base"],
        *([*elmo, "--paths.transformer", name] for name in (str(tiny_bert_dir), "tiny-bert", "test-org/tiny-bert")),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _MORE, json.dumps(cases)], capture_output=True, text=True, timeout=300, env=offline
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (gone, given), (override, _), *found = json.loads(done.stdout.splitlines()[-1])
    assert (gone, given) == (2, f"error: --paths.transformer {missing!r}: no such directory: {missing}\n")
    assert override == 2 and _.startswith("error: [components.transformer.model] name 'roberta-base': no such dir")
    assert [code for code, _ in found] == [0, 0, 0], found
