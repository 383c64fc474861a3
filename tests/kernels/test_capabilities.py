"""The probes of the private torch ops the fast paths call (`kernels.capabilities`), on both sides: torch's
own ops (present on every torch the package declares, 2.4.1 to the newest: both CI legs run this file),
and an op namespace that lacks an op or computes something else, handed to the probe as its input (no
patch of torch). Where a probe says no, the model computes the exact fallback after one warning line."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from test_kernel_equivalence import LENGTHS, _config, _inputs, _model  # tests/kernels is on sys.path

from spacy_elmo.kernels import capabilities, products

MKLDNN = torch.ops.mkldnn
QUANTIZED = torch.ops.quantized


def _linear_pointwise_off_by_one_ulp(*args):
    out = MKLDNN._linear_pointwise(*args)
    return torch.nextafter(out, torch.full_like(out, float("inf")))


_linear_pointwise_off_by_one_ulp.binary = MKLDNN._linear_pointwise.binary  # type: ignore[attr-defined]

# op namespaces standing for a torch whose op is missing or computes something else
ONEDNN_BROKEN = {
    "no ops": SimpleNamespace(),
    "no _linear_pointwise": SimpleNamespace(_reorder_linear_weight=MKLDNN._reorder_linear_weight),
    "no binary variant": SimpleNamespace(
        _reorder_linear_weight=MKLDNN._reorder_linear_weight, _linear_pointwise=lambda *a: MKLDNN._linear_pointwise(*a)
    ),
    "another product": SimpleNamespace(
        _reorder_linear_weight=MKLDNN._reorder_linear_weight, _linear_pointwise=_linear_pointwise_off_by_one_ulp
    ),
    "a reorder that scales": SimpleNamespace(
        _reorder_linear_weight=lambda w, rows: MKLDNN._reorder_linear_weight(w * 2, rows),
        _linear_pointwise=MKLDNN._linear_pointwise,
    ),
}
QUANTIZED_BROKEN = {
    "no ops": SimpleNamespace(),
    "no linear_dynamic": SimpleNamespace(linear_prepack=QUANTIZED.linear_prepack),
    # 7-bit activations (reduce_range): the products of other integers
    "reduce_range": SimpleNamespace(
        linear_prepack=QUANTIZED.linear_prepack, linear_dynamic=lambda x, w, _: QUANTIZED.linear_dynamic(x, w, True)
    ),
}


def test_torchs_own_private_ops_pass_their_probes():
    """This torch (each CI leg's: the declared floor and the newest) has the ops, computing what the fast
    paths expect; the package then takes oneDNN's linear and, on a CPU of `INT8_CPUS`, int8."""
    assert capabilities.onednn_linear_works() and capabilities._probe_onednn() is None
    assert capabilities.onednn_linear_works(MKLDNN)
    assert capabilities.quantized_linear_works() and capabilities.quantized_linear_works(QUANTIZED)
    assert capabilities.onednn_linear_available()


@pytest.mark.parametrize("case", list(ONEDNN_BROKEN))
def test_the_onednn_probe_says_no_to_a_missing_or_different_op(case):
    ops = ONEDNN_BROKEN[case]
    assert not capabilities.onednn_linear_works(ops)
    why = capabilities._probe_onednn(ops)
    assert why and "\n" not in why
    if case.startswith("no "):
        assert why.startswith("AttributeError"), why
    else:
        assert why.startswith("unexpected result"), why


@pytest.mark.parametrize("case", list(QUANTIZED_BROKEN))
def test_the_quantized_linear_probe_says_no_to_a_missing_or_different_op(case):
    ops = QUANTIZED_BROKEN[case]
    assert not capabilities.quantized_linear_works(ops)
    why = capabilities._probe_quantized_linear(ops)
    assert why and ("AttributeError" in why if case.startswith("no ") else "unexpected result" in why), why
    # and on an x86 CPU with VNNI, int8 is not taken with such ops
    assert capabilities._probe_int8("flags\t\t: fpu avx512_vnni\n", ops) == why or not capabilities._is_x86()


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_without_onednns_ops_the_model_computes_the_mkl_products_after_one_warning_line(monkeypatch, caplog):
    """A torch whose oneDNN linear is missing (the probe's verdict on such ops, in place of this torch's):
    the fp32 model gives the bits of its MKL fallback (`FORCE_FALLBACK`, the path tests switch on) after
    one warning line, given once. With this torch's ops: no warning."""
    config = _config(True, True, True, True)
    ids, mask, _ = _inputs(len(LENGTHS), seed=3, config=config)
    monkeypatch.setattr(capabilities, "_logged", set())
    with caplog.at_level(logging.INFO, logger="spacy_elmo.kernels"), torch.no_grad():
        _model(config)(ids, mask)
    assert not [r for r in caplog.records if "onednn" in r.getMessage()]
    with monkeypatch.context() as forced:
        forced.setattr(capabilities, "FORCE_FALLBACK", {"onednn"})
        with torch.no_grad():
            mkl = _model(config)(ids, mask).hidden_states
    monkeypatch.setattr(capabilities, "_ONEDNN_PROBLEM", capabilities._probe_onednn(ONEDNN_BROKEN["no ops"]))
    monkeypatch.setattr(capabilities, "_logged", set())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="spacy_elmo.kernels"), torch.no_grad():
        model = _model(config)
        got = model(ids, mask).hidden_states
        again = model(ids, mask).hidden_states
    assert all(map(torch.equal, mkl, got)) and all(map(torch.equal, mkl, again))
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "onednn unavailable (AttributeError" in warnings[0] and "exact fallback" in warnings[0]


def test_without_the_quantized_linear_int8_is_fp32_after_one_warning_line(monkeypatch, caplog):
    """A torch whose quantized dynamic linear computes other products (the probe's verdict on such ops): an
    int8 model gives the fp32 model's bits after one warning line that says why, given once. With this
    torch's ops, on a CPU of `INT8_CPUS`, int8 runs (other values than fp32) without a warning."""
    config = _config(True, True, True, True)
    ids, mask, _ = _inputs(len(LENGTHS), seed=3, config=config)
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)  # every product would be int8 here
    with torch.no_grad():
        fp32 = _model(config)(ids, mask).hidden_states
    if capabilities.int8_available():
        monkeypatch.setattr(capabilities, "_warned_int8", set())
        with caplog.at_level(logging.WARNING, logger="spacy_elmo.kernels"), torch.no_grad():
            present = _model(config).set_precision("int8")(ids, mask).hidden_states
        assert not _warnings(caplog)
        assert not all(map(torch.equal, fp32, present))
    problem = capabilities._probe_quantized_linear(QUANTIZED_BROKEN["reduce_range"])
    monkeypatch.setattr(capabilities, "_int8_missing", lambda: problem)
    monkeypatch.setattr(capabilities, "_warned_int8", set())
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spacy_elmo.kernels"), torch.no_grad():
        model = _model(config).set_precision("int8")
        got = model(ids, mask).hidden_states
        again = model(ids, mask).hidden_states
    assert all(map(torch.equal, fp32, got)) and all(map(torch.equal, fp32, again))
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "precision='int8'" in warnings[0] and "unexpected result" in warnings[0] and "fp32" in warnings[0]
