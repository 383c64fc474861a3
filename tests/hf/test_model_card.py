"""README.md model cards: written by save_pretrained, `spacy-elmo convert` and `spacy-elmo pretrain`,
and uploaded by push_to_hub (captured at the network call; everything before it runs for real)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi, ModelCard
from huggingface_hub.hf_api import RepoUrl

from spacy_elmo import ElmoConfig, ElmoForBidirectionalLM, ElmoModel, ElmoTokenizer
from spacy_elmo.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _card(directory) -> ModelCard:
    return ModelCard.load(str(Path(directory) / "README.md"))


def _params(module) -> str:
    return f"{sum(p.numel() for p in module.parameters()):,}"


def test_save_pretrained_writes_a_card_whose_code_runs(tiny_model, tmp_path, monkeypatch):
    out = tmp_path / "saved"
    tiny_model.save_pretrained(out)
    card = _card(out)
    assert card.data.library_name == "spacy-elmo"
    assert {"elmo", "feature-extraction"} <= set(card.data.tags)
    assert card.data.license is None  # unknown: not guessed
    assert f"| parameters | {_params(tiny_model)} in the biLM |" in card.text
    assert "2 layers per direction, cell 64, projection 16" in card.text
    # the fixture is load_legacy's: the card names the files it was converted from
    assert "- Converted from the original ELMo files: `options.json` + `lm_weights.hdf5`." in card.text
    assert (out / "tokenizer_config.json").is_file()  # a complete directory: the tokenizer too
    # the card's own snippets (HF and spaCy) run on the directory it describes
    blocks = re.findall(r"```python\n(.*?)```", card.text, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_the_card_names_what_a_converter_read_unless_told_otherwise(fixtures_dir, tmp_path):
    """load_efml's model, as load_legacy's (above), records its source for the card; a source given to
    save_pretrained wins; a model built from a config has none, and its card says so."""
    from spacy_elmo.formats.efml import load_efml

    model, tokenizer = load_efml(fixtures_dir / "efml_tiny")
    model.save_pretrained(tmp_path / "efml", tokenizer=tokenizer)
    card = _card(tmp_path / "efml").text
    assert "- Converted from the original ELMo files: the ELMoForManyLangs directory `efml_tiny`." in card
    assert str(fixtures_dir) not in card  # names only: the folders are private
    model.save_pretrained(tmp_path / "told", tokenizer=tokenizer, model_card={"source": "`my.hdf5`"})
    assert "- Converted from the original ELMo files: `my.hdf5`." in _card(tmp_path / "told").text
    ElmoForBidirectionalLM(ElmoConfig(vocab_size=10, lstm_dim=8, projection_dim=4, filters=[[1, 4]])).save_pretrained(
        tmp_path / "new"
    )
    assert "- Not recorded (this card was written by `save_pretrained`)." in _card(tmp_path / "new").text


def test_the_source_is_recorded_once_with_the_files_the_loader_attached(allennlp_dir, tmp_path):
    """`converted_from` is the attached files' (where low precisions read fp32 weights back from), not a
    second record: it follows them, stays when the weights change after loading, and cannot be set."""
    from spacy_elmo import load_legacy

    model = load_legacy(allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5")
    assert model.converted_from == "`options.json` + `lm_weights.hdf5`"
    with torch.no_grad():
        model.encoder.layers[0].bias.add_(1.0)  # fine-tuned, say: still converted from those files
    assert model.converted_from == "`options.json` + `lm_weights.hdf5`"
    model.save_pretrained(tmp_path / "saved")
    assert ElmoModel.from_pretrained(tmp_path / "saved").converted_from is None  # a model directory: not converted
    model.attach_weights_files(None, "it was read from bytes")
    assert model.converted_from is None
    with pytest.raises(AttributeError):
        model.converted_from = "`other.hdf5`"


def test_lm_head_and_training_details(tmp_path):
    lm = ElmoForBidirectionalLM(
        ElmoConfig(vocab_size=10, lstm_dim=8, projection_dim=4, filters=[[1, 4]], char_embedding_dim=4)
    )
    lm.save_pretrained(
        tmp_path,
        model_card={
            "license": "apache-2.0",
            "training": {
                "text": ["/home/me/corpus/a.txt"],
                "corpus_words": 1234,
                "step": 5,
                "words": 100,
                "heldout_ppl": 12.3456,
            },
        },
    )
    card = _card(tmp_path)
    assert card.data.license == "apache-2.0"
    assert f"{_params(lm.elmo)} in the biLM + {_params(lm.lm_head)} in the LM head" in card.text
    assert "softmax over 10 words" in card.text and "ElmoForBidirectionalLM.from_pretrained" in card.text
    assert "Training text: `a.txt`" in card.text and "/home/me" not in card.text
    assert "1,234 words" in card.text and "Held-out perplexity: 12.35" in card.text
    lm.save_pretrained(tmp_path / "nocard", model_card=False)
    assert not (tmp_path / "nocard" / "README.md").exists()


def test_convert_writes_card_with_source_license_and_lang(allennlp_dir, tmp_path):
    out = tmp_path / "converted"
    assert (
        main(
            [
                "convert",
                str(allennlp_dir / "options.json"),
                str(allennlp_dir / "lm_weights.hdf5"),
                str(out),
                "--license",
                "apache-2.0",
                "--lang",
                "de",
            ]
        )
        == 0
    )
    card = _card(out)
    assert card.data.license == "apache-2.0" and card.data.language == "de"
    assert "Converted from the original ELMo files: `options.json` + `lm_weights.hdf5`" in card.text
    assert ElmoTokenizer.from_pretrained(out).lang == "de"


def test_card_of_a_zh_model_speaks_zh_and_says_how_to_install(fixtures_dir, tmp_path, monkeypatch):
    out = tmp_path / "zh"
    assert main(["convert", str(fixtures_dir / "efml_tiny"), str(out), "--lang", "zh"]) == 0
    card = _card(out)
    assert card.data.language == "zh"
    # the package is not on PyPI: the card says what README's quick start says
    assert "pip install spacy-elmo" not in card.text and "pypi.org" not in card.text
    assert "it is not on PyPI: `pip install .` in a clone of its repository" in card.text
    spacy_block = re.findall(r"```python\n(.*?)```", card.text, re.S)[1]
    assert 'nlp = spacy.blank("zh")' in spacy_block
    monkeypatch.chdir(tmp_path)
    exec(
        compile(spacy_block + "assert nlp.lang == 'zh' and doc._.elmo.layers.shape[0] == 3\n", "README.md", "exec"), {}
    )


def test_pretrain_card_has_training_text_size_and_heldout_perplexity(tmp_path):
    train, held = tmp_path / "train.txt", tmp_path / "heldout.txt"
    train.write_text("the cat sat on the mat .\nthe dog sat on the rug .\n" * 40)
    held.write_text("the cat sat on the rug .\n" * 5)
    out = tmp_path / "run"
    assert (
        main(
            [
                "pretrain",
                str(ROOT / "configs" / "pretrain_tiny.cfg"),
                "--output",
                str(out),
                "--no-progress",
                "--paths.train",
                str(train),
                "--paths.heldout",
                str(held),
                "--training.max_steps",
                "2",
            ]
        )
        == 0
    )
    summary = json.loads((out / "pretrain_summary.json").read_text())
    card = _card(out)
    assert "Training text: `train.txt`" in card.text
    assert "Size of the training text: 560 words." in card.text  # 80 lines × 7 words, <S>/</S> not counted
    assert f"Held-out perplexity: {summary['heldout_ppl']:.2f}" in card.text
    assert "Trained for 2 steps" in card.text and "LM head" in card.text
    model = ElmoForBidirectionalLM.from_pretrained(out)
    assert f"{_params(model.elmo)} in the biLM + {_params(model.lm_head)} in the LM head" in card.text


def test_push_to_hub_uploads_weights_tokenizer_and_card(tiny_model, monkeypatch):
    """transformers/huggingface_hub prepare the commit for real; only the two network calls are caught."""
    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["repo"] = repo_id
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def create_commit(self, repo_id, operations, **kwargs):
        calls["files"] = {op.path_in_repo: op for op in operations}
        calls["readme"] = Path(calls["files"]["README.md"].path_or_fileobj).read_text()
        calls["commit"] = kwargs
        return "committed"

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    assert tiny_model.push_to_hub("someone/tiny-elmo", tags=["test-tag"]) == "committed"
    assert calls["repo"] == "someone/tiny-elmo"
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"} <= set(calls["files"])
    card = ModelCard(calls["readme"])
    assert card.data.library_name == "spacy-elmo" and "test-tag" in card.data.tags and "elmo" in card.data.tags
    assert 'AutoModel.from_pretrained("someone/tiny-elmo")' in card.text
    assert calls["commit"]["commit_message"] == "Upload model"


def test_save_pretrained_with_push_to_hub_keeps_the_card(tiny_model, tmp_path, monkeypatch):
    uploaded = {}
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: RepoUrl(f"https://huggingface.co/{repo_id}"))
    monkeypatch.setattr(
        HfApi,
        "create_commit",
        lambda self, repo_id, operations, **kw: uploaded.update(
            {
                op.path_in_repo: Path(op.path_or_fileobj).read_text() if op.path_in_repo == "README.md" else None
                for op in operations
            }
        ),
    )
    tiny_model.save_pretrained(
        tmp_path / "local", push_to_hub=True, repo_id="someone/elmo", model_card={"license": "mit"}
    )
    assert _card(tmp_path / "local").data.license == "mit"
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"} <= set(uploaded)
    card = ModelCard(uploaded["README.md"])
    assert card.data.license == "mit" and 'from_pretrained("someone/elmo")' in card.text
