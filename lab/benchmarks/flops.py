"""Floating-point work of one ELMo forward pass, counted from an `ElmoConfig`.

Counted: the matrix products (2 FLOPs per multiply-add) of the char CNN, the highway layers, the
token projection, and per LSTM layer and direction the gate products (input and recurrent) and the
cell projection.  Not counted: elementwise work (activations, gates, clipping, max-pool), which is
O(width) per token rather than O(width²).
"""

from __future__ import annotations


def char_cnn_flops(config) -> float:
    """Convolutions over all `max_characters_per_token` character positions."""
    columns, dim = config.max_characters_per_token, config.char_embedding_dim
    return float(sum(2 * max(columns - width + 1, 0) * width * dim * num for width, num in config.filters))


def token_encoder_flops(config) -> float:
    """Char CNN + highway + projection for one token (the context-independent x_k)."""
    n_filters = sum(num for _, num in config.filters)
    highway = config.n_highway * 2 * (2.0 * n_filters * n_filters)  # transform and carry gate
    projection = 2.0 * n_filters * config.projection_dim if n_filters != config.projection_dim else 0.0
    return char_cnn_flops(config) + highway + projection


def lstm_flops_per_token(config) -> float:
    """All LSTM layers, both directions: input and recurrent gate products and the cell projection."""
    hidden, proj = config.lstm_dim, config.projection_dim
    gates = 2.0 * proj * 4 * hidden * 2  # x·W_x and h·W_h (layer inputs and recurrent h are proj wide)
    projection = 2.0 * hidden * proj if hidden != proj else 0.0
    return config.num_layers * 2 * (gates + projection)


def lstm_input_flops_per_token(config) -> float:
    """The LSTM's input products alone (x·W_x, every layer and direction): at batch 1 a sentence's once-only work."""
    return config.num_layers * 2 * 2.0 * config.projection_dim * 4 * config.lstm_dim


def forward_flops_per_token(config) -> float:
    """FLOPs of the biLM forward pass per token position (sentence boundaries are positions too)."""
    return token_encoder_flops(config) + lstm_flops_per_token(config)


def weight_bytes(config, bytes_per_value: int = 4) -> dict:
    """Bytes of weights read per time step (recurrent matrices) and once per batch (everything else)."""
    hidden, proj = config.lstm_dim, config.projection_dim
    n_filters = sum(num for _, num in config.filters)
    recurrent = config.num_layers * 2 * (proj * 4 * hidden + (hidden * proj if hidden != proj else 0))
    inputs = config.num_layers * 2 * proj * 4 * hidden
    encoder = (
        sum(width * config.char_embedding_dim * num for width, num in config.filters)
        + config.n_highway * 2 * n_filters * n_filters
        + (n_filters * proj if n_filters != proj else 0)
    )
    return {
        "per_step": recurrent * bytes_per_value,
        "per_batch": (inputs + encoder) * bytes_per_value,
    }


VALUE_BYTES = {"fp32": 4, "bf16": 2, "int8": 1}
INT8_COLUMN_BYTES = 8  # per output column of an int8 weight: its fp32 scale and the packed form's int32 offset


def _weight(rows: int, columns: int, precision: str) -> list[tuple[int, int]]:
    """A [rows, columns] weight read in `precision`, as (rows, bytes per row) buffers: the values, and int8's
    per-column extras as one more row."""
    weight = [(rows, columns * VALUE_BYTES[precision])]
    return weight + ([(1, columns * INT8_COLUMN_BYTES)] if precision == "int8" else [])


def streamed_weights(config, products: dict) -> dict:
    """The weights the biLM reads at batch 1, in the precisions its products were bound to.

    `products`: {"lstm": {weight name: {"one_row": precision, "rows": precision}}, "linears": [(K, N, precision)],
    "char_cnn": precision} (a model's bound answers; fp32 where absent). Returns `per_step`: per layer, per
    direction, the (rows, bytes per row) buffers a one-row step reads (the recurrent weight and the cell
    projection); `bytes_per_step`, their sum; `bytes_per_batch`: what a sentence reads once (the LSTM's input
    weights, the highway and projection layers, the char CNN's product)."""
    hidden, proj = config.lstm_dim, config.projection_dim
    lstm = products.get("lstm") or {}

    def precision(name: str, which: str) -> str:
        return (lstm.get(name) or {}).get(which, "fp32")

    direction = _weight(proj, 4 * hidden, precision("hidden_weight", "one_row"))
    if hidden != proj:
        direction += _weight(hidden, proj, precision("proj_weight", "one_row"))
    per_step = [[list(direction), list(direction)] for _ in range(config.num_layers)]
    once = config.num_layers * 2 * [_weight(proj, 4 * hidden, precision("input_weight", "rows"))]
    once += [_weight(k, n, p) for k, n, p in products.get("linears") or []]
    widest = max(width for width, _ in config.filters)
    n_filters = sum(num for _, num in config.filters)
    once.append(_weight(widest * config.char_embedding_dim, n_filters, products.get("char_cnn") or "fp32"))
    return {
        "per_step": per_step,
        "bytes_per_step": sum(r * b for layer in per_step for d in layer for r, b in d),
        "bytes_per_batch": sum(r * b for weight in once for r, b in weight),
    }


__all__ = [
    "char_cnn_flops",
    "token_encoder_flops",
    "lstm_flops_per_token",
    "lstm_input_flops_per_token",
    "forward_flops_per_token",
    "weight_bytes",
    "streamed_weights",
]
