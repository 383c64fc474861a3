"""One way to write and read the biLM: the `elmo` component's files and bytes are the HF directory
of `save_pretrained`, read by `ElmoModel.from_pretrained` (safetensors only, strict checks).

Back-compatibility is checked against tests/fixtures/saved_v0_1: a pipeline and an HF directory
written by 0.1.0 (development commit 8b05b7b, see its generate.py), with its layers; against
saved_c55240e (before the package's folders) and saved_v0_2_0 (release 0.2.0, the first release), each
with its generate.py and machine.json.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
import torch
from safetensors.torch import load_file, save_file
from spacy import util as spacy_util
from thinc.util import to_numpy

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoLoadError, ElmoModel, ElmoTokenizer
from spacy_elmo.provenance import cpu_kind
from spacy_elmo.spacy.layers.bilm_files import bilm_from_bytes, bilm_to_bytes

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "saved_v0_1"
SENTENCE = "The cat sat on the mat , said Dr. Smith in London ."  # as in OLD/generate.py


def hf_layers(model, words) -> numpy.ndarray:
    with torch.no_grad():
        out = model(**ElmoTokenizer()([words]))
    return torch.stack(out.hidden_states)[:, 0].numpy()


@pytest.fixture(scope="module")
def expected() -> numpy.ndarray:
    return numpy.load(OLD / "expected_layers.npy", allow_pickle=False)


@pytest.fixture(scope="module")
def same_vectors(tiny_model):
    """Asserts that float32 layers of SENTENCE are 0.1.0's (or another float32 `reference`'s) up to
    float rounding: as close to the float64 layers as the reference is, up to float32_error's factor
    (0.1.0 computed its layers on another CPU, which rounds differently)."""
    exact = hf_layers(exact_copy(tiny_model), [t.text for t in spacy.blank("en")(SENTENCE)])

    def check(got, reference):  # cupy arrays (under --spacy-gpu) are compared on the host by float32_error
        assert_float32_error(exact, reference, got, terms=forward_terms(tiny_model.config))

    return check


def test_pipeline_saved_by_0_1_loads_with_the_same_vectors(expected, tiny_model, same_vectors):
    config = spacy_util.load_config(OLD / "pipeline" / "config.cfg")
    assert not Path(config["components"]["elmo"]["model"]).exists()  # only the saved weights can serve
    nlp = spacy.load(OLD / "pipeline")
    doc = nlp(SENTENCE)
    same_vectors(doc._.elmo.layers, expected)
    same_vectors(doc._.elmo.layers, hf_layers(tiny_model, [t.text for t in doc]))


def test_hf_directory_saved_by_0_1_loads_with_the_same_vectors(expected, tiny_model, same_vectors):
    from transformers import AutoModel

    words = spacy.blank("en")(SENTENCE)
    words = [t.text for t in words]
    for model in (ElmoModel.from_pretrained(OLD / "hf"), AutoModel.from_pretrained(OLD / "hf")):
        same_vectors(hf_layers(model.eval(), words), expected)
        for a, b in zip(model.state_dict().values(), tiny_model.state_dict().values()):
            assert torch.equal(a, b)


def test_component_bytes_of_0_1_load(expected, same_vectors):
    """Release 0.1.0 wrote the component's biLM bytes as msgpack {config: JSON text, weights: safetensors}."""
    hf = OLD / "hf"
    old_bilm = srsly.msgpack_dumps(
        {"config": (hf / "config.json").read_text(), "weights": (hf / "model.safetensors").read_bytes()}
    )
    old_component = spacy_util.to_bytes({"cfg": lambda: srsly.json_dumps({}), "bilm": lambda: old_bilm}, [])
    nlp = spacy.blank("en").from_config(_pipeline_config("/nonexistent/elmo"))  # weights come from the bytes
    nlp.get_pipe("elmo").from_bytes(old_component)
    same_vectors(nlp(SENTENCE)._.elmo.layers, expected)
    assert bilm_from_bytes(srsly.msgpack_dumps({"config": None})) == (None, None)


def test_downstream_models_trained_by_0_1_load_with_the_same_scores():
    """Taggers on ElmoListener.v1 (+ tok2vec) and ElmoEmbed.v1, trained and saved by 0.1.0: their
    thinc node layout is part of the saved model, so the v1 architectures must keep it."""
    saved = numpy.load(OLD / "downstream_scores.npz", allow_pickle=False)
    nlp = spacy.load(OLD / "downstream")
    doc = nlp(SENTENCE)
    for name in ("tagger_listener", "tagger_embed"):
        scores = to_numpy(nlp.get_pipe(name).model.predict([doc])[0])  # cupy under --spacy-gpu
        # the biLM layers agree within 1e-6 (above); a few width-8 layers with O(1) weights follow
        numpy.testing.assert_allclose(scores, saved[name], atol=1e-5, rtol=0)
        assert saved[name].std() > 0.01  # trained scores, not an untouched initialization


def _pipeline_config(model: str):
    """The config of a pipeline with an `elmo` component (built from it, `model` is read only if no weights arrive)."""
    return {"nlp": {"lang": "en", "pipeline": ["elmo"]}, "components": {"elmo": {"factory": "elmo", "model": model}}}


@pytest.fixture
def saved_pipeline(tiny_model_dir, tmp_path) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp.to_disk(tmp_path / "pipeline")
    return tmp_path / "pipeline"


def test_files_and_bytes_are_the_hf_directory(saved_pipeline, tiny_model):
    bilm = saved_pipeline / "elmo" / "bilm"
    on_disk = {p.name: p.read_bytes() for p in bilm.iterdir()}
    assert set(on_disk) == {"config.json", "model.safetensors", "tokenizer_config.json"}
    loaded = ElmoModel.from_pretrained(bilm)  # the spaCy face's files are a plain HF directory
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), tiny_model.state_dict().values()))
    as_bytes = srsly.msgpack_loads(bilm_to_bytes(loaded, ElmoTokenizer.from_pretrained(bilm)))
    assert as_bytes == {"files": on_disk}  # the same files, nothing pickled, no archive
    assert bilm_to_bytes(None, None) == srsly.msgpack_dumps({"files": None})


def _corrupt_nan(bilm: Path) -> None:
    tensors = load_file(bilm / "model.safetensors")
    tensors["encoder.layers.1.hidden_weight"][0, 0, 0] = float("nan")
    save_file(tensors, bilm / "model.safetensors", metadata={"format": "pt"})


def _corrupt_missing(bilm: Path) -> None:
    tensors = load_file(bilm / "model.safetensors")
    del tensors["token_encoder.highways.1.gate.weight"]
    save_file(tensors, bilm / "model.safetensors", metadata={"format": "pt"})


def _corrupt_unknown_field(bilm: Path) -> None:
    config = json.loads((bilm / "config.json").read_text())
    config["lstm_dims"] = 64
    (bilm / "config.json").write_text(json.dumps(config))


CORRUPTIONS = [
    (_corrupt_nan, r"model\.safetensors: weights contain NaN/inf values in \['encoder\.layers\.1\.hidden_weight'\]"),
    (
        _corrupt_missing,
        r"model\.safetensors: the weights file lacks tensors \['token_encoder\.highways\.1\.gate\.weight'\]",
    ),
    (_corrupt_unknown_field, r"config\.json: unknown field\(s\) \['lstm_dims'\]"),
]


@pytest.mark.parametrize("corrupt,message", CORRUPTIONS, ids=["nan", "missing-tensor", "unknown-field"])
def test_broken_saved_pipeline_fails_at_spacy_load(saved_pipeline, corrupt, message):
    bilm = saved_pipeline / "elmo" / "bilm"
    corrupt(bilm)
    with pytest.raises(ElmoLoadError) as error:
        spacy.load(saved_pipeline)
    text = str(error.value)
    assert "\n" not in text
    file = "config.json" if corrupt is _corrupt_unknown_field else "model.safetensors"
    assert text.startswith(str(bilm / file) + ": ")
    assert re.search(message, text)


def test_broken_bytes_fail_naming_the_file(saved_pipeline):
    _corrupt_nan(saved_pipeline / "elmo" / "bilm")
    broken = spacy_util.to_bytes(
        {
            "cfg": lambda: srsly.json_dumps({}),
            "bilm": lambda: srsly.msgpack_dumps(
                {"files": {p.name: p.read_bytes() for p in (saved_pipeline / "elmo" / "bilm").iterdir()}}
            ),
        },
        [],
    )
    elmo = spacy.blank("en").from_config(_pipeline_config("/nonexistent/elmo")).get_pipe("elmo")
    with pytest.raises(ElmoLoadError, match=r"^elmo bytes/model\.safetensors: weights contain NaN/inf"):
        elmo.from_bytes(broken)


class _Bomb:
    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_spacy_load_never_unpickles(saved_pipeline, tmp_path):
    """A pickle planted beside (or instead of) the safetensors weights is never read."""
    bilm = saved_pipeline / "elmo" / "bilm"
    marker = tmp_path / "unpickled"
    bomb = _Bomb()
    bomb.marker = str(marker)
    (bilm / "pytorch_model.bin").write_bytes(pickle.dumps(bomb))
    spacy.load(saved_pipeline)  # loads the safetensors weights
    (bilm / "model.safetensors").unlink()
    with pytest.raises(OSError, match="model.safetensors"):
        spacy.load(saved_pipeline)
    assert not marker.exists()


# --- saved at c55240e, the last commit before the package was put in folders, and by release 0.2.0 ----------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# each folder's generate.py says how it was written; every later release loads what 0.2.0 saved
SAVED_FOLDERS = ["saved_c55240e", "saved_v0_2_0"]


def written_here(record: dict) -> bool:
    """Whether the fixture's arrays came from this machine's arithmetic: the same CPU kind (vendor, family and
    model number, and the flags that choose kernels) and the same torch. The CPU's name cannot tell: every AMD
    EPYC generation here is named just "AMD EPYC". c55240e's record predates `cpu_kind` (it names only
    "AMD EPYC"), so its arrays count as another machine's: only the float32 bound applies to them."""
    return record.get("cpu_kind") == cpu_kind() and record.get("torch") == torch.__version__


@pytest.fixture(scope="module", params=SAVED_FOLDERS)
def saved_folder(request):
    """(the folder, its expected arrays, its record, whether they were computed here): identical where this
    machine wrote them, else the same up to float rounding (another CPU kind sums in another order)."""
    folder = FIXTURES / request.param
    expected = dict(numpy.load(folder / "expected.npz", allow_pickle=False))
    record = json.loads((folder / "machine.json").read_text(encoding="utf-8"))
    return folder, expected, record, written_here(record)


def test_a_saved_pipeline_loads_with_the_same_vectors(saved_folder, tiny_model):
    folder, expected, record, same_cpu = saved_folder
    config = spacy_util.load_config(folder / "pipeline" / "config.cfg")
    assert config["components"]["elmo"]["model"] == "hf" and not Path("hf").exists()  # a name that is gone
    nlp = spacy.load(folder / "pipeline")
    weights = numpy.asarray(nlp.get_pipe("elmo").tensor_weights(), dtype=numpy.float64)
    for i, doc in enumerate(nlp.pipe(record["sentences"])):
        layers, tensor = to_numpy(doc._.elmo.layers), to_numpy(doc.tensor)
        if same_cpu:
            numpy.testing.assert_array_equal(layers, expected[f"layers_{i}"])
            numpy.testing.assert_array_equal(tensor, expected[f"tensor_{i}"])
        exact_layers = hf_layers(exact_copy(tiny_model), [t.text for t in doc])
        exact = {"layers": exact_layers, "tensor": numpy.tensordot(weights, exact_layers, axes=1)}
        reference = {"layers": expected[f"layers_{i}"], "tensor": expected[f"tensor_{i}"]}
        got = {"layers": layers, "tensor": tensor}
        assert_float32_error(exact, reference, got, terms=forward_terms(tiny_model.config), what=f"sentence {i}")


def test_a_saved_hf_directory_loads_with_the_same_vectors(saved_folder, tiny_model):
    from transformers import AutoModel

    folder, expected, record, same_cpu = saved_folder
    words = record["sentences"][0].split()
    for model in (ElmoModel.from_pretrained(folder / "hf"), AutoModel.from_pretrained(folder / "hf")):
        got = hf_layers(model.eval(), words)
        if same_cpu:
            numpy.testing.assert_array_equal(got, expected["hidden_states"])
        exact = hf_layers(exact_copy(tiny_model), words)
        assert_float32_error(exact, expected["hidden_states"], got, terms=forward_terms(tiny_model.config))
