"""One writer of a model directory (weights, config, tokenizer with every setting, card) used by every
caller, and the biLSTM kernel as a run-time choice resolved by one pure function, never saved."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest
import spacy
import torch
from transformers import AutoModel

from spacy_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from spacy_elmo.formats.references import load_pretrained
from spacy_elmo.hf.model_directory import ElmoLoadError
from spacy_elmo.hf.modeling_elmo import LSTM_IMPLEMENTATIONS, resolve_lstm_implementation


def _tokenizer_settings(directory) -> dict:
    data = json.loads((directory / "tokenizer_config.json").read_text())
    return {k: data[k] for k in ("lang", "max_characters_per_token")}


def test_a_chinese_bilm_stays_chinese_inside_a_spacy_pipeline(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path / "zh_elmo", tokenizer=ElmoTokenizer(lang="zh"))
    assert _tokenizer_settings(tmp_path / "zh_elmo") == {"lang": "zh", "max_characters_per_token": 50}
    nlp = spacy.blank("zh")
    nlp.add_pipe("elmo", config={"model": str(tmp_path / "zh_elmo")})
    nlp.to_disk(tmp_path / "pipeline")
    assert _tokenizer_settings(tmp_path / "pipeline" / "elmo" / "bilm")["lang"] == "zh"
    _, tokenizer = load_pretrained(tmp_path / "pipeline" / "elmo" / "bilm")
    assert tokenizer.lang == "zh"


def test_every_writer_writes_the_same_complete_directory(tiny_model, tmp_path, allennlp_dir):
    from spacy_elmo.cli import main

    tiny_model.save_pretrained(tmp_path / "saved", tokenizer=ElmoTokenizer(lang="de"))
    assert main(["convert", str(allennlp_dir), str(tmp_path / "converted"), "--lang", "de"]) == 0
    for directory in (tmp_path / "saved", tmp_path / "converted"):
        names = {p.name for p in directory.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"} <= names, directory
        assert _tokenizer_settings(directory)["lang"] == "de"
        assert "language: de" in (directory / "README.md").read_text()
    saved = {p.name: p.read_bytes() for p in (tmp_path / "saved").iterdir() if p.name != "README.md"}
    converted = {p.name: p.read_bytes() for p in (tmp_path / "converted").iterdir() if p.name != "README.md"}
    assert saved == converted  # the same files from the same model and tokenizer


def test_saved_files_are_readable_by_others(tiny_model, tmp_path):
    umask = os.umask(0o022)
    try:
        tiny_model.save_pretrained(tmp_path / "m")
    finally:
        os.umask(umask)
    for path in (tmp_path / "m").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name


def test_the_kernel_choice_is_never_saved_and_old_files_load_anywhere(tiny_model, tmp_path):
    tiny_model.config.lstm_implementation = "packed"
    try:
        tiny_model.save_pretrained(tmp_path / "m")
    finally:
        tiny_model.config.lstm_implementation = "auto"
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert "lstm_implementation" not in config
    # a 0.1.0 file saved on a GPU with cuda_graphs: the choice is ignored, the model runs here
    config["lstm_implementation"] = "cuda_graphs"
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    model = ElmoModel.from_pretrained(tmp_path / "m").eval()
    assert model.config.lstm_implementation == "auto"
    with torch.no_grad():
        model(**ElmoTokenizer()([["a", "b"]]))
    assert ElmoModel.from_pretrained(tmp_path / "m", lstm_implementation="eager").config.lstm_implementation == "eager"


def test_one_table_of_kernels_and_a_pure_resolver():
    assert sorted(LSTM_IMPLEMENTATIONS) == ["cuda_graphs", "eager", "fused", "packed"]
    assert set(ElmoConfig.__dataclass_fields__["lstm_implementation"].type.__args__) == {"auto", *LSTM_IMPLEMENTATIONS}
    table = {
        # (needs_grad, training, autocast, device) → auto's choice
        (False, False, False, "cpu"): "packed",
        (False, False, True, "cuda"): "cuda_graphs",
        (False, False, False, "cuda"): "cuda_graphs",
        (True, False, False, "cpu"): "fused",
        (False, True, False, "cpu"): "fused",
        (True, True, True, "cuda"): "eager",
        (True, True, True, "cpu"): "fused",  # its products in bf16 (kernels/fused_lstm.py)
    }
    for (needs_grad, training, autocast, device), want in table.items():
        got = resolve_lstm_implementation(
            "auto", needs_grad=needs_grad, training=training, autocast=autocast, device_type=device
        )
        assert got == want, (needs_grad, training, autocast, device)
    for name in LSTM_IMPLEMENTATIONS:  # an explicit choice is taken as it is, where it can run
        if name in ("eager", "fused"):
            assert (
                resolve_lstm_implementation(name, needs_grad=True, training=True, autocast=False, device_type="cpu")
                == name
            )
    with pytest.raises(RuntimeError, match="inference kernel without autograd"):
        resolve_lstm_implementation("packed", needs_grad=True, training=False, autocast=False, device_type="cpu")
    with pytest.raises(RuntimeError, match="runs inference .* on a CUDA device"):
        resolve_lstm_implementation("cuda_graphs", needs_grad=False, training=False, autocast=False, device_type="cpu")


def test_every_kernel_has_one_signature(tiny_model):
    """Each table entry is called the same way and computes the same layers."""
    from spacy_elmo.hf.modeling_elmo import add_sentence_boundaries

    batch = ElmoTokenizer()([["The", "cat", "sat"], ["Hi"]])
    ids, mask, _ = add_sentence_boundaries(batch["input_ids"], batch["attention_mask"])
    bilstm = tiny_model.encoder
    with torch.no_grad():
        tokens = tiny_model.embed_tokens(ids) * mask.unsqueeze(-1)
        state = bilstm.zero_state(2, tokens)
        outputs = {
            name: LSTM_IMPLEMENTATIONS[name](bilstm, tokens, mask, state, True) for name in ("eager", "fused", "packed")
        }
    for name, (layers, final) in outputs.items():
        for got, want in zip(layers, outputs["eager"][0]):
            assert torch.allclose(got, want, atol=1e-5), name
        assert torch.allclose(final.h, outputs["eager"][1].h, atol=1e-5), name


# --- a save touches only what it writes (issue 32 item 4) -------------------------------------------


def test_a_save_leaves_the_other_files_and_the_umask_alone(tiny_model, tmp_path, monkeypatch):
    target = tmp_path / "m"
    target.mkdir()
    (target / "id_ed25519").write_text("private key")
    (target / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(target / "id_ed25519", 0o600)
    os.chmod(target / "run.sh", 0o755)
    calls = []
    real_umask = os.umask
    monkeypatch.setattr(os, "umask", lambda mask: calls.append(mask) or real_umask(mask))  # records, then does it
    tiny_model.save_pretrained(target)
    assert stat.S_IMODE((target / "id_ed25519").stat().st_mode) == 0o600
    assert stat.S_IMODE((target / "run.sh").stat().st_mode) == 0o755
    assert calls == []  # another thread never sees a umask of 0
    mask = real_umask(0)  # read here, after the save
    real_umask(mask)
    assert stat.S_IMODE((target / "model.safetensors").stat().st_mode) == 0o666 & ~mask  # safetensors writes 0600


def test_a_users_readme_is_kept_and_our_card_is_rewritten(tiny_model, tmp_path, caplog):
    target = tmp_path / "m"
    target.mkdir()
    (target / "README.md").write_text("# My notes\n\nHow I trained this.\n")
    tiny_model.save_pretrained(target, tokenizer=ElmoTokenizer(lang="de"))
    assert (target / "README.md").read_text() == "# My notes\n\nHow I trained this.\n"
    kept = [r.getMessage() for r in caplog.records if "README.md" in r.getMessage()]
    assert kept == [
        f"kept {target / 'README.md'}: it was not written by spacy-elmo, so no model card was written (delete it for "
        "one)"
    ]
    (target / "README.md").unlink()
    tiny_model.save_pretrained(target, tokenizer=ElmoTokenizer(lang="de"))
    assert "language: de" in (target / "README.md").read_text()
    caplog.clear()
    tiny_model.save_pretrained(target, tokenizer=ElmoTokenizer(lang="fr"))  # our own card: rewritten
    assert "language: fr" in (target / "README.md").read_text() and caplog.records == []


# --- from_pretrained takes only what it honours ---------------------------------------------------


@pytest.mark.parametrize(
    "args,kwargs,error,message",
    [
        # mis-shaped tensors are refused whatever the caller asks (HF's True would re-initialize them)
        ((), {"ignore_mismatched_sizes": True}, ValueError, r"ignore_mismatched_sizes=True is not supported"),
        ((), {"weights_only": False}, ValueError, r"weights_only=False is not supported"),
        ((), {"adapter_kwargs": {"adapter_name": "x"}}, ValueError, r"adapter_kwargs=.* PEFT adapters"),
        # HF drops these silently, or has nothing to act on in an LSTM, or needs accelerate
        ((), {"low_cpu_mem_usage": True}, TypeError, r"does not support low_cpu_mem_usage; it takes cache_dir, "),
        ((), {"from_tf": True}, TypeError, r"does not support from_tf;"),
        ((), {"attn_implementation": "eager"}, TypeError, r"does not support attn_implementation;"),
        ((), {"device_map": "cpu", "tqdm_class": None}, TypeError, r"does not support device_map, tqdm_class;"),
        # a base config field this model never reads
        ((), {"output_hidden_states": True}, TypeError, r"does not support output_hidden_states;"),
        # the model's __init__ takes only the config
        ((3,), {}, TypeError, r"takes no positional arguments after the model path, got 1"),
        # HF would hand the override to __init__, not to the given config
        ((), {"config": ElmoConfig(), "lstm_implementation": "eager"}, ValueError, r"lstm_implementation would not"),
    ],
)
def test_from_pretrained_refuses_what_it_does_not_honour_in_one_line(
    tiny_model_dir, tmp_path, args, kwargs, error, message
):
    """Before any work: the directory named does not even exist, and the argument is what is reported."""
    absent = tmp_path / "absent"
    with pytest.raises(error, match=message) as info:
        ElmoModel.from_pretrained(absent, *args, **kwargs)
    assert "\n" not in str(info.value) and str(info.value).startswith("ElmoModel.from_pretrained")
    if error is TypeError and not args:
        assert "ElmoConfig fields" in str(info.value)  # ... and says what is supported
    # AutoModel passes them on (with private ones of its own, which are accepted), except what AutoConfig
    # takes onto the config first (HF's base fields), which ElmoModel.from_pretrained never sees
    if not args and not {"attn_implementation", "output_hidden_states"} & set(kwargs):
        with pytest.raises(error, match=message):
            AutoModel.from_pretrained(tiny_model_dir, **kwargs)


def test_from_pretrained_keeps_the_arguments_it_honours(tiny_model, tiny_model_dir, tmp_path):
    def load(path=tiny_model_dir, **kwargs):
        return ElmoModel.from_pretrained(path, **kwargs)

    # the package's own loads (the spaCy layer, checkpoints) and HF's loading settings
    assert torch.equal(
        load(local_files_only=True, use_safetensors=True).encoder.layers[0].bias, tiny_model.encoder.layers[0].bias
    )
    assert next(load(dtype=torch.float64).parameters()).dtype == torch.float64
    assert next(load(torch_dtype=torch.float64).parameters()).dtype == torch.float64
    assert isinstance(load(ignore_mismatched_sizes=False, weights_only=True), ElmoModel)
    model, info = load(output_loading_info=True)
    assert isinstance(model, ElmoModel) and not info["missing_keys"]
    # config field overrides, and a config given whole
    assert load(num_output_representations=2, lstm_implementation="eager").config.num_output_representations == 2
    config = ElmoConfig.from_pretrained(tiny_model_dir, num_output_representations=1)
    assert len(load(config=config).scalar_mixes) == 1
    # a subfolder is read, and checked, where HF reads it
    tiny_model.save_pretrained(tmp_path / "repo" / "elmo", variant="v1")
    assert isinstance(load(tmp_path / "repo", subfolder="elmo", variant="v1"), ElmoModel)
    config_file = tmp_path / "repo" / "elmo" / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "hidden_size_typo": 3}))
    with pytest.raises(ElmoLoadError, match=rf"^{re.escape(str(config_file))}: unknown field"):
        load(tmp_path / "repo", subfolder="elmo", variant="v1")
