"""The configs ship with the package (spacy_elmo/configs is the repository's configs/): an installed
wheel carries them, and `spacy-elmo init-config` writes one that spaCy's config loader accepts."""

from __future__ import annotations

import importlib.util
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
