"""The biLM inside a pipeline, written one way: a model directory, as files or as bytes.

On disk the biLM is a model directory (`model_directory.save_model_directory`: config.json,
model.safetensors, the tokenizer with its settings and lexicons; no model card). It is read back as
the local model folder it is (`formats.references.HfFolder`, local files and safetensors only):
`ElmoModel.from_pretrained` with its strict checks (unknown config fields, missing or mis-shaped
tensors, NaN/inf) and the tokenizer fitted to it (`references.fit_tokenizer`). As bytes it is the
same files, {name: content} in msgpack: no pickle, no archive.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import srsly
import torch
from thinc.api import get_torch_default_device


def save_bilm(elmo, tokenizer, path: str | Path) -> None:
    """Writes the biLM and its tokenizer as a model directory (no model card: it lives inside a pipeline)."""
    from ...hf.model_directory import save_model_directory

    save_model_directory(path, elmo, tokenizer, card=False)


def load_bilm(path: str | Path, device: torch.device | None = None):
    """(biLM in eval mode, tokenizer) from the local model directory `path` (safetensors only).

    A broken directory raises `ElmoLoadError` naming the file and the problem. A directory
    without tokenizer files (written by 0.1.0: tests/fixtures/saved_v0_1 needs this) gets the UTF-8
    tokenizer.
    """
    from ...formats.references import HfFolder

    elmo, tokenizer = HfFolder(str(path)).load(local_files_only=True, use_safetensors=True)
    return elmo.to(device or get_torch_default_device()).eval(), tokenizer


def bilm_to_bytes(elmo, tokenizer) -> bytes:
    """msgpack({"files": {name: content}}) of the directory `save_bilm` writes ({"files": None} for no biLM)."""
    if elmo is None:
        return srsly.msgpack_dumps({"files": None})
    with tempfile.TemporaryDirectory() as tmp:
        save_bilm(elmo, tokenizer, tmp)
        files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    return srsly.msgpack_dumps({"files": files})


def bilm_from_bytes(data: bytes, device: torch.device | None = None):
    """(biLM, tokenizer) serialized by `bilm_to_bytes` ((None, None) if it held none), read by `load_bilm`.

    Also reads 0.1.0's bytes, {"config": config.json text, "weights": safetensors}
    (tests/hf/test_serialization.py's bytes of tests/fixtures/saved_v0_1 need this).
    """
    from ...constants import CONFIG_FILE, WEIGHTS_FILE
    from ...hf.model_directory import ElmoLoadError

    msg = srsly.msgpack_loads(data)
    if not isinstance(msg, dict) or not ("files" in msg or "config" in msg):
        raise ElmoLoadError("elmo bytes: not a serialized biLM (expected msgpack with 'files')")
    if "files" in msg:
        files = msg["files"]
    elif msg["config"] is None:
        files = None
    else:
        files = {CONFIG_FILE: msg["config"].encode("utf8"), WEIGHTS_FILE: msg.get("weights", b"")}
    if files is None:
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in files.items():
            if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
                raise ElmoLoadError(f"elmo bytes: invalid file name {name!r}")
            (Path(tmp) / name).write_bytes(content)
        try:
            elmo, tokenizer = load_bilm(tmp, device)
        except (ElmoLoadError, OSError) as err:  # name the bytes, not the temporary directory
            raise ElmoLoadError(str(err).replace(tmp, "elmo bytes")) from None
        # its files go with the temporary directory: it keeps its fp32 weights (saving it needs them)
        elmo.attach_weights_files(None, "it was read from bytes")
    return elmo, tokenizer


__all__ = ["bilm_from_bytes", "bilm_to_bytes", "load_bilm", "save_bilm"]
