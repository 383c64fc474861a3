"""Each inference precision (`ElmoModel.set_precision`: fp32, bf16, int8) within its stated error bound
of the definition, over the kernel tests' configuration space (skip connections, cell and CNN
projections, clipping, a lexicon model; batch 1 and a ragged batch), and the bound derived from the
arithmetic, not from a measured number.

The bound is a running-error analysis of the biLM, computed alongside the definition in float64
(`_definition_with_bound`): every matrix product adds its own error (`product_error`: bf16's
c_K·Σ|x||w| from `kernels.bf16.product_bound`, u = 2^-8; int8's half-step rounding of the activations
and of the weights, `kernels.int8`) to the error it inherits from its input through |W|; elementwise
maps pass errors on by their Lipschitz constants (σ: 1/4; tanh, relu, the clips: 1; the char CNN's
max-pool passes on its inputs' largest); a product a·b moves by |a|δb + |b|δa + δaδb.  Everything
outside the products is fp32 in every precision: that, and fp32's own rounding, get `FP32_SLACK` of
each tensor's scale.

int8 quantizes a call's activations with one scale (`kernels.int8`: a block of packed rows, one
step's rows, the batch's words), so a row's bound depends on its batch: the bound takes each call's
scale from a superset of its rows, which can only make it larger: the batch's characters for the
char CNN, the batch's words for the linears, the whole batch's layer input for an LSTM layer's
input products, and for the recurrent products the a-priori bound on |ĥ| (the projection's clip,
or Σ_k |Ŵ_p| since |m| ≤ 1, or 1).
The decider (`kernels.products.decide_product`) runs with `MIN_INT8_INPUTS` at 1, so that the test's
small products (which would stay fp32) are int8 too, and `ONE_ROW_FP32_MAX_BYTES` at 0, so that one-row
recurrent products of its cache-sized weights are low-precision too: every product is of the row's
precision (fp32 where the CPU cannot speed it up). The low-precision model runs in eval mode, so it
holds its converted weights only (`hf.fp32_weights`); the bound is computed from an fp32 twin (the same
seed, the same weights).
"""

from __future__ import annotations

import copy
import logging

import numpy
import pytest
import torch
from test_kernel_equivalence import LENGTHS, SPACE, _config, _inputs  # tests/kernels is on sys.path
from torch import nn

from spacy_elmo import ElmoConfig, ElmoModel
from spacy_elmo.hf.modeling_elmo import add_sentence_boundaries
from spacy_elmo.kernels import capabilities, int8, packed_lstm, products
from spacy_elmo.kernels.bf16 import product_bound

FP32_SLACK = 1e-5  # of a tensor's scale: float32 rounding (~1e-7 per operation), far below bf16's 2^-8
NATIVE_BF16 = capabilities.native_bf16_available()
INT8 = capabilities.int8_available()
# bf16-plain: the LSTM's bf16 products as plain matmuls of cached bf16 copies (oneDNN switched off)
PRECISIONS = ["fp32", "bf16", "bf16-plain", "int8"]


def _model(config: ElmoConfig, seed: int = 0) -> ElmoModel:
    """A biLM with its initial LSTM weights (uniform in ±0.05) and biases in ±0.5. The running bound
    is informative while the recurrence contracts: at ±0.05 it stays within a few percent of the
    outputs' scale over the test's 11 steps; at ±0.2 (Σ|W_h| per gate > 4) it grows ~1.5× a step."""
    model = ElmoModel(copy.deepcopy(config)).eval()
    # drawn again in one order (parents first, as transformers 5's post_init): 4.x's visits children first,
    # which draws other weights from the same seed
    torch.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            model._init_weights(module)
        for layer in model.encoder.layers:
            layer.bias.uniform_(-0.5, 0.5)
    model.disable_token_cache()
    return model


def int8_scale(x: numpy.ndarray, dx: numpy.ndarray) -> float:
    """An upper bound of the activation scale s_x of an int8 call on the values x ± dx
    (`kernels.int8`: the span of [min(x̂, 0), max(x̂, 0)] over its levels, at least SMALLEST_SCALE)."""
    top = max(float((x + dx).max(initial=0.0)), 0.0)
    bottom = max(float((dx - x).max(initial=0.0)), 0.0)
    return max((top + bottom) / int8.LEVELS, int8.SMALLEST_SCALE)


def product_error(kind: str, x, dx, w, x_scale: float | None = None) -> numpy.ndarray:
    """The error a product x·W ([rows, K]·[K, N]) adds in `kind`: 0 (fp32: in the slack), bf16's
    c_K·(|x̂|·|W|) with |x̂| ≤ |x| + δx, or int8's s_w/2·Σ|x̂| + s_x/2·Σ|W| (`kernels.int8`): weights
    rounded to s_w = max|w|/127 per column, activations to the call's s_x (`x_scale`, an upper bound
    from `int8_scale`), each off by at most half a step, so |x̂| ≤ |x| + δx + s_x/2."""
    if kind == "fp32":
        return numpy.zeros((x.shape[0], w.shape[1]))
    if kind == "bf16":
        return product_bound(w.shape[0]) * ((numpy.abs(x) + dx) @ numpy.abs(w))
    assert kind == "int8" and x_scale is not None, kind
    x_hat = numpy.abs(x) + dx + x_scale / 2
    s_w = numpy.abs(w).max(axis=0) / 127.0
    return x_hat.sum(axis=1, keepdims=True) * s_w / 2 + x_scale / 2 * numpy.abs(w).sum(axis=0)


def _product(kind, x, dx, w, b=None, x_scale=None):
    """(x·W + b, its error bound): the inherited error δx·|W| plus the product's own."""
    y = x @ w + (0 if b is None else b)
    return y, dx @ numpy.abs(w) + product_error(kind, x, dx, w, x_scale)


def _mul(a, da, b, db):
    return a * b, numpy.abs(a) * db + numpy.abs(b) * da + da * db


def _linear(kind, module, x, dx):
    """A linear over all the batch's words at once (one int8 call: its scale from all of them)."""
    w = module.weight.detach().double().numpy().T
    b = None if module.bias is None else module.bias.detach().double().numpy()
    return _product(kind, x, dx, w, b, int8_scale(x, dx))


def _recurrent_scale(layer) -> float:
    """The int8 activation scale bound of the recurrent products: |ĥ| ≤ the projection's clip, or
    (1 + 1/255)·Σ_k (|W_p| + s_w/2) per column (|m| ≤ 1, quantized within half a step), or 1."""
    if layer.proj_weight is None:
        bound = 1.0
    else:
        wp = numpy.abs(layer.proj_weight.detach().double().numpy())
        bound = float((wp + wp.max(axis=1, keepdims=True) / 254).sum(axis=1).max()) * (1 + 1 / 255)
        if layer.proj_clip:
            bound = min(bound, layer.proj_clip)
    return max(2 * bound * (1 + 1e-6) / int8.LEVELS, int8.SMALLEST_SCALE)


def _lstm_direction(layer, d: int, kind: str, x, dx, x_scale: float | None = None):
    """One direction of an `ElmoLstmLayer` over a sequence x [T, in] (zero initial state); `x_scale`
    bounds the int8 scale of its input products (int8 only)."""
    wi = layer.input_weight[d].detach().double().numpy()
    wh = layer.hidden_weight[d].detach().double().numpy()
    wp = None if layer.proj_weight is None else layer.proj_weight[d].detach().double().numpy()
    bias = layer.gate_bias()[d].detach().double().numpy()
    hidden = bias.shape[0] // 4
    h_scale = _recurrent_scale(layer)
    h, dh = numpy.zeros((1, wh.shape[0])), numpy.zeros((1, wh.shape[0]))
    c, dc = numpy.zeros((1, hidden)), numpy.zeros((1, hidden))
    gx, dgx = _product(kind, x, dx, wi, bias, x_scale)
    outs, douts = [], []
    for t in range(x.shape[0]):
        gh, dgh = _product(kind, h, dh, wh, None, h_scale)
        g, dg = gx[t : t + 1] + gh, dgx[t : t + 1] + dgh
        sig = 1 / (1 + numpy.exp(-g))
        i, f, o = sig[:, :hidden], sig[:, 2 * hidden : 3 * hidden], sig[:, 3 * hidden :]
        di, df, do = dg[:, :hidden] / 4, dg[:, 2 * hidden : 3 * hidden] / 4, dg[:, 3 * hidden :] / 4
        j, dj = numpy.tanh(g[:, hidden : 2 * hidden]), dg[:, hidden : 2 * hidden]
        fc, dfc = _mul(f, df, c, dc)
        ij, dij = _mul(i, di, j, dj)
        c, dc = fc + ij, dfc + dij
        if layer.cell_clip:
            c = numpy.clip(c, -layer.cell_clip, layer.cell_clip)
        m, dm = _mul(o, do, numpy.tanh(c), dc)
        if wp is not None:
            # |m̂| ≤ 1: the scale bound of `_recurrent_scale`'s projection input
            h, dh = _product(kind, m, dm, wp, None, max(2 * (1 + 1e-6) / int8.LEVELS, int8.SMALLEST_SCALE))
            if layer.proj_clip:
                h = numpy.clip(h, -layer.proj_clip, layer.proj_clip)
        else:
            h, dh = m, dm
        outs.append(h)
        douts.append(dh)
    return numpy.concatenate(outs), numpy.concatenate(douts)


def _char_cnn_with_bound(encoder, exact, char_ids: torch.Tensor, kind: str) -> tuple:
    """(value, bound) of the char CNN's features [words, n_filters] for ids [words, chars]: each
    bank's product over its windows in `kind` (the kernel multiplies all banks at once over the
    widest windows, `kernels.pooled_widest_windows`: a bank's sums, with K = dim·widest terms for
    bf16's c_K; int8's scale from all the batch's characters), then the max over positions (which
    passes on the largest error of its inputs), the bias and the activation (1-Lipschitz)."""
    with torch.no_grad():
        chars = exact.char_embedding(char_ids)  # [words, columns, dim], float64
        values = exact.char_features(char_ids).numpy()
    dim, widest = chars.shape[-1], encoder.widest_filter
    flat = chars.numpy().reshape(-1, dim)
    x_scale = int8_scale(flat, numpy.zeros_like(flat))
    bounds = []
    for conv in exact.convolutions:
        n, _, width = conv.weight.shape
        windows = chars.unfold(1, width, 1).reshape(-1, dim * width).numpy()
        w = conv.weight.detach().reshape(n, dim * width).numpy().T
        if kind == "bf16":
            error = product_bound(dim * widest) * (numpy.abs(windows) @ numpy.abs(w))
        else:
            error = product_error(kind, windows, numpy.zeros_like(windows), w, x_scale)
        bounds.append(error.reshape(chars.shape[0], -1, n).max(axis=1))
    return values, numpy.concatenate(bounds, axis=1)


def _definition_with_bound(model: ElmoModel, rows: list[tuple], kind: str) -> list[list[tuple]]:
    """For each row's (character ids, word ids or None) (boundaries included), the (value, error
    bound) of every layer [T, 2·proj]: the value the definition in float64 (from the fp32 `model`'s
    weights), the bound for every product computed in `kind`, with int8's scales taken over the
    whole batch."""
    encoder = model.token_encoder
    exact = copy.deepcopy(encoder).double()
    for module in exact.modules():  # the float64 definition
        if isinstance(module, nn.Linear):
            module.__class__ = nn.Linear
    sizes = [len(char_ids) for char_ids, _ in rows]
    x, dx = _char_cnn_with_bound(encoder, exact, torch.cat([char_ids for char_ids, _ in rows]), kind)
    for highway in encoder.highways:
        t, dt = _linear(kind, highway.transform, x, dx)
        gate_in, dgate_in = _linear(kind, highway.gate, x, dx)
        gate, dgate = 1 / (1 + numpy.exp(-gate_in)), dgate_in / 4
        carried, dcarried = _mul(gate, dgate, numpy.maximum(t, 0), dt)
        kept, dkept = _mul(1 - gate, dgate, x, dx)
        x, dx = carried + kept, dcarried + dkept
    if isinstance(encoder.projection, nn.Linear):
        x, dx = _linear(kind, encoder.projection, x, dx)
    if encoder.word_projection is not None:
        word_ids = torch.cat([words for _, words in rows]).numpy()
        words = encoder.word_embedding.weight.detach().double().numpy()[word_ids]
        wx, dwx = _linear(kind, encoder.word_projection, words, numpy.zeros_like(words))
        x, dx = x + wx, dx + dwx
    splits = numpy.cumsum(sizes)[:-1]
    tokens = list(zip(numpy.split(x, splits), numpy.split(dx, splits)))
    layers = [[(numpy.concatenate([x, x], 1), numpy.concatenate([dx, dx], 1))] for x, dx in tokens]
    # each direction's next layer reads that direction's outputs (in time order here)
    inputs = [[(x, dx), (x, dx)] for x, dx in tokens]
    for index, layer in enumerate(model.encoder.layers):
        every = [part for row in inputs for part in row]
        x_scale = int8_scale(numpy.concatenate([x for x, _ in every]), numpy.concatenate([dx for _, dx in every]))
        for row, ((xf, dxf), (xb, dxb)) in enumerate(inputs):
            fwd, dfwd = _lstm_direction(layer, 0, kind, xf, dxf, x_scale)
            bwd, dbwd = _lstm_direction(layer, 1, kind, xb[::-1], dxb[::-1], x_scale)
            bwd, dbwd = bwd[::-1], dbwd[::-1]
            if model.encoder.use_skip_connections and index > 0:
                fwd, dfwd, bwd, dbwd = fwd + xf, dfwd + dxf, bwd + xb, dbwd + dxb
            layers[row].append((numpy.concatenate([fwd, bwd], 1), numpy.concatenate([dfwd, dbwd], 1)))
            inputs[row] = [(fwd, dfwd), (bwd, dbwd)]
    return layers


# on CUDA (where the suite sees it) the default kernel, "cuda_graphs", computes bf16 products through the
# fused layer's forward (lstm_implementations.bilstm_cuda_graphs); int8 is a CPU precision (fp32 on CUDA)
CASES = [("cpu", precision) for precision in PRECISIONS] + (
    [("cuda", "fp32"), ("cuda", "bf16")] if torch.cuda.is_available() else []
)


@pytest.mark.parametrize("device,precision", CASES)
@pytest.mark.parametrize("batch", [1, len(LENGTHS)])
@pytest.mark.parametrize("skip,cell_proj,cnn_proj,clip,efml", SPACE)
def test_each_precision_is_within_its_stated_bound(
    skip, cell_proj, cnn_proj, clip, efml, batch, device, precision, monkeypatch
):
    if precision == "bf16-plain":
        monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {"onednn"})
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)  # the test's products are small: all int8 here
    # and their one-row recurrent products low-precision too (cache-sized weights stay fp32 otherwise)
    monkeypatch.setattr(products, "ONE_ROW_FP32_MAX_BYTES", 0)
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    name = precision.split("-")[0]
    model = _model(config)  # fp32: the definition's weights
    ids, mask, words = _inputs(batch, seed=1, config=config)
    with torch.no_grad():
        on_device = _model(config).to(device).set_precision(name)  # bound for the device it runs on
        moved = [None if t is None else t.to(device) for t in (ids, mask, words)]
        out = on_device(*moved, keep_sentence_boundaries=True)
        out.hidden_states = tuple(h.cpu() for h in out.hidden_states)
    # every product in the precision, where the device has its products (else exact fp32)
    native = {"fp32": True, "bf16": NATIVE_BF16 or device == "cuda", "int8": INT8 and device == "cpu"}[name]
    kind = name if native else "fp32"
    char_ids, full_mask, word_ids = add_sentence_boundaries(ids, mask, words, config.uses_char_lexicon)
    lengths = [int(full_mask[row].sum()) for row in range(batch)]
    rows = [(char_ids[row, :n], None if word_ids is None else word_ids[row, :n]) for row, n in enumerate(lengths)]
    for row, (n, bounded) in enumerate(zip(lengths, _definition_with_bound(model, rows, kind))):
        for k, (want, bound) in enumerate(bounded):
            got = out.hidden_states[k][row, :n].double().numpy()
            scale = numpy.abs(want).max()
            allowed = bound + FP32_SLACK * scale
            worst = (numpy.abs(got - want) / allowed).max()
            assert worst <= 1, f"{precision}, row {row}, layer {k}: {worst:.2f}× the bound"
            assert bound.max() < 0.2 * scale, f"{precision}, layer {k}: a vacuous bound"


@pytest.mark.parametrize("precision,capability", [("bf16", "native_bf16"), ("int8", "int8")])
def test_a_precision_the_cpu_cannot_speed_up_is_fp32_after_one_warning_line(precision, capability, monkeypatch, caplog):
    """On a CPU without native bf16 products, or without int8 products faster than fp32 (forced
    here), a bf16 or int8 model computes exact fp32 (the same bits as the fp32 model) after one
    warning line, given once; the request stays recorded (a saved model computes in it elsewhere)."""
    config = _config(True, True, True, True)
    ids, mask, words = _inputs(len(LENGTHS), seed=1, config=config)
    with torch.no_grad():
        fp32 = _model(config)(ids, mask, words).hidden_states
    monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {capability})
    monkeypatch.setattr(capabilities, f"_warned_{precision}", set())
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)  # every product would be int8 here
    model = _model(config).set_precision(precision)
    with caplog.at_level(logging.WARNING, logger="spacy_elmo.kernels"), torch.no_grad():
        got = model(ids, mask, words).hidden_states
        again = model(ids, mask, words).hidden_states
    assert all(map(torch.equal, fp32, got)) and all(map(torch.equal, fp32, again))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert f"precision='{precision}'" in warnings[0] and "fp32" in warnings[0] and "switched off" in warnings[0]
    assert model.config.precision == precision


@pytest.mark.skipif(not INT8, reason="int8 products run only on a CPU of capabilities.INT8_CPUS")
@pytest.mark.parametrize("rows,inputs", [(1, 64), (7, 130), (300, 64)])
@pytest.mark.parametrize("values", ["signed", "positive", "negative", "tiny", "zero"])
def test_an_int8_product_is_the_stated_scheme(rows, inputs, values):
    """`kernels.int8.linear` computes what kernels/int8.py states, emulated here in float64: weights
    per column to 127 levels, the call's activations to 255 levels of one scale with a zero point,
    an exact integer sum, dequantized (+ bias): within fp32 rounding (7-bit activations, twice the
    step, would be far off)."""
    g = torch.Generator().manual_seed(rows * inputs)
    x = {
        "signed": torch.randn(rows, inputs, generator=g) * 3,
        "positive": torch.rand(rows, inputs, generator=g),
        "negative": -torch.rand(rows, inputs, generator=g) - 0.5,
        "tiny": torch.randn(rows, inputs, generator=g) * 1e-4,
        "zero": torch.zeros(rows, inputs),
    }[values]
    w, bias = torch.randn(inputs, 40, generator=g) * 0.1, torch.randn(40, generator=g)
    got = int8.linear(x, int8.pack(w, bias)).double()
    qw, w_scale = int8.quantize_columns(w)
    xd = x.double()
    low, high = min(float(xd.min()), 0.0), max(float(xd.max()), 0.0)
    scale = max((high - low) / int8.LEVELS, int8.SMALLEST_SCALE) if high > low else 0.1
    zero = min(max(round(-low / scale), 0), int8.LEVELS)
    xq = torch.clamp(torch.round(xd / scale) + zero, 0, int8.LEVELS) - zero
    want = (xq @ qw.double()) * scale * w_scale.double() + bias.double()
    terms = (xq.abs() @ qw.double().abs()) * scale * w_scale.double() + bias.double().abs()
    assert torch.all((got - want).abs() <= 1e-6 * terms + 1e-12), float((got - want).abs().max())


def test_the_int8_probe_reads_the_cpu_flags():
    """x86's VNNI flags (amx_int8, avx512_vnni, avx_vnni: `INT8_CPUS`) decide; the probe names what is missing."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        assert "not taken" in capabilities._probe_int8("Features\t: fp asimd bf16\n")
        return
    assert "none of the flags" in capabilities._probe_int8("flags\t\t: fpu avx2 avx512f avx512_bf16\n")
    with_vnni = capabilities._probe_int8("flags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert with_vnni is None or "quantized" in with_vnni or "Error" in with_vnni
    assert capabilities._probe_int8("flags\t\t: fpu amx_int8 amx_tile\n") == with_vnni
    assert capabilities._probe_int8("flags\t\t: fpu avx_vnni\n") == with_vnni


def test_the_native_bf16_probe_reads_the_cpu_flags():
    """x86's avx512_bf16 / amx_bf16 (Arm's bf16) flags decide; the probe names what is missing."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("x86 flags")
    assert "none of the flags" in capabilities._probe_native_bf16("flags\t\t: fpu avx2 avx512f avx512_vnni\n")
    with_bf16 = capabilities._probe_native_bf16("flags\t\t: fpu avx512f avx512_bf16\n")
    assert with_bf16 is None or "oneDNN" in with_bf16
    assert capabilities._probe_native_bf16("flags\t\t: fpu amx_bf16 amx_tile\n") == with_bf16


@pytest.mark.skipif(not NATIVE_BF16, reason="bf16 kernels run only with native bf16 products")
@pytest.mark.parametrize("onednn", [True, False])
def test_bf16_weights_are_converted_once_and_refreshed_after_an_in_place_edit(onednn, monkeypatch):
    """Bound in eval mode, the LSTM's and the linears' weights are converted once, when bf16 is bound:
    the model holds the bf16 forms (oneDNN-prepacked, or plain without oneDNN) instead of the fp32
    weights, and every call reads those. A model that keeps its fp32 weights (put in eval mode after
    binding, with no files to read them back from) makes the bf16 copies on the first call, reuses
    them, and makes new ones after an in-place edit of a weight (its version changes)."""
    from spacy_elmo.kernels.bf16 import PrepackedBf16

    if not onednn:
        monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {"onednn"})
    monkeypatch.setattr(products, "ONE_ROW_FP32_MAX_BYTES", 0)  # (the recurrent weights too)
    form = PrepackedBf16 if onednn else torch.Tensor
    config = _config(True, True, True, True)
    ids, mask, words = _inputs(len(LENGTHS), seed=1, config=config)

    released = _model(config).set_precision("bf16")
    layer, linear = released.encoder.layers[0], released.token_encoder.highways[0].transform
    assert "input_weight" not in dict(layer.named_parameters()) and "weight" not in dict(linear.named_parameters())
    held = {name: list(forms) for name, forms in layer.converted.items()}
    assert sorted(held) == ["hidden_weight", "input_weight", "proj_weight"]
    assert all(isinstance(f, form) for forms in held.values() for f in forms)
    assert isinstance(linear.converted["weight"], form)
    with torch.no_grad():
        released(ids, mask, words)
        released(ids, mask, words)
    assert all(layer.converted[name][d] is held[name][d] for name in held for d in range(2))

    torch.manual_seed(0)
    model = ElmoModel(copy.deepcopy(config)).set_precision("bf16").eval()  # (in memory: eval() keeps fp32)
    model.disable_token_cache()
    layer, linear = model.encoder.layers[0], model.token_encoder.highways[0].transform
    assert not layer.converted and layer.input_weight is not None

    def copies():
        kept = products._DERIVED._store
        return {k: v[1] for k, v in kept[layer].items()}, kept[linear]["converted_weight"][1]

    with torch.no_grad():
        model(ids, mask, words)
        first_lstm, first_linear = copies()
        model(ids, mask, words)
        second_lstm, second_linear = copies()
        assert sorted(first_lstm) == sorted(second_lstm) and len(first_lstm) == 3  # input, hidden, projection
        assert all(first_lstm[k] is second_lstm[k] for k in first_lstm) and first_linear is second_linear
        layer.input_weight.mul_(2.0)
        linear.weight.mul_(2.0)
        model(ids, mask, words)
        third_lstm, third_linear = copies()
    name = "converted_input_weight"
    assert third_lstm[name] is not first_lstm[name] and third_linear is not first_linear
    if not onednn:  # (oneDNN's prepacked layout is opaque)
        bf16 = layer.input_weight.detach().to(torch.bfloat16)
        assert all(torch.equal(third_lstm[name][d], bf16[d]) for d in range(2))
        assert torch.equal(third_linear, linear.weight.detach().t().to(torch.bfloat16))
    else:
        assert torch.equal(third_linear.weight.to_dense(), linear.weight.detach().to(torch.bfloat16))


def test_an_invalid_precision_is_one_line_naming_the_setting():
    model = _model(_config(True, True, True, True))
    with pytest.raises(ValueError) as err:
        model.set_precision("fp16")
    assert str(err.value) == "precision must be one of 'fp32', 'bf16', 'int8', got 'fp16'"
    with pytest.raises(Exception) as err:
        ElmoConfig(precision="fp16")
    from spacy_elmo.hf.configuration_elmo import config_error_message

    message = config_error_message(err.value)
    assert "\n" not in message and "precision" in message and "fp16" in message, message


def test_how_a_product_computes_is_decided_by_plain_values():
    """`decide_product` (the one decider): fp32 stays fp32; int8 on a CPU that takes it, for products
    of at least `MIN_INT8_INPUTS` inputs (a small model's runs exact fp32); bf16 where the device has
    it; a one-row product of a weight of at most `ONE_ROW_FP32_MAX_BYTES` fp32 through MKL; the
    kernel oneDNN's where the CPU has it; each fallback exact fp32."""
    from spacy_elmo.kernels.products import Capabilities, Product, decide_product

    every = Capabilities(native_bf16=True, int8=True, onednn=True)
    none = Capabilities(native_bf16=False, int8=False, onednn=False)
    big, small = 32 * 2**20, products.ONE_ROW_FP32_MAX_BYTES
    assert decide_product("fp32", "cpu", 4096, capabilities=every) == Product("fp32", "onednn")
    assert decide_product("fp32", "cpu", 4096, capabilities=none) == Product("fp32", "torch")
    assert decide_product("int8", "cpu", products.MIN_INT8_INPUTS, capabilities=every) == Product("int8", "int8")
    assert decide_product("int8", "cpu", products.MIN_INT8_INPUTS - 1, capabilities=every).dtype == "fp32"
    assert decide_product("int8", "cuda", 4096, capabilities=every) == Product("fp32", "torch")
    assert decide_product("int8", "cpu", 4096, capabilities=none) == Product("fp32", "torch")
    assert decide_product("bf16", "cpu", 16, capabilities=every) == Product("bf16", "onednn")
    assert decide_product("bf16", "cpu", 16, capabilities=every._replace(onednn=False)) == Product("bf16", "torch")
    assert decide_product("bf16", "cuda", 16, capabilities=every) == Product("bf16", "torch")
    assert decide_product("bf16", "cpu", 16, capabilities=none).dtype == "fp32"
    for precision, low in (("int8", "int8"), ("bf16", "bf16")):
        assert decide_product(precision, "cpu", 512, 1, small, capabilities=every) == Product("fp32", "torch")
        assert decide_product(precision, "cpu", 512, 1, big, capabilities=every).dtype == low
        assert decide_product(precision, "cpu", 512, 2, small, capabilities=every).dtype == low
        assert decide_product(precision, "cpu", 512, None, small, capabilities=every).dtype == low
    # what a device can do comes from kernels.capabilities, asked only for the precision requested
    here = products.device_capabilities("int8", "cpu")
    assert here.int8 == INT8 and not here.native_bf16
    assert products.device_capabilities("bf16", "cpu").native_bf16 == NATIVE_BF16


def test_the_model_asks_the_decider_once_when_a_precision_is_bound(monkeypatch):
    """The LSTM, the linears and the char CNN hold the decider's answers from `set_precision` on; no
    call asks it again (counted through the module the model calls it by)."""
    asked: list[tuple] = []
    decide = products.decide_product

    def counted(*args, **kwargs):
        asked.append(args)
        return decide(*args, **kwargs)

    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)
    import spacy_elmo.kernels as kernels_package
    from spacy_elmo.kernels import linear as linear_module

    for where in (products, kernels_package, linear_module):
        monkeypatch.setattr(where, "decide_product", counted)
    config = _config(True, True, True, True)
    model = _model(config)
    asked.clear()
    model.set_precision("int8")
    # the char CNN, 2 highway linears and the projection, and per LSTM layer its input weight and
    # its two recurrent weights for one row and for several
    assert len(asked) == 1 + 3 + 2 * (1 + 2 * 2), asked
    ids, mask, words = _inputs(len(LENGTHS), seed=1, config=config)
    asked.clear()
    with torch.no_grad():
        model(ids, mask, words)
    assert not asked
    expected = "int8" if INT8 else "fp32"
    assert model.token_encoder.products.dtype == expected
    assert model.token_encoder.highways[0].transform.product.dtype == expected
    assert {p.rows.dtype for layer in model.encoder.layers for p in layer.products.values()} == {expected}


@pytest.mark.parametrize("precision", ["int8", "bf16"])
@pytest.mark.parametrize("limit", [0, products.ONE_ROW_FP32_MAX_BYTES])
def test_one_row_products_of_cache_sized_weights_stay_fp32(precision, limit, monkeypatch):
    """Under int8 and bf16, a step with one active row multiplies a recurrent weight of at most
    `products.ONE_ROW_FP32_MAX_BYTES` in fp32 (small's batch 1 ran slower in low precision); steps
    of several rows, and every step where the limit is 0, take the low-precision product. The
    low-precision calls are counted by wrapping the real `_LayerRun.low_product` (it still computes).
    Weights with a one-row fp32 product stay fp32 parameters in eval mode (only the others are
    released)."""
    if precision == "int8" and not INT8 or precision == "bf16" and not NATIVE_BF16:
        pytest.skip(f"{precision} products are fp32 on this CPU (covered by the fallback test)")
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)
    monkeypatch.setattr(products, "ONE_ROW_FP32_MAX_BYTES", limit)
    config = _config(True, True, False, True, False)  # a cell projection: both recurrent weights
    model = _model(config).set_precision(precision)
    held = {name for name, _ in model.encoder.layers[0].named_parameters()}
    assert held == ({"bias", "hidden_weight", "proj_weight"} if limit else {"bias"})
    calls: list[tuple[str, int]] = []
    product = packed_lstm._LayerRun.low_product

    def counted(self, name, kind, x, d):
        calls.append((name, x.shape[0]))
        return product(self, name, kind, x, d)

    monkeypatch.setattr(packed_lstm._LayerRun, "low_product", counted)
    for batch in (1, len(LENGTHS)):
        calls.clear()
        ids, mask, words = _inputs(batch, seed=1, config=config)
        with torch.no_grad():
            model(ids, mask, words)
        recurrent = [(name, rows) for name, rows in calls if name != "input_weight"]
        one_row = [call for call in recurrent if call[1] == 1]
        if limit:
            assert not one_row, one_row
        else:
            assert {name for name, _ in one_row} == {"hidden_weight", "proj_weight"}
        if batch > 1:  # steps of several rows are low-precision whatever the limit
            assert {name for name, rows in recurrent if rows > 1} == {"hidden_weight", "proj_weight"}
        assert any(name == "input_weight" for name, _ in calls)
