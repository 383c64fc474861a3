"""Read and write the original ELMo weight format: options.json + lm_weights.hdf5 (bilm-tf / AllenNLP).

`weight_table` is the one mapping between the file's datasets and this model's tensors; reading and
writing both go through it.  Every problem is reported as a `LegacyFormatError` naming the file,
the dataset or field, and what was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy
import torch
from huggingface_hub.errors import StrictDataclassError

from ..constants import LEGACY_OPTIONS_FILE, LEGACY_WEIGHTS_FILE
from ..files import check_input_file
from ..hf.configuration_elmo import ElmoConfig, config_error_message, read_json_object
from ..hf.fp32_weights import check_unchanged, stamps
from ..hf.modeling_elmo import ElmoModel


class LegacyFormatError(ValueError):
    """A legacy options.json / hdf5 file is missing, unreadable, or does not match the expected layout."""


# options.json fields the loader needs; everything else has a default, and every value is checked
# by ElmoConfig
REQUIRED_OPTIONS = ("char_cnn.embedding.dim", "char_cnn.filters", "lstm.dim", "lstm.projection_dim")


def read_options(options_file: str | Path) -> dict:
    """Parses options.json with errors that name the file and field."""
    path = Path(options_file)
    if path.is_dir():
        raise LegacyFormatError(f"{path}: is a directory, expected the legacy options.json")
    if not path.is_file():
        raise LegacyFormatError(f"options file not found: {path}")
    options = read_json_object(path, LegacyFormatError)
    for dotted in REQUIRED_OPTIONS:
        section, *inner, field = dotted.split(".")
        if not isinstance(options.get(section), dict):
            raise LegacyFormatError(f"{path}: missing section '{section}' (this loader reads character-based biLMs)")
        value, where = options[section], section
        for name in inner:
            value, where = value.get(name), f"{where}.{name}"
            if not isinstance(value, dict):
                raise LegacyFormatError(f"{path}: field '{where}' must be an object, found {value!r}")
        if field not in value:
            raise LegacyFormatError(f"{path}: missing field '{dotted}'")
    return options


# options.json's fields, as errors name them
EMBEDDING, FILTERS, N_HIGHWAY = "char_cnn.embedding.dim", "char_cnn.filters", "char_cnn.n_highway"
LSTM_DIM, PROJECTION, N_LAYERS = "lstm.dim", "lstm.projection_dim", "lstm.n_layers"
# the options.json field of each ElmoConfig field `ElmoConfig.from_options` sets (what an error names)
OPTION_FIELDS = {
    "n_characters": "char_cnn.n_characters",
    "max_characters_per_token": "char_cnn.max_characters_per_token",
    "char_embedding_dim": EMBEDDING,
    "filters": FILTERS,
    "n_highway": N_HIGHWAY,
    "activation": "char_cnn.activation",
    "num_layers": N_LAYERS,
    "lstm_dim": LSTM_DIM,
    "projection_dim": PROJECTION,
    "cell_clip": "lstm.cell_clip",
    "proj_clip": "lstm.proj_clip",
    "use_skip_connections": "lstm.use_skip_connections",
}


def config_from_options(options_file: str | Path, **overrides) -> ElmoConfig:
    """ElmoConfig for a legacy options.json; ElmoConfig's own checks, reported in one line naming the
    file and the options.json field."""
    path = Path(options_file)
    options = read_options(path)
    try:
        return ElmoConfig.from_options(options, **overrides)
    except (KeyError, TypeError, ValueError, StrictDataclassError) as err:  # StrictDataclassError: @strict's checks
        reason = config_error_message(err)
        named = re.match(r"field '([^']+)': (.*)", reason)
        if named and named.group(1) in OPTION_FIELDS:
            reason = f"field '{OPTION_FIELDS[named.group(1)]}': {named.group(2)}"
        else:  # a check of several fields: their ElmoConfig names, in options.json's words
            for ours, theirs in OPTION_FIELDS.items():
                reason = re.sub(rf"\b{ours}\b", theirs, reason)
        raise LegacyFormatError(f"{path}: invalid options: {reason}") from None


# --------------------------------------------------------------------------------------------------
# The dataset ↔ tensor table


class Transform(NamedTuple):
    """How a dataset's value becomes our tensor (`read`) and back (`write`); exact inverses."""

    read: Callable[[numpy.ndarray], numpy.ndarray]
    write: Callable[[numpy.ndarray], numpy.ndarray]


SAME = Transform(lambda a: a, lambda a: a)
TRANSPOSE = Transform(lambda a: a.T, lambda a: a.T)  # TF x·W ↔ torch nn.Linear (out, in)
# TF conv2d kernel (1, width, in, out) ↔ torch Conv1d (out, in, width)
CONV = Transform(lambda w: w[0].transpose(2, 1, 0), lambda w: w.transpose(2, 1, 0)[None])
# the file has 261 character rows (ids 0..260); ours has a zero row first for padding id 0
PADDING_ROW = Transform(lambda a: numpy.concatenate([numpy.zeros_like(a[:1]), a]), lambda a: a[1:])


class Entry(NamedTuple):
    """One hdf5 dataset, or one block of its rows, ↔ one tensor of `ElmoModel.state_dict()`."""

    dataset: str
    shape: tuple[int, ...]  # the whole dataset's shape in the file
    tensor: str
    transform: Transform = SAME
    direction: int | None = None  # our LSTM tensors stack both directions: [2, ...]
    rows: slice = slice(None)  # the block of the dataset's rows that is this tensor
    fields: str = ""  # the options.json fields its shape comes from (what an error names)


# the datasets that count what options.json counts: {field: (pattern, what they are)}
COUNTED = {
    N_LAYERS: (re.compile(r"^RNN_[01]/RNN/MultiRNNCell/Cell(\d+)/"), "LSTM layers"),
    N_HIGHWAY: (re.compile(r"^CNN_high_(\d+)/"), "highway layers"),
    FILTERS: (re.compile(r"^CNN/[Wb]_cnn_(\d+)$"), "convolution filters"),
}
# datasets no ElmoModel tensor holds that a weights file may carry: bilm-tf's training softmax (save_legacy
# writes the LM head there); nothing reads them
OPTIONAL_DATASETS = re.compile(r"^softmax/")


def weight_table(config: ElmoConfig) -> list[Entry]:
    """Every dataset of lm_weights.hdf5 (but the LM softmax) for `config`, with the tensor it holds."""
    dim, n_filters, proj, hidden = config.char_embedding_dim, config.n_filters, config.projection_dim, config.lstm_dim
    table = [Entry("char_embed", (261, dim), "token_encoder.char_embedding.weight", PADDING_ROW, fields=EMBEDDING)]
    for i, (width, num) in enumerate(config.filters):
        table += [
            Entry(
                f"CNN/W_cnn_{i}",
                (1, width, dim, num),
                f"token_encoder.convolutions.{i}.weight",
                CONV,
                fields=f"{FILTERS}[{i}], {EMBEDDING}",
            ),
            Entry(f"CNN/b_cnn_{i}", (num,), f"token_encoder.convolutions.{i}.bias", fields=f"{FILTERS}[{i}]"),
        ]
    for k in range(config.n_highway):
        for tf_name, ours in (("carry", "gate"), ("transform", "transform")):
            table += [
                Entry(
                    f"CNN_high_{k}/W_{tf_name}",
                    (n_filters, n_filters),
                    f"token_encoder.highways.{k}.{ours}.weight",
                    TRANSPOSE,
                    fields=FILTERS,
                ),
                Entry(
                    f"CNN_high_{k}/b_{tf_name}",
                    (n_filters,),
                    f"token_encoder.highways.{k}.{ours}.bias",
                    fields=FILTERS,
                ),
            ]
    if n_filters != proj:
        table += [
            Entry(
                "CNN_proj/W_proj",
                (n_filters, proj),
                "token_encoder.projection.weight",
                TRANSPOSE,
                fields=f"{FILTERS}, {PROJECTION}",
            ),
            Entry("CNN_proj/b_proj", (proj,), "token_encoder.projection.bias", fields=PROJECTION),
        ]
    for layer in range(config.num_layers):
        ours = f"encoder.layers.{layer}."
        for direction in (0, 1):
            cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            # W_0 is [input; previous output] · W: its first rows are our input weight, the rest the hidden weight
            lstm = f"{PROJECTION}, {LSTM_DIM}"
            table += [
                Entry(
                    cell + "W_0",
                    (2 * proj, 4 * hidden),
                    ours + "input_weight",
                    direction=direction,
                    rows=slice(0, proj),
                    fields=lstm,
                ),
                Entry(
                    cell + "W_0",
                    (2 * proj, 4 * hidden),
                    ours + "hidden_weight",
                    direction=direction,
                    rows=slice(proj, None),
                    fields=lstm,
                ),
                Entry(cell + "B", (4 * hidden,), ours + "bias", direction=direction, fields=LSTM_DIM),
            ]
            if proj != hidden:
                table.append(
                    Entry(cell + "W_P_0", (hidden, proj), ours + "proj_weight", direction=direction, fields=lstm)
                )
    return table


# --------------------------------------------------------------------------------------------------
# Reading


def _dataset(handle: h5py.File, path: Path, name: str, shape: tuple[int, ...]) -> h5py.Dataset:
    """Dataset `name` of an open weights file, there, of `shape` and of floating point (its metadata
    only: nothing read)."""
    if name not in handle:
        raise LegacyFormatError(f"{path}: missing dataset '{name}' (expected shape {shape})")
    dataset = handle[name]
    if not isinstance(dataset, h5py.Dataset):
        raise LegacyFormatError(f"{path}: '{name}' is a group, expected a dataset of shape {shape}")
    if tuple(dataset.shape) != tuple(shape):
        raise LegacyFormatError(
            f"{path}: dataset '{name}' has shape {tuple(dataset.shape)}, expected {tuple(shape)} "
            "(do options.json and the weights belong together?)"
        )
    if dataset.dtype.kind != "f":
        raise LegacyFormatError(
            f"{path}: dataset '{name}' has dtype {dataset.dtype}, expected floating point (float16, float32 or float64)"
        )
    return dataset


def _datasets(handle: h5py.File) -> list[str]:
    """The names of every dataset in an open weights file (its metadata only)."""
    names: list[str] = []
    handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
    return names


def check_datasets(handle: h5py.File, path: Path, config: ElmoConfig, options_file: str | Path | None = None) -> None:
    """The weights file against options.json (read into `config`), metadata only: the layers,
    highway layers and filters it holds are those the options count, every dataset the table
    needs is there, of floating point and of the shape the options give, and it holds nothing else
    (but the training softmax). One `LegacyFormatError` line naming both files and the field."""
    options = Path(options_file) if options_file is not None else LEGACY_OPTIONS_FILE
    names = _datasets(handle)
    counts = {N_LAYERS: config.num_layers, N_HIGHWAY: config.n_highway, FILTERS: len(config.filters)}
    for field, (pattern, what) in COUNTED.items():
        found = {int(m.group(1)) for name in names if (m := pattern.match(name))}
        held = max(found) + 1 if found else 0
        if held != counts[field]:
            raise LegacyFormatError(
                f"{path}: holds {held} {what}, field '{field}' of {options} says {counts[field]} "
                "(do options.json and the weights belong together?)"
            )
    table = weight_table(config)
    for entry in table:
        try:
            _dataset(handle, path, entry.dataset, entry.shape)
        except LegacyFormatError as err:
            if entry.fields and "has shape" in str(err):
                raise LegacyFormatError(
                    f"{path}: dataset '{entry.dataset}' has shape {tuple(handle[entry.dataset].shape)}, "
                    f"expected {tuple(entry.shape)} from {options} field(s) {entry.fields} "
                    "(do options.json and the weights belong together?)"
                ) from None
            raise
    described = {entry.dataset for entry in table}
    extra = [name for name in names if name not in described and not OPTIONAL_DATASETS.match(name)]
    if extra:
        raise LegacyFormatError(
            f"{path}: holds dataset(s) {extra[:4]} that no field of {options} describes "
            "(do options.json and the weights belong together?)"
        )


class _Reader:
    """Reads datasets from an open hdf5 file, checking presence, shape and finiteness."""

    def __init__(self, handle: h5py.File, path: Path):
        self.handle, self.path = handle, path

    def __call__(self, name: str, shape: tuple[int, ...]) -> numpy.ndarray:
        dataset = _dataset(self.handle, self.path, name, shape)
        try:
            value = numpy.asarray(dataset[...], dtype=numpy.float32)
        except (OSError, ValueError, TypeError) as err:
            raise LegacyFormatError(
                f"{self.path}: cannot read dataset '{name}' ({err}); the file may be truncated"
            ) from None
        if not numpy.isfinite(value).all():
            bad = int((~numpy.isfinite(value)).sum())
            raise LegacyFormatError(f"{self.path}: dataset '{name}' contains {bad} NaN/inf values")
        return value


def open_weights(weights_file: str | Path) -> h5py.File:
    """The hdf5 weights file, open for reading; nothing is read yet, but a truncated file fails here
    (HDF5 compares the file's size with the end its superblock records)."""
    path = Path(weights_file)
    if path.is_dir():
        raise LegacyFormatError(f"{path}: is a directory, expected the legacy .hdf5 weights file")
    if not path.is_file():
        raise LegacyFormatError(f"weights file not found: {path}")
    try:
        check_input_file(path)  # (HDF5 would call an unreadable file corrupt)
    except OSError as err:
        raise LegacyFormatError(str(err)) from None
    try:
        return h5py.File(path, "r")
    except OSError as err:
        reason = " ".join(str(err).split())
        raise LegacyFormatError(f"{path}: not a readable HDF5 file (truncated or corrupt?): {reason}") from None


def check_legacy(options_file: str | Path, weights_file: str | Path) -> None:
    """Checks legacy files without reading weights: options.json parses into a valid config, the
    hdf5 file opens (whole: HDF5 compares its size with the end its superblock records) and holds
    exactly the datasets that config describes, of its shapes and of floating point
    (`check_datasets`, metadata only). Every problem is one `LegacyFormatError` line naming the file."""
    config = config_from_options(options_file)
    with open_weights(weights_file) as handle:
        check_datasets(handle, Path(weights_file), config, options_file)


def read_legacy_state_dict(
    config: ElmoConfig, weights_file: str | Path, options_file: str | Path | None = None
) -> dict[str, torch.Tensor]:
    """The `ElmoModel` state dict from a bilm-tf lm_weights.hdf5, checked against `config` (read
    from `options_file`, which errors name) before any weight is read (`check_datasets`)."""
    path = Path(weights_file)
    handle = open_weights(path)
    state: dict[str, numpy.ndarray] = {}
    directions: dict[str, dict[int, numpy.ndarray]] = {}
    with handle:
        check_datasets(handle, path, config, options_file)
        read = _Reader(handle, path)
        datasets: dict[str, numpy.ndarray] = {}
        for entry in weight_table(config):
            if entry.dataset not in datasets:
                datasets[entry.dataset] = read(entry.dataset, entry.shape)
            value = entry.transform.read(datasets[entry.dataset][entry.rows])
            if entry.direction is None:
                state[entry.tensor] = value
            else:
                directions.setdefault(entry.tensor, {})[entry.direction] = value
    state.update({name: numpy.stack([per[0], per[1]]) for name, per in directions.items()})
    return {name: torch.from_numpy(numpy.ascontiguousarray(value)) for name, value in state.items()}


def describe_legacy(options_file: str | Path, weights_file: str | Path | None) -> str:
    """The legacy files as a model card names them: file names only (a card may be published; the
    folders they were read from are private)."""
    weights = f" + `{Path(weights_file).name}`" if weights_file is not None else ""
    return f"`{Path(options_file).name}`{weights}"


@dataclass(frozen=True)
class LegacyFiles:
    """The legacy pair a model was loaded from: where its fp32 weights are read back from once a low
    precision released them (`hf.fp32_weights.WeightsFiles`), the files checked unchanged."""

    options: Path
    weights: Path
    seen: tuple

    @classmethod
    def of(cls, options_file: str | Path, weights_file: str | Path) -> LegacyFiles:
        paths = (Path(options_file), Path(weights_file))
        return cls(*paths, stamps(paths))

    @property
    def converted_from(self) -> str:
        return describe_legacy(self.options, self.weights)

    def describe(self) -> str:
        return f"{self.options} + {self.weights}"

    def read(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        check_unchanged((self.options, self.weights), self.seen)
        state = read_legacy_state_dict(config_from_options(self.options), self.weights)
        return {name: state[name] for name in names}


def load_legacy(options_file: str | Path, weights_file: str | Path, **config_overrides):
    """Builds an `ElmoModel` from legacy files (in eval mode); outputs match the reference implementation.
    The model records the files it was read from (`LegacyFiles`: its `converted_from`, which the card
    `save_pretrained` writes names, and where a low precision reads its fp32 weights back from)."""

    config = config_from_options(options_file, **config_overrides)
    model = ElmoModel(config)
    result = model.load_state_dict(read_legacy_state_dict(config, weights_file, options_file), strict=False)
    missing = [k for k in result.missing_keys if not k.startswith("scalar_mixes.")]
    if missing or result.unexpected_keys:
        raise LegacyFormatError(
            f"{weights_file}: weights do not fit the model (missing {missing}, unexpected {result.unexpected_keys})"
        )
    model.attach_weights_files(LegacyFiles.of(options_file, weights_file))
    return model.eval()


# --------------------------------------------------------------------------------------------------
# Writing


def save_legacy(model, directory: str | Path) -> tuple[Path, Path]:
    """Writes options.json + lm_weights.hdf5 that bilm-tf / AllenNLP loaders read (softmax included when present)."""

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    elmo: ElmoModel = model if isinstance(model, ElmoModel) else model.elmo
    config = elmo.config
    state = {k: v.detach().cpu().float().numpy() for k, v in elmo.state_dict().items()}
    blocks: dict[str, list[numpy.ndarray]] = {}
    for entry in weight_table(config):
        value = state[entry.tensor] if entry.direction is None else state[entry.tensor][entry.direction]
        blocks.setdefault(entry.dataset, []).append(entry.transform.write(value))
    options_path, weights_path = directory / LEGACY_OPTIONS_FILE, directory / LEGACY_WEIGHTS_FILE
    options_path.write_text(json.dumps(config.to_options(), indent=2), encoding="utf-8")
    with h5py.File(weights_path, "w") as out:
        for name, parts in blocks.items():  # a dataset's row blocks come in row order
            out[name] = parts[0] if len(parts) == 1 else numpy.concatenate(parts)
        # the LM head is not part of ElmoModel (nothing reads it back): written for bilm-tf's training code
        if elmo is not model and getattr(model, "lm_head", None) is not None:
            out["softmax/W"] = model.lm_head.weight.detach().cpu().float().numpy()
            out["softmax/b"] = model.lm_head.bias.detach().cpu().float().numpy()
    return options_path, weights_path


__all__ = [
    "LegacyFiles",
    "LegacyFormatError",
    "read_options",
    "config_from_options",
    "weight_table",
    "check_datasets",
    "open_weights",
    "check_legacy",
    "describe_legacy",
    "read_legacy_state_dict",
    "load_legacy",
    "save_legacy",
]
