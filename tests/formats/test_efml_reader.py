"""ELMoForManyLangs directories (spacy_elmo.formats.efml): the tiny fixture reads as the package's runtime reads
it, every broken directory gets one line naming the file, and the mapped weights compute what the
original layers compute (checked against the layers' definitions, not against typed numbers)."""

from __future__ import annotations

import codecs
import json
import shutil
from pathlib import Path

import pytest
import torch

from spacy_elmo.formats.efml import (
    KNOWN_ARCHITECTURES,
    WORD_SPECIALS,
    EfmlFormatError,
    check_efml_directory,
    efml_to_elmo,
    is_efml_directory,
    read_architecture,
    read_efml,
    read_lexicon,
    weight_table,
)
from spacy_elmo.hf.configuration_elmo import ElmoConfig
from spacy_elmo.hf.modeling_elmo import ElmoLstmLayer, ElmoModel, Highway


@pytest.fixture(scope="module")
def efml_dir(fixtures_dir) -> Path:
    return fixtures_dir / "efml_tiny"


@pytest.fixture(scope="module")
def efml(efml_dir):
    return read_efml(efml_dir)


@pytest.fixture(scope="module")
def mapped(efml):
    return efml_to_elmo(efml)


@pytest.fixture
def copy(efml_dir, tmp_path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(efml_dir, target)
    return target


def _error(directory: Path) -> str:
    with pytest.raises(EfmlFormatError) as info:
        read_efml(directory)
    message = str(info.value)
    assert "\n" not in message
    return message


def _set_config_path(directory: Path, config_path: str) -> None:
    (directory / "config.json").write_text(json.dumps({"config_path": config_path}))


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _edit_lines(path: Path, edit) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    edit(lines)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _edit_pkl(path: Path, edit) -> None:
    state = torch.load(path, map_location="cpu", weights_only=True)
    edit(state)
    torch.save(state, path, _use_new_zipfile_serialization=False)  # the legacy format, as released


def _runtime_lexicon(path: Path) -> dict[str, int]:
    """The package's reading, from its definition: a codecs UTF-8 reader's lines, strip, split on tabs."""
    lexicon = {}
    with open(path, "rb") as handle:
        for line in codecs.getreader("utf-8")(handle):
            fields = line.strip().split("\t")
            if len(fields) == 1:
                fields.insert(0, "\u3000")
            token, index = fields
            lexicon[token] = int(index)
    return lexicon


# --- reading -------------------------------------------------------------------------------------


def test_reads_the_fixture(efml_dir, efml):
    assert efml.architecture == json.loads((efml_dir / "tiny.json").read_text())
    assert efml.architecture_source == str(efml_dir / "tiny.json")
    assert efml.char_lexicon == _runtime_lexicon(efml_dir / "char.dic")
    assert efml.word_lexicon == _runtime_lexicon(efml_dir / "word.dic")
    assert sorted(efml.char_lexicon.values()) == list(range(len(efml.char_lexicon)))
    assert efml.token_embedder["char_emb_layer.embedding.weight"].shape[0] == len(efml.char_lexicon)
    assert is_efml_directory(efml_dir)


def test_whitespace_token_is_u3000(efml_dir, efml):
    # char.dic has a line for U+00A0; `strip` removes it, so the runtime files its id under U+3000
    line = next(e for e in (efml_dir / "char.dic").read_text(encoding="utf-8").split("\n") if e.startswith("\xa0"))
    assert efml.char_lexicon["\u3000"] == int(line.split("\t")[1])
    assert "\xa0" not in efml.char_lexicon


def test_lexicon_lines_end_where_the_runtime_ends_them(copy):
    # the runtime's codecs reader also ends lines at U+0085 (and reads \r\n as one end): '16\x85zebra\t17'
    # is two entries there, U+3000 → 16 and 'zebra' → 17
    path = copy / "word.dic"
    _edit_lines(path, lambda lines: lines.extend(["16\x85zebra\t17\r", "chat\t18"]))
    lexicon = read_lexicon(path, WORD_SPECIALS)
    assert lexicon == _runtime_lexicon(path)
    assert (lexicon["\u3000"], lexicon["zebra"], lexicon["chat"]) == (16, 17, 18)


@pytest.mark.parametrize(
    "config_path", ["/home/someone/ELMoForManyLangs/configs/tiny.json", "C:\\Users\\someone\\configs\\tiny.json"]
)
def test_foreign_config_path_falls_back_to_the_basename(copy, efml, config_path):
    _set_config_path(copy, config_path)
    again = read_efml(copy)
    assert again.architecture_source == str(copy / "tiny.json")
    assert again.architecture == efml.architecture


def test_existing_config_path_comes_first(copy, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "tiny.json"
    elsewhere.parent.mkdir()
    shutil.copy(copy / "tiny.json", elsewhere)
    _edit_json(copy / "tiny.json", lambda a: a["encoder"].update(name="lstm"))  # would be refused
    _set_config_path(copy, str(elsewhere))
    assert read_efml(copy).architecture_source == str(elsewhere)


def test_known_architecture_by_basename(copy):
    # the numbers of the package's configs/cnn_50_100_512_4096_sample.json, as issue 18 gives them
    issue = {
        "token_embedder": {
            "name": "cnn",
            "activation": "relu",
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "word_dim": 100,
            "char_dim": 50,
            "max_characters_per_token": 50,
        },
        "encoder": {"name": "elmo", "projection_dim": 512, "dim": 4096, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    }
    (copy / "tiny.json").unlink()
    _set_config_path(copy, "/users4/someone/configs/cnn_50_100_512_4096_sample.json")
    architecture, source = read_architecture(copy)
    assert architecture == issue == KNOWN_ARCHITECTURES["cnn_50_100_512_4096_sample.json"]
    assert source.startswith(str(copy / "config.json"))
    # the tiny weights do not fit it: the error shows the table's sizes were applied
    message = _error(copy)
    assert message.startswith(str(copy / "token_embedder.pkl"))
    assert "missing tensor(s) 'convolutions.3.weight'" in message and "should have shape [128, 50, 4]" in message


def test_word_only_sizes_without_word_dim(copy):
    # word_dim 0: no word.dic needed, no word embedding, the projection reads the char features only
    _edit_json(copy / "tiny.json", lambda a: a["token_embedder"].update(word_dim=0))
    (copy / "word.dic").unlink()

    def drop_words(state):
        del state["word_emb_layer.embedding.weight"]
        state["projection.weight"] = state["projection.weight"][:, 8:].clone()

    _edit_pkl(copy / "token_embedder.pkl", drop_words)
    d = read_efml(copy)
    config, state, _, words = efml_to_elmo(d)
    assert d.word_lexicon is None and words is None
    assert (config["word_vocab_size"], config["word_embedding_dim"]) == (0, 0)
    assert not any("word" in name for name in state)
    assert torch.equal(state["token_encoder.projection.weight"], d.token_embedder["projection.weight"])


def test_is_efml_directory(copy, tmp_path):
    assert is_efml_directory(copy)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "elmo"}))
    for name in ("token_embedder.pkl", "encoder.pkl"):
        shutil.copy(copy / name, hf / name)
    assert not is_efml_directory(hf)
    (hf / "config.json").write_text("{not json")
    assert not is_efml_directory(hf)
    # meant as one (check_efml_directory then names what is missing): config_path, or weights without config.json
    (copy / "encoder.pkl").unlink()
    assert is_efml_directory(copy)
    (copy / "config.json").unlink()
    assert is_efml_directory(copy)
    (copy / "token_embedder.pkl").unlink()
    assert not is_efml_directory(copy)
    assert not is_efml_directory(tmp_path / "absent")


def test_a_bare_config_path_is_tried_once(copy):
    _set_config_path(copy, "elmo.json")
    message = _error(copy)
    assert f"tried {copy / 'elmo.json'} and the package's built-in ones" in message, message


def test_the_check_reads_no_lexicon_or_weights(copy):
    """check_efml_directory (run when a reference is checked) finds a bad architecture and missing
    files; the files' contents are read_efml's to check."""
    for name in ("char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl"):
        (copy / name).write_bytes(b"not read")
    architecture, source = check_efml_directory(copy)
    assert source == str(copy / "tiny.json") and architecture["encoder"]["dim"] == 32
    _edit_json(copy / "tiny.json", lambda a: a["encoder"].update(name="lstm"))
    with pytest.raises(EfmlFormatError, match="encoder.name is 'lstm'"):
        check_efml_directory(copy)


# --- broken directories: one line naming the file ------------------------------------------------


def _append_char(lines):
    lines.append("ж\t119")


BROKEN = {
    "char.dic missing": (
        lambda d: (d / "char.dic").unlink(),
        "char.dic",
        "no such file; expected the ELMoForManyLangs character lexicon",
    ),
    "word.dic missing": (
        lambda d: (d / "word.dic").unlink(),
        "word.dic",
        "no such file; expected the ELMoForManyLangs word lexicon (word_dim is 8)",
    ),
    "token_embedder.pkl missing": (
        lambda d: (d / "token_embedder.pkl").unlink(),
        "token_embedder.pkl",
        "no such file; expected the ELMoForManyLangs token embedder weights",
    ),
    "encoder.pkl missing": (
        lambda d: (d / "encoder.pkl").unlink(),
        "encoder.pkl",
        "no such file; expected the ELMoForManyLangs biLSTM weights",
    ),
    "config.json missing": (
        lambda d: (d / "config.json").unlink(),
        "config.json",
        "no such file; expected the ELMoForManyLangs config naming the architecture json",
    ),
    "not UTF-8": (
        lambda d: (d / "char.dic").write_bytes((d / "char.dic").read_bytes().replace(b"A\t38\n", b"\xffA\t38\n")),
        "char.dic",
        "line 39 is not valid UTF-8",
    ),
    "three fields": (
        lambda d: _edit_lines(d / "char.dic", lambda lines: lines.__setitem__(10, "a\tb\t10")),
        "char.dic",
        "line 11 has 3 tab-separated fields",
    ),
    "blank line": (
        lambda d: _edit_lines(d / "word.dic", lambda lines: lines.insert(4, "")),
        "word.dic",
        "line 5 is blank",
    ),
    "id not an integer": (
        lambda d: _edit_lines(d / "char.dic", lambda lines: lines.__setitem__(5, "<eow>\tfive")),
        "char.dic",
        "line 6: id 'five' is not an integer",
    ),
    "line ended at U+2028": (
        lambda d: _edit_lines(d / "word.dic", lambda lines: lines.__setitem__(14, "Ca\u2028fé\t14")),
        "word.dic",
        "line 15: id 'Ca' is not an integer (the runtime also ends a line at U+2028)",
    ),
    "id used twice": (
        lambda d: _edit_lines(d / "word.dic", lambda lines: lines.__setitem__(15, "long\t14")),
        "word.dic",
        "id 14 is used twice: 'Café' (line 15) and 'long' (line 16)",
    ),
    "id gap": (
        lambda d: _edit_lines(d / "word.dic", lambda lines: lines.__setitem__(15, "long\t99")),
        "word.dic",
        "ids must be exactly 0..15",
    ),
    "overwritten whitespace entry": (
        lambda d: _edit_lines(d / "char.dic", lambda lines: lines.append("\u3000\t119")),
        "char.dic",
        "id 100 is unused; line 101 gave it to '\\u3000', which line 120 gives id 119",
    ),
    "missing special": (
        lambda d: _edit_lines(d / "char.dic", lambda lines: lines.remove("<bow>\t4")),
        "char.dic",
        "missing the special token(s) <bow>",
    ),
    "byte-order mark": (
        lambda d: (d / "word.dic").write_bytes(codecs.BOM_UTF8 + (d / "word.dic").read_bytes()),
        "word.dic",
        "missing the special token(s) <oov> (the file starts with a byte-order mark",
    ),
    "lexicon larger than its embedding": (
        lambda d: _edit_lines(d / "char.dic", _append_char),
        "token_embedder.pkl",
        "'char_emb_layer.embedding.weight' has shape [119, 6], expected [120, 6] (char.dic has 120 entries",
    ),
    "config_path names nothing": (
        lambda d: _set_config_path(d, "/home/someone/configs/unknown.json"),
        "config.json",
        "config_path '/home/someone/configs/unknown.json' names no architecture: tried",
    ),
    "no config_path": (
        lambda d: (d / "config.json").write_text(json.dumps({"seed": 1})),
        "config.json",
        "field 'config_path' is None",
    ),
    "config.json not JSON": (lambda d: (d / "config.json").write_text("{"), "config.json", "not valid JSON"),
    "missing tensor": (
        lambda d: _edit_pkl(d / "token_embedder.pkl", lambda s: s.pop("highways._layers.0.bias")),
        "token_embedder.pkl",
        "missing tensor(s) 'highways._layers.0.bias'; 'highways._layers.0.bias' should have shape [64]",
    ),
    "extra tensor": (
        lambda d: _edit_pkl(d / "encoder.pkl", lambda s: s.update(extra=torch.zeros(3))),
        "encoder.pkl",
        "unexpected tensor(s) 'extra' ('extra' of shape [3])",
    ),
    "wrong shape": (
        lambda d: _edit_pkl(
            d / "encoder.pkl",
            lambda s: s.update(
                {"forward_layer_1.state_projection.weight": s["forward_layer_1.state_projection.weight"].T.clone()}
            ),
        ),
        "encoder.pkl",
        "tensor 'forward_layer_1.state_projection.weight' has shape [32, 16], expected [16, 32]",
    ),
    "NaN": (
        lambda d: _edit_pkl(
            d / "encoder.pkl", lambda s: s["backward_layer_0.state_linearity.bias"].__setitem__(3, float("nan"))
        ),
        "encoder.pkl",
        "tensor 'backward_layer_0.state_linearity.bias' contains 1 NaN/inf values",
    ),
    "truncated": (
        lambda d: (d / "encoder.pkl").write_bytes((d / "encoder.pkl").read_bytes()[:5000]),
        "encoder.pkl",
        "not a readable PyTorch state dict (truncated or corrupt?)",
    ),
    "lstm token embedder": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["token_embedder"].update(name="lstm")),
        "tiny.json",
        "the released models use the cnn token embedder; this one is not supported",
    ),
    "no char CNN": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["token_embedder"].update(char_dim=0)),
        "tiny.json",
        "token_embedder.char_dim is 0 (a word-only model without the character CNN): not supported",
    ),
    "projection_dim == dim": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["encoder"].update(dim=16)),
        "tiny.json",
        "encoder.projection_dim (16) is not below encoder.dim (16)",
    ),
    "lstm encoder": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["encoder"].update(name="lstm")),
        "tiny.json",
        "encoder.name is 'lstm': only the 'elmo' biLM encoder",
    ),
    "unknown activation": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["token_embedder"].update(activation="gelu")),
        "tiny.json",
        "field 'token_embedder.activation' is 'gelu'",
    ),
    # the architecture's types are checked (issue 34: by @strict, from the annotations)
    "a count written as a string": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["encoder"].update(n_layers="2")),
        "tiny.json",
        "field 'encoder.n_layers' is '2'; expected an integer >= 1",
    ),
    "a filter wider than a token": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["token_embedder"].update(max_characters_per_token=2)),
        "tiny.json",
        "field 'token_embedder.max_characters_per_token' is 2; expected an integer >= 3",
    ),
    "a negative clip": (
        lambda d: _edit_json(d / "tiny.json", lambda a: a["encoder"].update(cell_clip=-1)),
        "tiny.json",
        "field 'encoder.cell_clip' is -1; expected a number >= 0 or null",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_directory_names_the_file(copy, case):
    damage, name, fragment = BROKEN[case]
    damage(copy)
    message = _error(copy)
    assert message.startswith(f"{copy / name}: "), message
    assert fragment in message, message


class _Planted:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_planted_pickle_is_refused_and_never_runs(copy, tmp_path):
    marker = tmp_path / "side_effect"
    _edit_pkl(copy / "encoder.pkl", lambda s: s.update(payload=_Planted(marker)))
    message = _error(copy)
    assert message.startswith(f"{copy / 'encoder.pkl'}: refused: the pickle calls exec"), message
    assert not marker.exists()
    # the payload is live: an unrestricted unpickler runs it (only this test's own file)
    torch.load(copy / "encoder.pkl", map_location="cpu", weights_only=False)
    assert marker.read_text() == "ran"


# --- the mapping ---------------------------------------------------------------------------------


def test_config_kwargs(efml, mapped):
    config, _, chars, words = mapped
    emb, enc = efml.architecture["token_embedder"], efml.architecture["encoder"]
    assert config == {
        "char_vocab_size": 1 + len(efml.char_lexicon),
        "word_vocab_size": len(efml.word_lexicon) - 1,
        "word_embedding_dim": emb["word_dim"],
        "char_embedding_dim": emb["char_dim"],
        "filters": emb["filters"],
        "n_highway": emb["n_highway"],
        "activation": emb["activation"],
        "max_characters_per_token": emb["max_characters_per_token"],
        "num_layers": enc["n_layers"],
        "lstm_dim": enc["dim"],
        "projection_dim": enc["projection_dim"],
        "cell_clip": enc["cell_clip"],
        "proj_clip": enc["proj_clip"],
        "use_skip_connections": True,
        "forget_bias": 0.0,
    }
    assert sorted(chars.values()) == list(range(1, config["char_vocab_size"]))
    assert sorted(words.values()) == list(range(config["word_vocab_size"]))


def test_char_rows(efml, mapped):
    _, state, chars, _ = mapped
    table, original = (
        state["token_encoder.char_embedding.weight"],
        efml.token_embedder["char_emb_layer.embedding.weight"],
    )
    assert [chars[t] for t in ("<pad>", "<bow>", "<eow>", "<bos>", "<eos>", "<oov>")] == [1, 2, 3, 4, 5, 6]
    assert not table[0].any()
    # the runtime starts a word with the id of `<eow>` and ends it with that of `<bow>`: our
    # begin-of-word row (named `<bow>`) is EFML's `<eow>` row, and the reverse
    assert torch.equal(table[chars["<bow>"]], original[efml.char_lexicon["<eow>"]])
    assert torch.equal(table[chars["<eow>"]], original[efml.char_lexicon["<bow>"]])
    ours = {"<bow>": "<eow>", "<eow>": "<bow>"}
    for token, index in efml.char_lexicon.items():
        assert torch.equal(table[chars[ours.get(token, token)]], original[index]), token
    others = sorted((t for t in chars if chars[t] > 6), key=efml.char_lexicon.get)
    assert [chars[t] for t in others] == list(range(7, 7 + len(others)))  # EFML id order kept


def test_word_rows(efml, mapped):
    _, state, _, words = mapped
    table, original = (
        state["token_encoder.word_embedding.weight"],
        efml.token_embedder["word_emb_layer.embedding.weight"],
    )
    assert [words[t] for t in ("<bos>", "<eos>", "<oov>")] == [0, 1, 2]
    assert "<pad>" not in words and len(words) == len(efml.word_lexicon) - 1
    for token, index in words.items():
        assert torch.equal(table[index], original[efml.word_lexicon[token]]), token
    others = sorted((t for t in words if words[t] > 2), key=efml.word_lexicon.get)
    assert [words[t] for t in others] == list(range(3, 3 + len(others)))  # EFML id order kept


def test_highway_matches_allennlp(efml, mapped):
    _, state, _, _ = mapped
    weight, bias = (efml.token_embedder[f"highways._layers.0.{p}"].double() for p in ("weight", "bias"))
    n = weight.shape[1]
    x = torch.randn(64, n, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    # AllenNLP Highway: [nonlinear; gate] = W x + b, y = σ(gate)·x + (1 − σ(gate))·relu(nonlinear)
    nonlinear, gate = (x @ weight.T + bias).chunk(2, dim=-1)
    expected = torch.sigmoid(gate) * x + (1 - torch.sigmoid(gate)) * torch.relu(nonlinear)
    ours = Highway(n).double()
    ours.load_state_dict(
        {
            k[len("token_encoder.highways.0.") :]: v
            for k, v in state.items()
            if k.startswith("token_encoder.highways.0.")
        }
    )
    with torch.no_grad():
        got = ours(x)
    assert (expected - x).abs().max() > 0.1  # the gate does something here
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)  # float64: only σ(−z) vs 1 − σ(z) differ


def test_projection_is_the_sum_of_its_blocks(efml, mapped):
    _, state, _, _ = mapped
    weight, bias = efml.token_embedder["projection.weight"].double(), efml.token_embedder["projection.bias"].double()
    gen = torch.Generator().manual_seed(1)
    word = torch.randn(32, state["token_encoder.word_projection.weight"].shape[1], generator=gen, dtype=torch.float64)
    chars = torch.randn(32, state["token_encoder.projection.weight"].shape[1], generator=gen, dtype=torch.float64)
    expected = torch.cat([word, chars], dim=-1) @ weight.T + bias
    got = (
        word @ state["token_encoder.word_projection.weight"].double().T
        + chars @ state["token_encoder.projection.weight"].double().T
        + state["token_encoder.projection.bias"].double()
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def _allennlp_lstm(x, h, c, input_w, state_w, state_b, proj_w, cell_clip, proj_clip):
    """AllenNLP LstmCellWithProjection over x [batch, time, in], from its definition (gates i, f, j, o).

    Also returns whether each clip changed a value."""
    hidden = state_w.shape[0] // 4
    outputs, cell_clipped, proj_clipped = [], False, False
    for t in range(x.shape[1]):
        gates = x[:, t] @ input_w.T + h @ state_w.T + state_b
        i, f, j, o = (gates[:, k * hidden : (k + 1) * hidden] for k in range(4))
        c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c
        cell_clipped |= bool((c.abs() > cell_clip).any())
        c = c.clamp(-cell_clip, cell_clip)
        h = (torch.sigmoid(o) * torch.tanh(c)) @ proj_w.T
        proj_clipped |= bool((h.abs() > proj_clip).any())
        h = h.clamp(-proj_clip, proj_clip)
        outputs.append(h)
    return torch.stack(outputs, dim=1), h, c, (cell_clipped, proj_clipped)


@pytest.mark.parametrize("clips", [None, (0.5, 0.3)], ids=["fixture-clips", "tight-clips"])
@pytest.mark.parametrize("layer", [0, 1])
def test_lstm_layer_matches_allennlp(efml, mapped, layer, clips):
    config, state, _, _ = mapped
    hidden, proj = config["lstm_dim"], config["projection_dim"]
    cell_clip, proj_clip = clips or (config["cell_clip"], config["proj_clip"])
    ours = ElmoLstmLayer(
        proj,
        ElmoConfig(lstm_dim=hidden, projection_dim=proj, cell_clip=cell_clip, proj_clip=proj_clip, forget_bias=0.0),
    ).double()
    prefix = f"encoder.layers.{layer}."
    ours.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    gen = torch.Generator().manual_seed(2)
    batch, steps = 3, 6
    x = torch.randn(2, batch, steps, proj, generator=gen, dtype=torch.float64) * 2
    h0 = torch.randn(2, batch, proj, generator=gen, dtype=torch.float64)
    c0 = torch.randn(2, batch, hidden, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        out, (h, c) = ours(x, (h0, c0), None)
    for index, direction in enumerate(("forward", "backward")):
        w = {
            k.split(".", 1)[1]: v.double()
            for k, v in efml.encoder.items()
            if k.startswith(f"{direction}_layer_{layer}.")
        }
        exp_out, exp_h, exp_c, clipped = _allennlp_lstm(
            x[index],
            h0[index],
            c0[index],
            w["input_linearity.weight"],
            w["state_linearity.weight"],
            w["state_linearity.bias"],
            w["state_projection.weight"],
            cell_clip,
            proj_clip,
        )
        # float64, same operations up to summation order: differences of a few ulps of O(1) values
        torch.testing.assert_close(out[index], exp_out, rtol=0, atol=1e-12)
        torch.testing.assert_close(h[index], exp_h, rtol=0, atol=1e-12)
        torch.testing.assert_close(c[index], exp_c, rtol=0, atol=1e-12)
        if clips:
            assert clipped == (True, True)  # both clips act here, so their order is checked too


def test_one_table_checks_and_maps(efml, mapped):
    """weight_table names every tensor of both files (the shapes read_efml checked) and every tensor
    efml_to_elmo returns (issue 34: one table, as legacy.weight_table)."""
    table = weight_table(efml.spec, efml.char_lexicon, efml.word_lexicon)
    files = {"token_embedder.pkl": efml.token_embedder, "encoder.pkl": efml.encoder}
    assert {(e.file, e.name) for e in table} == {(f, n) for f, state in files.items() for n in state}
    assert all(tuple(files[e.file][e.name].shape) == e.shape for e in table)
    assert {e.tensor for e in table} == set(mapped[1])


def test_mapped_names_fit_the_model(efml, mapped):
    config, state, _, _ = mapped
    existing = {k: v for k, v in config.items() if k in ElmoConfig.__dataclass_fields__}
    model_state = ElmoModel(ElmoConfig(**existing)).state_dict()
    new = {"token_encoder.word_embedding.weight", "token_encoder.word_projection.weight"}  # the lead's additions
    assert set(model_state) <= set(state)
    for name, tensor in state.items():
        if name in new and name not in model_state:
            continue
        assert name in model_state, name
        if name == "token_encoder.char_embedding.weight":  # rows: config char_vocab_size (lead's change)
            assert tensor.shape[1] == model_state[name].shape[1]
        else:
            assert tensor.shape == model_state[name].shape, name
