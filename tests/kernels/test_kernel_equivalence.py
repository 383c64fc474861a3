"""Every LSTM kernel computes the readable definition (`eager`), over the whole configuration space;
the training kernel (`fused`) also gives eager's gradients there, and any freeze pattern trains
(through eager and through fused) with the gradients of the fully trainable model.

"Computes" is held to the arithmetic, not to one CPU's rounding: each float32 result is within a
small multiple of eager float32's own error of the definition run in float64, measured in the same
test (`float32_error`)."""

from __future__ import annotations

import copy
import functools
import itertools
import random

import pytest
import torch

from float32_error import assert_float32_error  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoConfig, ElmoModel, ElmoState, ElmoTokenizer
from spacy_elmo.characters import LEXICON_SPECIALS

# every kernel besides the definition, on every device it runs on (CUDA ones run where CUDA exists);
# "packed" on CPU runs a layer's two directions in turn or at the same time on two threads, and
# its input products with prepacked weights (small batches) or plain ones (large batches)
KERNELS = [("cpu", "packed"), ("cpu", "packed-parallel"), ("cpu", "packed-plain_input"), ("cpu", "fused")]
if torch.cuda.is_available():
    KERNELS += [("cuda", "packed"), ("cuda", "fused"), ("cuda", "cuda_graphs")]
TRAINING = ["fused"]  # kernels with autograd
LENGTHS = [5, 0, 1, 9, 3, 1]  # ragged, with empty and one-token rows
# the longest float32 reduction that a kernel orders differently from eager: an LSTM weight's or
# bias's gradient, a sum over batch × time rows (the whole model adds two boundary tokens)
TERMS = len(LENGTHS) * (max(LENGTHS) + 2)


# an ELMoForManyLangs-style model: a character lexicon and a word embedding (AllenNLP's cell: no
# forget bias added at run time)
LEXICON = {**LEXICON_SPECIALS, **{c: 7 + i for i, c in enumerate("abcdef")}}  # "g" is unknown
WORDS = {"<bos>": 0, "<eos>": 1, "<oov>": 2, **{w: 3 + i for i, w in enumerate(["a", "ab", "bad", "cafe", "deed"])}}
EFML = {"char_vocab_size": len(LEXICON) + 1, "word_vocab_size": len(WORDS), "word_embedding_dim": 5, "forget_bias": 0.0}


def _config(
    skip: bool, cell_projection: bool, cnn_projection: bool, clip: bool, efml: bool = False, **extra
) -> ElmoConfig:
    filters = [[1, 4], [2, 4], [3, 8]]  # 16 filters
    extra = {**EFML, **extra} if efml else extra
    return ElmoConfig(
        lstm_dim=24,
        projection_dim=(12 if cell_projection else 24) if cnn_projection else 16,
        n_highway=1,
        filters=filters,
        char_embedding_dim=4,
        use_skip_connections=skip,
        cell_clip=0.5 if clip else None,
        proj_clip=0.4 if clip else None,
        **extra,
    )


SPACE = [
    pytest.param(
        skip,
        cell_proj,
        cnn_proj,
        clip,
        False,
        id=f"skip{int(skip)}-cellproj{int(cell_proj)}-cnnproj{int(cnn_proj)}-clip{int(clip)}",
    )
    for skip, cell_proj, cnn_proj, clip in itertools.product([True, False], repeat=4)
    # without a CNN projection the token vectors are 16-wide, so the LSTM projects 24 → 16
    if cnn_proj or cell_proj
] + [  # a character lexicon and a word embedding, at both ends of the space
    pytest.param(True, True, True, True, True, id="skip1-cellproj1-cnnproj1-clip1-efml"),
    pytest.param(False, True, False, False, True, id="skip0-cellproj1-cnnproj0-clip0-efml"),
]


def _model(config: ElmoConfig, seed: int = 0) -> ElmoModel:
    torch.manual_seed(seed)
    # (a copy: a model records its precision in its config, and quantize_int8 sets it)
    model = ElmoModel(copy.deepcopy(config)).eval()
    with torch.no_grad():  # larger weights than the init, so gates saturate and clipping bites
        for layer in model.encoder.layers:
            for p in (layer.input_weight, layer.hidden_weight, layer.proj_weight):
                if p is not None:
                    p.uniform_(-0.6, 0.6)
            layer.bias.uniform_(-1, 1)
    return model


def _inputs(batch: int, seed: int, config: ElmoConfig):
    """(character ids, mask, word ids or None) of random words over "abcdefg" (with the lexicon
    model's words among them, and unknown characters and words)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefg") for _ in range(rng.randint(1, 6))) for _ in range(20)] + list(WORDS)[3:]
    sentences = [[rng.choice(words) for _ in range(n)] for n in LENGTHS[:batch]]
    tokenizer = (
        ElmoTokenizer(config.max_characters_per_token, char_vocab=LEXICON, word_vocab=WORDS)
        if config.char_vocab_size
        else ElmoTokenizer(config.max_characters_per_token)
    )
    encoded = tokenizer(sentences)
    return encoded["input_ids"], encoded["attention_mask"], encoded.get("input_word_ids")


def _state(config: ElmoConfig, batch: int, seed: int) -> ElmoState:
    g = torch.Generator().manual_seed(seed)
    return ElmoState(
        torch.rand(config.num_layers, 2, batch, config.projection_dim, generator=g) - 0.5,
        torch.rand(config.num_layers, 2, batch, config.lstm_dim, generator=g) - 0.5,
    )


def _run(model, implementation, ids, mask, **kwargs):
    model.config.lstm_implementation = implementation
    try:
        with torch.no_grad():
            return model(ids, mask, **kwargs)
    finally:
        model.config.lstm_implementation = "auto"


@pytest.fixture
def directions(monkeypatch):
    """Sets how the packed kernel runs a layer's two directions ("in_turn" or "parallel": on the
    pool's two threads, with 2 intra-op threads on the caller) and counts the parallel runs."""
    from spacy_elmo.kernels import packed_lstm

    runs = []
    real_run = packed_lstm._DirectionPool.run

    def counted(pool, fn, n):
        ran = real_run(pool, fn, n)
        runs.append(ran)
        return ran

    monkeypatch.setattr(packed_lstm._DirectionPool, "run", counted)
    threads = torch.get_num_threads()

    def choose(mode):
        monkeypatch.setattr(packed_lstm, "PARALLEL_DIRECTIONS", mode == "parallel")
        torch.set_num_threads(2 if mode == "parallel" else threads)
        runs.clear()
        return runs

    yield choose
    torch.set_num_threads(threads)


def _forward_inputs(config: ElmoConfig, device: str) -> dict:
    """The forward test's inputs: tokens for the bare biLSTM (with an all-padding row and one-token
    rows), character ids for the whole model (boundaries, char CNN), and an initial state for each."""
    g = torch.Generator().manual_seed(4)
    lstm_mask = torch.arange(max(LENGTHS)).unsqueeze(0) < torch.tensor(LENGTHS).unsqueeze(1)
    tokens = torch.randn(len(LENGTHS), max(LENGTHS), config.projection_dim, generator=g) * lstm_mask.unsqueeze(-1)
    ids, mask, words = _inputs(len(LENGTHS), seed=1, config=config)
    lstm_state, model_state = (_state(config, len(LENGTHS), seed=seed) for seed in (2, 3))
    return {
        "tokens": tokens.to(device),
        "lstm_mask": lstm_mask.to(device),
        "ids": ids.to(device),
        "mask": mask.to(device),
        "words": None if words is None else words.to(device),
        "lstm_state": ElmoState(*(t.to(device) for t in lstm_state)),
        "model_state": ElmoState(*(t.to(device) for t in model_state)),
    }


def _forward(model, implementation: str, inputs: dict, initial: bool, return_state: bool) -> dict:
    """{name: tensor} of the bare biLSTM's and the whole model's outputs (and final states with
    `return_state`), from the inputs' initial states or none, in the model's dtype."""
    dtype = next(model.parameters()).dtype

    def cast(state):
        return ElmoState(state.h.to(dtype), state.c.to(dtype)) if initial else None

    model.config.lstm_implementation = implementation
    try:
        layers, final = model.encoder(
            inputs["tokens"].to(dtype), inputs["lstm_mask"], cast(inputs["lstm_state"]), return_state
        )
        out = model(
            inputs["ids"],
            inputs["mask"],
            inputs["words"],
            initial_state=cast(inputs["model_state"]),
            return_state=return_state,
        )
    finally:
        model.config.lstm_implementation = "auto"
    results = {f"lstm.layer{k}": layer for k, layer in enumerate(layers)}
    results.update({f"model.layer{k}": layer for k, layer in enumerate(out.hidden_states)})
    for part, state in (("lstm", final), ("model", out.state)):
        if state is not None:  # a final state only when asked for: the names differ otherwise
            results.update({f"{part}.h": state.h, f"{part}.c": state.c})
    return results


CASES = [(initial, return_state) for initial in (False, True) for return_state in (False, True)]


@functools.cache
def _forward_definition(skip, cell_proj, cnn_proj, clip, efml, device) -> dict:
    """The definition's results on `_forward_inputs` for each case, exact (float64) and eager
    (float32): computed once per configuration and device, shared by every kernel's test."""
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    inputs = _forward_inputs(config, device)
    results = {}
    for precision, dtype in (("exact", torch.float64), ("eager", torch.float32)):
        model = _model(config).to(device, dtype)
        model.disable_token_cache()
        with torch.no_grad():
            for case in CASES:
                results[precision, case] = _forward(model, "eager", inputs, *case)
    return results


@pytest.mark.parametrize("device,implementation", KERNELS)
@pytest.mark.parametrize("skip,cell_proj,cnn_proj,clip,efml", SPACE)
def test_kernels_equal_eager_over_the_configuration_space(
    skip, cell_proj, cnn_proj, clip, efml, device, implementation, directions, monkeypatch
):
    """The bare biLSTM (with an all-padding row and one-token rows) and the whole model (boundaries,
    char CNN), with and without an initial state, with the final state or not, under no_grad and
    under inference_mode: every output within float32 rounding of the definition."""
    parallel = implementation.endswith("-parallel")
    parallel_runs = directions("parallel" if parallel else "in_turn")
    if implementation.endswith("-plain_input"):
        from spacy_elmo.kernels import packed_lstm

        monkeypatch.setattr(packed_lstm, "PREPACKED_INPUT_MAX_ROWS", 0)
    implementation = implementation.split("-")[0]
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    assert (config.projection_dim != config.lstm_dim) == cell_proj
    definition = _forward_definition(skip, cell_proj, cnn_proj, clip, efml, device)
    model = _model(config).to(device)
    model.disable_token_cache()
    assert model.encoder.layers[0].has_projection == cell_proj
    inputs = _forward_inputs(config, device)
    for case in CASES:
        with torch.no_grad():
            got = _forward(model, implementation, inputs, *case)
        exact, eager = definition["exact", case], definition["eager", case]
        assert_float32_error(exact, eager, got, terms=TERMS, what=f"{implementation}, (initial, return_state) = {case}")
        if case == (True, True):  # the empty row keeps its initial state
            assert torch.equal(got["lstm.h"][:, :, 1], inputs["lstm_state"].h[:, :, 1])
    # under inference_mode too (its tensors can only be written in inference mode, on any thread)
    with torch.inference_mode():
        got = _forward(model, implementation, inputs, False, True)
    assert_float32_error(
        definition["exact", (False, True)], definition["eager", (False, True)], got, terms=TERMS, what="inference_mode"
    )
    # the parallel variant ran every layer on the pool (and the in-turn one never did)
    if device == "cpu":
        expected = (
            config.num_layers * 10
        )  # (bare biLSTM + model) x (2 initial states x 2 return_state + inference_mode)
        assert parallel_runs == ([True] * expected if parallel else [])


@pytest.mark.parametrize("implementation", ["packed", "fused"])
def test_the_tolerance_rejects_a_kernel_whose_input_gate_is_100_eps_off(implementation):
    """The bound above is tight enough to mean something: the same kernel with every layer's input
    gate weights and bias off by a relative 100 float32 ε (1.2e-5) fails it in every case, though its
    outputs are off by only 27–41× eager float32's own error (measured), so a factor of 100 would
    pass it. The unchanged kernel passes on the same inputs."""
    from float32_error import EPS

    args = SPACE[0].values  # skip, cell and CNN projections, clipping: every part of the cell in use
    config = _config(*args)
    definition = _forward_definition(*args, "cpu")
    inputs = _forward_inputs(config, "cpu")
    model = _model(config)
    model.disable_token_cache()

    def check(case):
        with torch.no_grad():
            got = _forward(model, implementation, inputs, *case)
        assert_float32_error(definition["exact", case], definition["eager", case], got, terms=TERMS, what=str(case))

    check(CASES[-1])
    input_gate = slice(0, config.lstm_dim)  # TF gate order i, j, f, o
    with torch.no_grad():
        for layer in model.encoder.layers:
            for p in (layer.input_weight, layer.hidden_weight, layer.bias):
                p[..., input_gate] *= 1 + 100 * EPS
    for case in CASES:
        with pytest.raises(AssertionError, match="float32 error beyond"):
            check(case)


def _grads(module, inputs: dict) -> dict:
    grads = {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}
    grads.update({name: t.grad.clone() for name, t in inputs.items() if t is not None})
    return grads


def _weighted_sum(tensors, seed: int) -> torch.Tensor:
    """A loss whose gradient differs at every output element."""
    g = torch.Generator().manual_seed(seed)
    return sum((t * (torch.rand(t.shape, generator=g) - 0.5)).sum() for t in tensors)


def _lstm_grads(model, tokens, mask, state, return_state: bool, seed: int) -> dict:
    """Gradients of a weighted sum of the bare biLSTM's outputs (and final state) w.r.t. every
    parameter, the inputs and the initial state, in the model's dtype."""
    dtype = next(model.parameters()).dtype
    model.zero_grad(set_to_none=True)
    x = tokens.to(dtype, copy=True).requires_grad_(True)
    if state is not None:
        state = ElmoState(
            state.h.to(dtype, copy=True).requires_grad_(True), state.c.to(dtype, copy=True).requires_grad_(True)
        )
    layers, final = model.encoder(x, mask, state, return_state)
    outputs = list(layers) + (list(final) if return_state else [])
    _weighted_sum([o.double() for o in outputs], seed).backward()
    return _grads(model.encoder, {"tokens": x, "h0": state and state.h, "c0": state and state.c})


def _model_grads(model, ids, mask, words, state, return_state: bool, seed: int) -> dict:
    """The same through the whole model (char CNN, boundaries): every parameter's gradient."""
    dtype = next(model.parameters()).dtype
    model.zero_grad(set_to_none=True)
    if state is not None:
        state = ElmoState(
            state.h.to(dtype, copy=True).requires_grad_(True), state.c.to(dtype, copy=True).requires_grad_(True)
        )
    out = model(ids, mask, words, initial_state=state, return_state=return_state)
    outputs = list(out.hidden_states) + (list(out.state) if return_state else [])
    _weighted_sum([o.double() for o in outputs], seed).backward()
    return _grads(model, {"h0": state and state.h, "c0": state and state.c})


@pytest.mark.parametrize("implementation", TRAINING)
@pytest.mark.parametrize("skip,cell_proj,cnn_proj,clip,efml", SPACE)
def test_training_kernels_give_eagers_gradients_over_the_configuration_space(
    skip, cell_proj, cnn_proj, clip, efml, implementation
):
    """Every parameter's, the input's and the initial state's gradient, with ragged rows (0 and 1
    tokens), with and without an initial state and with the final state in the loss or not: within
    float32 rounding of the definition (eager in float64), as eager in float32 is."""
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    exact = _model(config).train().double()
    model = _model(config).train()
    for m in (exact, model):
        m.encoder.dropout.p = 0.0
    lstm_mask = torch.arange(max(LENGTHS)).unsqueeze(0) < torch.tensor(LENGTHS).unsqueeze(1)
    tokens = torch.randn(len(LENGTHS), max(LENGTHS), config.projection_dim) * lstm_mask.unsqueeze(-1)
    ids, mask, words = _inputs(len(LENGTHS), seed=1, config=config)
    for with_state in (False, True):
        for return_state in (False, True):
            state = _state(config, len(LENGTHS), seed=2) if with_state else None
            results = {}
            for name, m, impl in (
                ("exact", exact, "eager"),
                ("eager", model, "eager"),
                ("kernel", model, implementation),
            ):
                m.config.lstm_implementation = impl
                try:
                    results[name] = {
                        "lstm": _lstm_grads(m, tokens, lstm_mask, state, return_state, seed=3),
                        "model": _model_grads(m, ids, mask, words, state, return_state, seed=5),
                    }
                finally:
                    m.config.lstm_implementation = "auto"
            every = (
                {name for name, _ in model.encoder.named_parameters()}
                | {"tokens"}
                | ({"h0", "c0"} if with_state else set())
            )
            assert every <= set(results["kernel"]["lstm"])
            assert_float32_error(
                results["exact"],
                results["eager"],
                results["kernel"],
                terms=TERMS,
                what=f"{implementation} gradients, initial state {with_state}, final state in the loss {return_state}",
            )


@pytest.mark.parametrize("chunk_rows", [1, 12])
def test_fused_backward_in_chunks_of_steps(chunk_rows, monkeypatch):
    """The backward's per-chunk precomputation: chunks of 1 and of 2 steps (9 steps: a short last
    chunk) give the single-chunk gradients of the configuration-space test."""
    from spacy_elmo.kernels import fused_lstm

    monkeypatch.setattr(fused_lstm, "CHUNK_ROWS", chunk_rows)
    test_training_kernels_give_eagers_gradients_over_the_configuration_space(True, True, True, True, False, "fused")


@pytest.mark.parametrize("implementation", TRAINING)
def test_training_kernels_apply_the_same_dropout(implementation):
    """Dropout stays outside the kernels: the same RNG stream gives the same masks, outputs and
    gradients (within float32 rounding of eager in float64, which draws the same masks: other masks
    would differ by far more)."""
    config = _config(True, True, True, True, dropout=0.3)
    ids, mask, _ = _inputs(len(LENGTHS), seed=7, config=config)
    results = {}
    for name, dtype, impl in (
        ("exact", torch.float64, "eager"),
        ("eager", torch.float32, "eager"),
        ("kernel", torch.float32, implementation),
    ):
        model = _model(config).train().to(dtype)
        model.config.lstm_implementation = impl
        torch.manual_seed(11)
        out = model(ids, mask)
        _weighted_sum(out.hidden_states, seed=8).backward()
        results[name] = {"outputs": [h.detach() for h in out.hidden_states], "gradients": _grads(model, {})}
    assert_float32_error(results["exact"], results["eager"], results["kernel"], terms=TERMS, what=implementation)


def test_fused_backward_runs_once():
    """The fused kernel turns its saved gate buffer into the gradients: a second backward through the
    same graph is refused instead of computing garbage."""
    config = _config(True, True, True, True)
    model = _model(config).train()
    model.config.lstm_implementation = "fused"
    tokens = torch.randn(2, 3, config.projection_dim)
    layers, _ = model.encoder(tokens, torch.ones(2, 3, dtype=torch.bool))
    loss = layers[-1].sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="once"):
        loss.backward()


def test_auto_picks_an_inference_kernel_only_when_nothing_needs_a_gradient_in_eval_mode_else_fused():
    config = _config(True, True, True, True)
    model = _model(config)
    tokens = torch.randn(2, 3, config.projection_dim)
    bilstm = model.encoder
    with torch.no_grad():
        assert bilstm.implementation(tokens) == "packed"
    assert bilstm.implementation(tokens) == "fused"  # parameters need gradients
    model.requires_grad_(False)
    assert bilstm.implementation(tokens) == "packed"
    model.encoder.layers[1].hidden_weight.requires_grad_(True)  # one parameter deep in the stack
    assert bilstm.implementation(tokens) == "fused"
    model.requires_grad_(False)
    assert bilstm.implementation(tokens.requires_grad_(True)) == "fused"
    state = _state(config, 2, 0)
    assert bilstm.implementation(tokens.detach(), ElmoState(state.h.requires_grad_(True), state.c)) == "fused"
    model.train()  # dropout is applied in training, with or without gradients, outside the kernels
    with torch.no_grad():
        assert bilstm.implementation(tokens.detach()) == "fused"
    with torch.autocast("cpu", dtype=torch.bfloat16):  # fused takes autocast's bf16 products on a CPU
        assert bilstm.implementation(tokens.detach()) == "fused"
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # packed is the CPU's bf16 kernel too
        assert bilstm.implementation(tokens.detach()) == "packed"
    if torch.cuda.is_available():  # on CUDA the graphed loop, in every precision and under autocast
        model.cuda()
        with torch.no_grad():
            assert bilstm.implementation(tokens.detach().cuda()) == "cuda_graphs"
            with torch.autocast("cuda", dtype=torch.bfloat16):
                assert bilstm.implementation(tokens.detach().cuda()) == "cuda_graphs"
        model.cpu()
    model.config.lstm_implementation = "packed"
    model.encoder.layers[0].input_weight.requires_grad_(True)
    with pytest.raises(RuntimeError, match="packed"):
        bilstm.implementation(tokens.detach())


def test_dropout_applies_in_training_without_gradients():
    config = _config(True, True, True, False, dropout=0.5)
    model = _model(config)
    ids, mask, _ = _inputs(3, seed=4, config=config)
    with torch.no_grad():
        model.eval()
        a, b = model(ids, mask).last_hidden_state, model(ids, mask).last_hidden_state
        assert torch.equal(a, b)
        model.train()
        c = model(ids, mask).last_hidden_state
    assert not torch.allclose(a, c)


FREEZE_PATTERNS = {
    "none": lambda m: None,
    "char_encoder": lambda m: m.token_encoder.requires_grad_(False),
    "char_encoder+layer0": lambda m: (m.token_encoder.requires_grad_(False), m.encoder.layers[0].requires_grad_(False)),
}


@pytest.mark.parametrize("implementation", ["eager"] + TRAINING)
@pytest.mark.parametrize("pattern", sorted(FREEZE_PATTERNS))
def test_freeze_patterns_train_with_the_full_models_gradients(pattern, implementation):
    """Gradual unfreezing: any frozen prefix trains, and the trainable parameters get the gradients
    they get in the fully trainable model (computed by eager: within float32 rounding of it in float64)."""
    config = _config(True, True, True, True)
    ids, mask, _ = _inputs(len(LENGTHS), seed=5, config=config)

    def loss(model):
        return sum((h * torch.linspace(-1, 1, h.shape[-1])).sum() for h in model(ids, mask).hidden_states[1:])

    reference = {}
    for precision, dtype in (("exact", torch.float64), ("eager", torch.float32)):
        full = _model(config).train().to(dtype)
        full.encoder.dropout.p = 0.0
        full.config.lstm_implementation = "eager"
        loss(full).backward()
        reference[precision] = {n: p.grad.clone() for n, p in full.named_parameters() if p.grad is not None}

    model = _model(config).train()
    model.encoder.dropout.p = 0.0
    model.config.lstm_implementation = implementation
    FREEZE_PATTERNS[pattern](model)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss(model).backward()
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all(model.get_parameter(n).grad is not None for n in trained)
    assert_float32_error(
        *({n: grads[n] for n in trained} for grads in (reference["exact"], reference["eager"])),
        {n: model.get_parameter(n).grad for n in trained},
        terms=TERMS,
        what=f"{implementation}, frozen {pattern}",
    )
    optimizer.step()
    for name, p in model.named_parameters():
        changed = not torch.equal(p.detach(), before[name])
        assert changed == (name in trained and bool(p.grad.abs().sum() > 0)), name


@pytest.mark.parametrize("capability", ["onednn", "version", "autocast_dtype", "per_thread_threads"])
def test_private_torch_api_fallbacks_are_exact(capability, monkeypatch, caplog, directions):
    """Each private torch API sits behind a capability check; its fallback gives the same result
    and is logged once. Fallbacks that change no fp32 operation give the same bits; oneDNN's (MKL
    products), the directions pool's (the intra-op thread count of each direction's products) and
    `Tensor._version`'s (no token cache: the char CNN's products over every word, not the distinct
    ones, whose sums oneDNN may order by the product's row count: torch 2.4's does here) give fp32 within float32
    rounding of the definition, as the capability does. bf16 autocast uses
    neither oneDNN nor the pool, and int8's products are exact integer sums on either thread count
    (all of them int8 here: `products.MIN_INT8_INPUTS` at 1): the same bits."""
    from spacy_elmo.hf.quantization import quantize_int8
    from spacy_elmo.kernels import capabilities, packed_lstm, products

    config = _config(True, True, True, True)
    ids, mask, _ = _inputs(len(LENGTHS), seed=6, config=config)
    monkeypatch.setattr(packed_lstm, "PREPACKED_MIN_ROWS", 1)
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)
    directions("parallel")  # two intra-op threads: the directions run on the pool unless its check fails

    def outputs():
        model = _model(config)
        results = [_run(model, "packed", ids, mask, return_state=True).hidden_states]
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            results.append(model(ids, mask).hidden_states)
        quantize_int8(model)
        results.append(_run(model, "packed", ids, mask).hidden_states)
        return results

    expected = outputs()
    monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {capability})
    monkeypatch.setattr(capabilities, "_logged", set())
    with caplog.at_level("INFO", logger="spacy_elmo.kernels"):
        got = outputs()
    assert [r.getMessage() for r in caplog.records if capability in r.getMessage()]
    # fp32, and int8 where this CPU computes it in fp32 (`capabilities.int8_available`)
    fp32 = [0] if capabilities.int8_available() else [0, 2]
    exact = _run(_model(config).double(), "eager", ids, mask).hidden_states
    for index in range(3):
        if index in fp32 and capability in ("onednn", "per_thread_threads", "version"):
            assert_float32_error(exact, expected[index], got[index], terms=TERMS, what=f"fp32 without {capability}")
        else:  # bf16 autocast, int8
            assert all(map(torch.equal, expected[index], got[index]))


def test_no_import_cycles_and_kernels_import_nothing_from_the_model():
    """Imports point one way: kernels ← modeling ← everything else (walks every module's imports)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "spacy_elmo"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # `from . import kernels` imports the submodule; `from .x import Y` the module x
                targets = [(target, f"{target}.{alias.name}") for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            edges.update(t for t in targets)
    modules = set(graph)

    def resolve(target):
        if isinstance(target, tuple):
            return target[1] if target[1] in modules else target[0]
        return target

    graph = {m: {resolve(t) for t in ts} for m, ts in graph.items()}
    graph = {m: {t for t in ts if t in modules and t != m} for m, ts in graph.items()}
    for module, targets in graph.items():
        if module.startswith("spacy_elmo.kernels"):
            assert all(t.startswith("spacy_elmo.kernels") for t in targets), (module, targets)
    assert not any(t.startswith("spacy_elmo.formats.legacy") for t in graph["spacy_elmo.hf.modeling_elmo"])

    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for target in graph[module]:
            if state.get(target) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path + [module, target]))
            if target not in state:
                visit(target, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def _pool_in_child():
    from spacy_elmo.kernels import packed_lstm

    inherited = dict(packed_lstm._POOLS)
    pool = packed_lstm._direction_pool()
    ran = []
    done = pool.run(ran.append, 2)
    return inherited, done, sorted(ran)


def test_directions_pool_survives_fork(directions):
    """A child forked after the parent used the directions pool (e.g. nlp.pipe(n_process=...)) makes
    pools of its own instead of waiting forever on the parent's threads, which it does not have.
    (The child runs no torch op here: libgomp itself can hang in a child forked after the parent
    ran a multi-threaded region, whatever this package does.)"""
    import multiprocessing

    runs = directions("parallel")
    config = _config(True, True, True, True)
    model = _model(config)
    ids, mask, _ = _inputs(len(LENGTHS), seed=7, config=config)
    with torch.inference_mode():
        model(ids, mask)
    assert runs and all(runs)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        inherited, done, ran = pool.apply_async(_pool_in_child).get(timeout=60)
    assert inherited == {} and done and ran == [0, 1]


def test_directions_pool_hands_back_errors_and_keeps_working(directions):
    from spacy_elmo.kernels import packed_lstm

    directions("parallel")
    pool = packed_lstm._direction_pool()
    assert pool is not None and pool.counts == [1, 1]

    def fail(d):
        raise ValueError(f"direction {d}")

    with pytest.raises(ValueError, match="direction"):
        pool.run(fail, 2)
    ran = []
    assert pool.run(ran.append, 2) and sorted(ran) == [0, 1]
    # the caller's grad mode reaches the workers (inference tensors can only be written in it)
    modes = []
    with torch.inference_mode():
        pool.run(lambda d: modes.append(torch.is_inference_mode_enabled()), 2)
    pool.run(lambda d: modes.append(torch.is_inference_mode_enabled()), 2)
    assert modes == [True, True, False, False]
