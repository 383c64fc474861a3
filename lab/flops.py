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


__all__ = ["char_cnn_flops", "token_encoder_flops", "lstm_flops_per_token", "forward_flops_per_token", "weight_bytes"]
