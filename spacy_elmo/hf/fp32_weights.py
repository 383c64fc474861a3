"""A biLM's fp32 weights at low precision: released in eval mode, read back from the model's files.

An `ElmoModel` in eval mode bound to bf16 or int8 keeps no fp32 copy of a weight all of whose
products the decider makes low precision (`kernels.products.decide_product`): the module holding it
keeps the converted form only (`kernels.products.ConvertsWeights`: the LSTM's weights and the
linears' on a CPU; the char CNN's, under 1 MB, stay). Its other parameters then take no gradient.

What needs the fp32 weights afterwards reads them back from the model's own files (`WeightsFiles`:
the safetensors of the folder or hub snapshot it was loaded from, the legacy hdf5, the
ELMoForManyLangs files), each checked unchanged since loading (size and modification time):

- `state_dict`, and so `save_pretrained`, `push_to_hub`, `save_legacy` and a spaCy pipeline's
  `to_disk` / `to_bytes` (the fp32 weights are read for the call; the model stays as it is);
- `set_precision` to another precision, `train()` (training and fine-tuning), moving or casting
  it (`.to`, `.cuda`, `.half`): the fp32 weights come back into the model.

A model without such files (built in memory, read from bytes, or trained since loading, whose
weights are in no file) refuses these in one line (`Fp32WeightsGone`). Pickling (`nlp.pipe(n_process=2)`
where workers are spawned, `copy.deepcopy`) needs no fp32 weights: it carries the converted forms
and where the files are.

When: binding a low precision in eval mode (`set_precision`, loading, the spaCy component) releases
the weights; `eval()` releases them only while they are still their files' (so `eval()` after
training keeps them: nothing is lost that no file holds).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from ..kernels.capabilities import tensor_version
from ..kernels.products import ConvertsWeights


class Fp32WeightsGone(RuntimeError):
    """The fp32 weights a call needs were released and cannot be read back (one line)."""


class WeightsFiles(Protocol):
    """The files a model was loaded from (its loader attaches them: the one record of where it came
    from): where its fp32 weights can be read back from, and what a model card says it was converted
    from."""

    @property
    def converted_from(self) -> str | None:
        """The files as a model card names them where a converter read another format (legacy,
        ELMoForManyLangs); None for this package's own model directory."""
        ...

    def describe(self) -> str:
        """The files, for messages."""
        ...

    def read(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        """The named tensors (the biLM's state-dict names); `Fp32WeightsGone` (one line) when the
        files changed or went since they were attached."""
        ...


Stamp = tuple[int, int]


def stamps(paths: Sequence[Path]) -> tuple[Stamp, ...]:
    """(size, modification time) of each file, as when it was read."""
    return tuple((st.st_size, st.st_mtime_ns) for st in (os.stat(p) for p in paths))


def check_unchanged(paths: Sequence[Path], seen: Sequence[Stamp]) -> None:
    """`Fp32WeightsGone` naming the first file that is gone or changed since `seen`."""
    for path, stamp in zip(paths, seen):
        try:
            now = stamps([path])[0]
        except OSError:
            raise Fp32WeightsGone(f"{path} is gone since the model was loaded from it") from None
        if now != stamp:
            raise Fp32WeightsGone(f"{path} changed since the model was loaded from it")


@dataclass(frozen=True)
class SafetensorsFiles:
    """The safetensors files a model was loaded from (a folder, shards, a hub snapshot): `keys` maps
    each weight's name in the biLM to (file, key in that file)."""

    paths: tuple[Path, ...]
    seen: tuple[Stamp, ...]
    keys: Mapping[str, tuple[int, str]]

    @classmethod
    def find(cls, paths: Sequence[Path], names: Sequence[str], prefix: str) -> SafetensorsFiles | None:
        """The files holding every name (as `prefix` + name, or name, or "elmo." + name: a
        checkpoint of the biLM with or without its LM head), or None where one is missing."""
        from .model_directory import read_safetensors_header

        paths = tuple(Path(p) for p in paths)
        held = {key: index for index, path in enumerate(paths) for key in read_safetensors_header(path)}
        keys = {}
        for name in names:
            key = next((k for k in (prefix + name, name, "elmo." + name) if k in held), None)
            if key is None:
                return None
            keys[name] = (held[key], key)
        return cls(paths, stamps(paths), keys)

    @property
    def converted_from(self) -> str | None:
        return None  # a model directory: not a conversion

    def describe(self) -> str:
        return ", ".join(map(str, self.paths))

    def read(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        from safetensors import safe_open

        check_unchanged(self.paths, self.seen)
        tensors = {}
        for index, path in enumerate(self.paths):
            wanted = [name for name in names if self.keys[name][0] == index]
            if wanted:
                with safe_open(str(path), framework="pt") as handle:
                    tensors.update({name: handle.get_tensor(self.keys[name][1]) for name in wanted})
        return tensors


@dataclass
class Fp32State:
    """What an `ElmoModel` knows of its fp32 weights: the files it was loaded from (`files`, or `why`
    none), `stale` (why they no longer hold its weights: None while they do), which it released (name →
    shape, requires_grad, dtype, device), the `requires_grad` its other parameters had before the
    release froze them, and a fingerprint of its weights when they were last its files' (None: not
    known to be)."""

    files: WeightsFiles | None = None
    why: str = "it was built in memory"
    stale: str | None = None
    released: dict[str, tuple[tuple[int, ...], bool, torch.dtype, torch.device]] = field(default_factory=dict)
    frozen: dict[str, bool] = field(default_factory=dict)
    fingerprint: tuple | None = None


def _sites(model: nn.Module) -> Iterator[tuple[str, ConvertsWeights]]:
    for prefix, module in model.named_modules():
        if isinstance(module, ConvertsWeights):
            yield (prefix + "." if prefix else ""), module


def weight_names(model: nn.Module) -> list[str]:
    """Every weight of the model that a low precision may release."""
    return [prefix + name for prefix, site in _sites(model) for name in site.weight_products()]


def _fingerprint(model: nn.Module) -> tuple | None:
    """Changes when a releasable weight is replaced, modified in place or cast (None where torch
    cannot tell: `Tensor._version`)."""
    marks = []
    for prefix, site in _sites(model):
        for name in site.weight_products():
            param = site._parameters.get(name)
            if param is None:
                continue
            version = tensor_version(param)
            if version is None:
                return None
            marks.append((prefix + name, id(param), version, param.dtype))
    return tuple(marks)


def attach(model: nn.Module, state: Fp32State, files: WeightsFiles | None, why: str = "") -> None:
    """`files` are where the model's fp32 weights (as they are now) can be read back from (None: none,
    for `why`)."""
    state.files = files
    state.why = why or state.why
    state.stale = None
    state.fingerprint = _fingerprint(model) if files is not None else None


def release(model: nn.Module, state: Fp32State, *, explicit: bool) -> None:
    """Swaps the weights whose every product is low precision for their converted forms and stops
    gradients (the model is in eval mode). `explicit`: a precision was bound (`set_precision`,
    loading): released even where no file holds the weights; else (`eval()`) only while they are
    still their files'."""
    if not any(site.releasable() for _, site in _sites(model)):
        return
    unchanged = (
        state.files is not None
        and state.stale is None
        and state.fingerprint is not None
        and _fingerprint(model) == state.fingerprint
    )
    if not unchanged:
        if not explicit:
            return
        if state.files is not None:
            state.stale = "its weights changed since they were loaded"
    for prefix, site in _sites(model):
        kinds = {name: (p.dtype, p.device) for name, p in site._parameters.items() if p is not None}
        for name, (shape, requires_grad) in site.release_fp32().items():
            state.released[prefix + name] = (shape, requires_grad, *kinds[name])
    for name, param in model.named_parameters():
        state.frozen.setdefault(name, param.requires_grad)
        param.requires_grad_(False)


def read_released(model: nn.Module, state: Fp32State, what: str, precision: str) -> dict[str, torch.Tensor]:
    """The released weights, read back from the model's files (by the model's names), as they were
    when released; `Fp32WeightsGone` (one line, naming `what` needs them) where they cannot be."""
    if not state.released:
        return {}

    def gone(why: str) -> Fp32WeightsGone:
        return Fp32WeightsGone(
            f"{what} needs the biLM's fp32 weights, released when it was bound to {precision} in eval mode, "
            f"and {why} (save a model before binding it to {precision} in eval mode, or load it from its files)"
        )

    if state.files is None or state.stale is not None:
        raise gone(f"it has no files to read them back from ({state.stale or state.why})")
    try:
        tensors = state.files.read(list(state.released))
    except Fp32WeightsGone as err:
        raise gone(str(err)) from None
    out = {}
    for name, (shape, _, dtype, device) in state.released.items():
        tensor = tensors[name]
        if tuple(tensor.shape) != shape:  # (the stamps would have told: a file rewritten in the same second)
            raise gone(f"{state.files.describe()} holds {name} of shape {tuple(tensor.shape)}, not {shape}")
        out[name] = tensor.to(device=device, dtype=dtype)
    return out


def restore(model: nn.Module, state: Fp32State, what: str, precision: str) -> None:
    """The released weights back into the model (read from its files), and the gradients as they were."""
    if not state.released:
        return
    with torch.inference_mode(False):  # parameters, not inference tensors, whatever mode calls this
        tensors = read_released(model, state, what, precision)
        for prefix, site in _sites(model):
            mine = {name[len(prefix) :]: t for name, t in tensors.items() if name.startswith(prefix)}
            mine = {name: t for name, t in mine.items() if "." not in name}
            if mine:
                grads = {name: state.released[prefix + name][1] for name in mine}
                site.restore_fp32(mine, grads)
    for name, param in model.named_parameters():
        if name in state.frozen:
            param.requires_grad_(state.frozen[name])
    state.released.clear()
    state.frozen.clear()
    state.fingerprint = _fingerprint(model)


def is_released(state: Fp32State) -> bool:
    return bool(state.released)


__all__ = [
    "Fp32State",
    "Fp32WeightsGone",
    "SafetensorsFiles",
    "WeightsFiles",
    "attach",
    "check_unchanged",
    "is_released",
    "read_released",
    "release",
    "restore",
    "stamps",
    "weight_names",
]
