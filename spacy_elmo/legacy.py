"""Read and write the original ELMo weight format: options.json + lm_weights.hdf5 (bilm-tf / AllenNLP).

Every problem is reported as a `LegacyFormatError` naming the file, the dataset and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy
import torch

from .configuration_elmo import ElmoConfig, read_json_object
from .modeling_elmo import ElmoModel


class LegacyFormatError(ValueError):
    """A legacy options.json / hdf5 file is missing, unreadable, or does not match the expected layout."""


def _rnn_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def read_options(options_file: str | Path) -> dict:
    """Parses options.json with errors that name the file and field."""
    path = Path(options_file)
    if not path.is_file():
        raise LegacyFormatError(f"options file not found: {path}")
    options = read_json_object(path, LegacyFormatError)
    for section, fields in (("char_cnn", ("embedding", "filters")), ("lstm", ("dim", "projection_dim"))):
        if not isinstance(options.get(section), dict):
            raise LegacyFormatError(f"{path}: missing section '{section}' (this loader reads character-based biLMs)")
        for field in fields:
            if field not in options[section]:
                raise LegacyFormatError(f"{path}: missing field '{section}.{field}'")
    activation = options["char_cnn"].get("activation", "relu")
    if activation not in ("relu", "tanh"):
        raise LegacyFormatError(f"{path}: field 'char_cnn.activation' is {activation!r}; expected 'relu' or 'tanh'")
    n_chars = options["char_cnn"].get("n_characters", 262)
    if n_chars not in (261, 262):
        raise LegacyFormatError(f"{path}: field 'char_cnn.n_characters' is {n_chars}; expected 261 or 262")
    return options


def config_from_options(options_file: str | Path, **overrides) -> ElmoConfig:
    """ElmoConfig for a legacy options.json."""
    path = Path(options_file)
    options = read_options(path)
    try:
        return ElmoConfig.from_options(options, **overrides)
    except (KeyError, TypeError, ValueError) as err:
        raise LegacyFormatError(f"{path}: invalid options ({err})") from None


class _Reader:
    """Reads datasets from an open hdf5 file, checking presence, shape and finiteness."""

    def __init__(self, handle: h5py.File, path: Path):
        self.handle, self.path = handle, path

    def has(self, name: str) -> bool:
        return name in self.handle

    def __call__(self, name: str, shape: tuple[int, ...]) -> numpy.ndarray:
        if name not in self.handle:
            raise LegacyFormatError(f"{self.path}: missing dataset '{name}' (expected shape {shape})")
        dataset = self.handle[name]
        if not isinstance(dataset, h5py.Dataset):
            raise LegacyFormatError(f"{self.path}: '{name}' is a group, expected a dataset of shape {shape}")
        if tuple(dataset.shape) != tuple(shape):
            raise LegacyFormatError(
                f"{self.path}: dataset '{name}' has shape {tuple(dataset.shape)}, expected {tuple(shape)} "
                "(do options.json and the weights belong together?)"
            )
        try:
            value = numpy.asarray(dataset[...], dtype=numpy.float32)
        except (OSError, ValueError, TypeError) as err:
            raise LegacyFormatError(f"{self.path}: cannot read dataset '{name}' ({err}); the file may be truncated") from None
        if not numpy.isfinite(value).all():
            bad = int((~numpy.isfinite(value)).sum())
            raise LegacyFormatError(f"{self.path}: dataset '{name}' contains {bad} NaN/inf values")
        return value


def _t(array: numpy.ndarray) -> torch.Tensor:
    return torch.from_numpy(numpy.ascontiguousarray(array))


def read_legacy_state_dict(config: ElmoConfig, weights_file: str | Path) -> dict[str, torch.Tensor]:
    """The `ElmoModel` state dict from a bilm-tf lm_weights.hdf5, checked against `config`."""
    path = Path(weights_file)
    if not path.is_file():
        raise LegacyFormatError(f"weights file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise LegacyFormatError(f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}") from None
    state: dict[str, torch.Tensor] = {}
    with handle:
        read = _Reader(handle, path)
        dim, n_filters, proj, hidden = (
            config.char_embedding_dim, config.n_filters, config.projection_dim, config.lstm_dim,
        )
        # the file has 261 character rows (ids 0..260); a zero row is prepended for padding id 0
        embed = read("char_embed", (261, dim))
        state["token_encoder.char_embedding.weight"] = _t(numpy.concatenate([numpy.zeros((1, dim), numpy.float32), embed]))
        for i, (width, num) in enumerate(config.filters):
            w = read(f"CNN/W_cnn_{i}", (1, width, dim, num))
            # TF conv2d kernel (1, width, in, out) → torch Conv1d (out, in, width)
            state[f"token_encoder.convolutions.{i}.weight"] = _t(w[0].transpose(2, 1, 0))
            state[f"token_encoder.convolutions.{i}.bias"] = _t(read(f"CNN/b_cnn_{i}", (num,)))
        for k in range(config.n_highway):
            for tf_name, ours in (("carry", "gate"), ("transform", "transform")):
                state[f"token_encoder.highways.{k}.{ours}.weight"] = _t(read(f"CNN_high_{k}/W_{tf_name}", (n_filters, n_filters)).T)
                state[f"token_encoder.highways.{k}.{ours}.bias"] = _t(read(f"CNN_high_{k}/b_{tf_name}", (n_filters,)))
        if n_filters != proj:
            state["token_encoder.projection.weight"] = _t(read("CNN_proj/W_proj", (n_filters, proj)).T)
            state["token_encoder.projection.bias"] = _t(read("CNN_proj/b_proj", (proj,)))
        for layer in range(config.num_layers):
            per_dir = {"input_weight": [], "hidden_weight": [], "bias": [], "proj_weight": []}
            for direction in (0, 1):
                prefix = _rnn_prefix(direction, layer)
                w = read(f"{prefix}/W_0", (proj + proj, 4 * hidden))
                per_dir["input_weight"].append(w[:proj])
                per_dir["hidden_weight"].append(w[proj:])
                per_dir["bias"].append(read(f"{prefix}/B", (4 * hidden,)))
                if proj != hidden:
                    per_dir["proj_weight"].append(read(f"{prefix}/W_P_0", (hidden, proj)))
            for name, values in per_dir.items():
                if values:
                    state[f"encoder.layers.{layer}.{name}"] = _t(numpy.stack(values))
    return state


def load_legacy(options_file: str | Path, weights_file: str | Path, **config_overrides):
    """Builds an `ElmoModel` from legacy files (in eval mode); outputs match the reference implementation."""

    config = config_from_options(options_file, **config_overrides)
    model = ElmoModel(config)
    result = model.load_state_dict(read_legacy_state_dict(config, weights_file), strict=False)
    missing = [k for k in result.missing_keys if not k.startswith("scalar_mixes.")]
    if missing or result.unexpected_keys:
        raise LegacyFormatError(f"{weights_file}: weights do not fit the model (missing {missing}, unexpected {result.unexpected_keys})")
    return model.eval()


def save_legacy(model, directory: str | Path) -> tuple[Path, Path]:
    """Writes options.json + lm_weights.hdf5 that bilm-tf / AllenNLP loaders read (softmax included when present)."""

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    elmo: ElmoModel = model if isinstance(model, ElmoModel) else model.elmo
    config = elmo.config
    sd = {k: v.detach().cpu().float().numpy() for k, v in elmo.state_dict().items()}
    options_path, weights_path = directory / "options.json", directory / "lm_weights.hdf5"
    options_path.write_text(json.dumps(config.to_options(), indent=2), encoding="utf-8")
    with h5py.File(weights_path, "w") as out:
        out["char_embed"] = sd["token_encoder.char_embedding.weight"][1:]
        for i, _ in enumerate(config.filters):
            out[f"CNN/W_cnn_{i}"] = sd[f"token_encoder.convolutions.{i}.weight"].transpose(2, 1, 0)[None]
            out[f"CNN/b_cnn_{i}"] = sd[f"token_encoder.convolutions.{i}.bias"]
        for k in range(config.n_highway):
            for tf_name, ours in (("carry", "gate"), ("transform", "transform")):
                out[f"CNN_high_{k}/W_{tf_name}"] = sd[f"token_encoder.highways.{k}.{ours}.weight"].T
                out[f"CNN_high_{k}/b_{tf_name}"] = sd[f"token_encoder.highways.{k}.{ours}.bias"]
        if config.n_filters != config.projection_dim:
            out["CNN_proj/W_proj"] = sd["token_encoder.projection.weight"].T
            out["CNN_proj/b_proj"] = sd["token_encoder.projection.bias"]
        for layer in range(config.num_layers):
            for direction in (0, 1):
                prefix = _rnn_prefix(direction, layer)
                base = f"encoder.layers.{layer}."
                out[f"{prefix}/W_0"] = numpy.concatenate(
                    [sd[base + "input_weight"][direction], sd[base + "hidden_weight"][direction]]
                )
                out[f"{prefix}/B"] = sd[base + "bias"][direction]
                if base + "proj_weight" in sd:
                    out[f"{prefix}/W_P_0"] = sd[base + "proj_weight"][direction]
        if elmo is not model and getattr(model, "lm_head", None) is not None:
            out["softmax/W"] = model.lm_head.weight.detach().cpu().float().numpy()
            out["softmax/b"] = model.lm_head.bias.detach().cpu().float().numpy()
    return options_path, weights_path


__all__ = ["LegacyFormatError", "read_options", "config_from_options", "read_legacy_state_dict", "load_legacy", "save_legacy"]
