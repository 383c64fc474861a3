"""The Hugging Face face: Auto classes, safetensors round trip, offline hub ids, tokenizer, no pickles."""

from __future__ import annotations

import copy
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

import spacy_elmo
from float32_error import assert_float32_error  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoConfig, ElmoForBidirectionalLM, ElmoModel, ElmoTokenizer, ScalarMix

SENTENCES = [["The", "cat", "sat", "."], ["Mixed", "case", "and", "ünïcödé", "🙂"], ["x"]]


def _layers(model, tokenizer=None):
    tokenizer = tokenizer or ElmoTokenizer()
    with torch.no_grad():
        return torch.stack(model(**tokenizer(SENTENCES)).hidden_states)


def test_save_pretrained_writes_safetensors_and_auto_loads_identically(tiny_model, tiny_model_dir):
    files = sorted(p.name for p in tiny_model_dir.iterdir())
    assert "model.safetensors" in files and "config.json" in files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    assert AutoConfig.from_pretrained(tiny_model_dir).model_type == "elmo"
    loaded = AutoModel.from_pretrained(tiny_model_dir)
    assert isinstance(loaded, ElmoModel)
    assert torch.equal(_layers(loaded.eval()), _layers(tiny_model))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert isinstance(tokenizer, ElmoTokenizer)
    assert torch.equal(_layers(loaded, tokenizer), _layers(tiny_model))


def test_hub_id_loads_offline_from_laid_out_cache(tiny_model, tiny_model_dir, tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--test-org--tiny-elmo"
    snapshot = repo / "snapshots" / revision
    shutil.copytree(tiny_model_dir, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    expected = _layers(tiny_model)
    torch.save(expected, tmp_path / "expected.pt")
    script = textwrap.dedent(
        f"""
        import torch, spacy_elmo
        from transformers import AutoModel, AutoTokenizer
        model = AutoModel.from_pretrained("test-org/tiny-elmo").eval()
        tok = AutoTokenizer.from_pretrained("test-org/tiny-elmo")
        with torch.no_grad():
            got = torch.stack(model(**tok({SENTENCES!r})).hidden_states)
        expected = torch.load({str(tmp_path / "expected.pt")!r}, weights_only=True)
        assert torch.equal(got, expected), (got - expected).abs().max()
        print("OK", type(model).__name__)
        """
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"), HF_HOME=str(tmp_path / "home"))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK ElmoModel" in result.stdout


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch PWNED_BY_PICKLE",))


def test_pickled_weights_are_refused(tiny_model_dir, tmp_path):
    """A pickle planted where weights are expected must not execute."""
    bad = tmp_path / "bad_model"
    bad.mkdir()
    shutil.copy(tiny_model_dir / "config.json", bad / "config.json")
    with open(bad / "pytorch_model.bin", "wb") as handle:
        pickle.dump({"weights": _Exploit()}, handle)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(Exception) as info:
            ElmoModel.from_pretrained(bad)
        assert not (tmp_path / "PWNED_BY_PICKLE").exists()
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do: the check is that the pickle never ran
            spacy_elmo.formats.references.load_model(bad)
        assert not (tmp_path / "PWNED_BY_PICKLE").exists()
    finally:
        os.chdir(cwd)
    assert (
        "weights_only" in str(info.value) or "Weights only" in str(info.value) or "unpickl" in str(info.value).lower()
    )


def test_scalar_mixes_in_model_output(tiny_model_dir):
    model = ElmoModel.from_pretrained(tiny_model_dir, num_output_representations=2).eval()
    with torch.no_grad():
        model.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([0.1, 0.3, 0.5]))
        model.scalar_mixes[1].gamma.fill_(1.1)
        out = model(**ElmoTokenizer()(SENTENCES))
    layers = torch.stack(out.hidden_states)
    assert len(out.mixed_representations) == 2
    # by hand in float32 and in float64: the mix sums 3 terms in its own order
    equal = [layers.mean(0), layers.double().mean(0)]
    assert_float32_error(equal[1], equal[0], out.mixed_representations[0], terms=3, what="equal weights")
    s, gamma = torch.tensor([0.1, 0.3, 0.5]), torch.tensor(1.1)  # the mix's float32 values
    expected = [
        gamma.to(dtype) * (torch.softmax(s.to(dtype), 0)[:, None, None, None] * layers.to(dtype)).sum(0)
        for dtype in (torch.float32, torch.float64)
    ]
    assert_float32_error(expected[1], expected[0], out.mixed_representations[1], terms=3, what="trained weights")


def test_scalar_mix_layer_norm_and_regularization():
    mix = ScalarMix(3, layer_norm=True, initial_weights=[-50.0, -50.0, 50.0])  # all weight on layer 2
    layers = [torch.randn(2, 4, 8) * (i + 1) + i for i in range(3)]
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        out = mix(layers, mask)
        alone = mix([layer[1:2] for layer in layers], mask[1:2])
        exact = copy.deepcopy(mix).double()([layer[1:2].double() for layer in layers], mask[1:2])
    real = out[0, :3]
    assert abs(float(real.mean())) < 1e-5 and abs(float(real.std(unbiased=False)) - 1.0) < 1e-3
    assert torch.all(out[1, 2:] == 0)
    # per-sentence statistics: a sentence's output does not depend on its batch neighbours (beyond
    # float32 rounding of the statistics' sums over its 2 tokens × 8 values)
    assert_float32_error(exact[0], alone[0], out[1], terms=2 * 8)
    with torch.no_grad():
        mix.scalar_parameters.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.isclose(mix.regularization(0.1), torch.tensor(0.1 * 14.0))  # λ‖s‖² (bilm-tf's l2_coef·ΣW²)


def test_lm_head_loss_and_save_with_and_without_head(tmp_path):
    config = ElmoConfig(
        filters=[[1, 8], [2, 8]],
        char_embedding_dim=4,
        n_highway=1,
        lstm_dim=16,
        projection_dim=8,
        vocab_size=10,
        dropout=0.0,
    )
    torch.manual_seed(0)
    lm = ElmoForBidirectionalLM(config)
    tokenizer = ElmoTokenizer()
    batch = tokenizer([["a", "b"], ["c"]])
    labels = torch.tensor([[3, 4], [5, 0]])
    out = lm(**batch, labels=labels)
    assert out.num_targets.item() == 3 + 2  # (2 words + </S>) + (1 word + </S>)
    assert torch.isfinite(out.loss) and out.loss.item() > 0
    out.loss.backward()
    assert lm.lm_head.weight.grad is not None
    lm.save_pretrained(tmp_path / "lm")
    again = ElmoForBidirectionalLM.from_pretrained(tmp_path / "lm").eval()
    lm.eval()
    with torch.no_grad():
        assert torch.equal(
            again(**batch, labels=labels).loss, lm(**batch, labels=labels).loss
        )  # the same bits in, the same operations
        encoder = ElmoModel.from_pretrained(tmp_path / "lm").eval()
        assert torch.equal(encoder(**batch).last_hidden_state, lm.elmo(**batch).last_hidden_state)


def test_tokenizer_inputs_and_settings(tmp_path):
    tokenizer = ElmoTokenizer(max_characters_per_token=10)
    enc = tokenizer("a longerthantenbytes word")
    assert enc["input_ids"].shape == (1, 3, 10)
    assert enc["input_ids"][0, 1, -1].item() == 260  # end-of-word marker after 8 bytes
    assert tokenizer([["a", "b"], ["c"]])["attention_mask"].tolist() == [[True, True], [True, False]]
    assert tokenizer(["a", "b"], is_split_into_words=True)["input_ids"].shape == (1, 2, 10)
    assert tokenizer([])["input_ids"].shape == (0, 0, 10)
    tokenizer.save_pretrained(tmp_path)
    assert ElmoTokenizer.from_pretrained(tmp_path).max_characters_per_token == 10
    with pytest.raises(ValueError, match="tokens must be str"):
        tokenizer([["a", 3]])
    assert callable(ElmoModel.push_to_hub)
    assert callable(ElmoTokenizer.push_to_hub)


def test_fresh_model_starts_with_bilm_tf_initialization():
    """Highway gates start near the identity (bias −2); LSTM weights uniform in ±0.05."""
    torch.manual_seed(0)
    model = ElmoForBidirectionalLM(ElmoConfig(vocab_size=10, n_highway=2))
    for highway in model.elmo.token_encoder.highways:
        assert torch.all(highway.gate.bias == -2.0)
        assert torch.all(highway.transform.bias == 0.0)
    for name, param in model.named_parameters():
        if name.endswith(("input_weight", "hidden_weight")):
            assert param.abs().max().item() <= 0.05 + 1e-6 and param.std().item() > 0.01, name
