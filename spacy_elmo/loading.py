"""Resolving a model reference (HF directory, hub id, legacy files) to an `ElmoModel`."""

from __future__ import annotations

import json
from pathlib import Path

from .legacy import LegacyFormatError, load_legacy
from .quiet import quiet_hf


def resolve_legacy(reference: str | Path) -> tuple[Path, Path] | None:
    """(options.json, weights.hdf5) if `reference` names legacy files: a directory holding both,
    or "OPTIONS.json,WEIGHTS.hdf5"; else None."""
    text = str(reference)
    if "," in text:
        options, weights = (Path(p.strip()) for p in text.split(",", 1))
        return options, weights
    path = Path(text)
    if path.is_dir() and (path / "options.json").is_file() and not (path / "config.json").is_file():
        weights = sorted(path.glob("*.hdf5"))
        if not weights:
            raise LegacyFormatError(f"{path}: has options.json but no .hdf5 weights file")
        preferred = [w for w in weights if w.name == "lm_weights.hdf5"]
        return path / "options.json", (preferred or weights)[0]
    return None


class ModelNotFoundError(FileNotFoundError):
    """A model reference that names no model: not a directory, not legacy files, not a hub model
    (or the hub cannot be asked). Its message is one line; the CLI prints it and exits 1."""


def is_hub_id(reference: str) -> bool:
    """Whether `reference` is a well-formed hub id `owner/name` (not a path that looks local:
    no leading `.`, `/` or `~`, exactly one slash)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(reference)
    if text.count("/") != 1 or text.startswith((".", "/", "~")) or "\\" in text:
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def hub_loading_kwargs(repo_id: str) -> dict:
    """Checks a hub id before `from_pretrained` asks the hub (which retries a dead network for
    half a minute). Returns extra `from_pretrained` arguments, or raises `ModelNotFoundError`:
    offline (HF_HUB_OFFLINE) and not cached, no such hub repository, or the hub unreachable."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, is_offline_mode, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError

    cached = isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    if is_offline_mode():
        if cached:
            return {}
        raise ModelNotFoundError(
            f"no such directory: {repo_id}; as a Hugging Face hub id it is not in the local cache, "
            "and HF_HUB_OFFLINE is set"
        )
    try:  # one request, no retries
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json"), timeout=10)
    except RepositoryNotFoundError:
        raise ModelNotFoundError(f"no such directory: {repo_id}; no such model on the Hugging Face hub either") from None
    except EntryNotFoundError:
        raise ModelNotFoundError(f"{repo_id}: the hub repository has no config.json (not an ELMo model in the HF layout)") from None
    except HfHubHTTPError as err:
        raise ModelNotFoundError(f"{repo_id}: the Hugging Face hub refused it: {str(err).splitlines()[0]}") from None
    except Exception as err:  # no network: DNS, refused connection, timeout, proxy
        if cached:
            return {"local_files_only": True}
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ModelNotFoundError(
            f"no such directory: {repo_id}; the Hugging Face hub cannot be reached ({reason}) "
            "and the model is not in the local cache"
        ) from None
    return {}


def check_reference(reference: str | Path) -> None:
    """Checks cheaply that `reference` can name a model, without reading weights or asking the network.

    Legacy files must exist; a local directory must hold an ELMo `config.json` (or legacy files);
    anything else must be a well-formed hub id, and one that is in the local cache when
    HF_HUB_OFFLINE is set. Raises `ModelNotFoundError` (one line) otherwise.
    """
    legacy = resolve_legacy(reference)
    if legacy is not None:
        for path in legacy:
            if not path.is_file():
                raise ModelNotFoundError(f"no such file: {path} (in the legacy reference {str(reference)!r})")
        return
    path = Path(str(reference))
    if path.exists():
        config = path / "config.json"
        if not config.is_file():
            raise ModelNotFoundError(
                f"{path}: not an ELMo model: expected config.json + model.safetensors (HF layout) "
                "or options.json + lm_weights.hdf5 (legacy layout)"
            )
        try:
            model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (ValueError, AttributeError, OSError) as err:
            raise ModelNotFoundError(f"{config}: not a JSON object ({err})") from None
        if model_type != "elmo":
            raise ModelNotFoundError(f"{config}: not an ELMo model (model_type {model_type!r}, expected 'elmo')")
        return
    if not is_hub_id(str(reference)):
        raise ModelNotFoundError(f"no such directory: {reference}")
    from huggingface_hub import is_offline_mode, try_to_load_from_cache

    if is_offline_mode() and not isinstance(try_to_load_from_cache(str(reference), "config.json"), str):
        raise ModelNotFoundError(
            f"no such directory: {reference}; as a Hugging Face hub id it is not in the local cache, "
            "and HF_HUB_OFFLINE is set"
        )


def load_model(reference: str | Path, **kwargs):
    """An `ElmoModel` in eval mode from an HF directory, a hub id, or legacy options+weights files.

    A reference that is none of these fails at once with one line (`ModelNotFoundError`).
    Loading draws no progress bar of its own (`quiet.quiet_hf`); a hub download still shows one.
    """
    from .modeling_elmo import ElmoModel

    check_reference(reference)
    legacy = resolve_legacy(reference)
    if legacy is not None:
        return load_legacy(*legacy)
    if not Path(str(reference)).exists():
        kwargs = {**hub_loading_kwargs(str(reference)), **kwargs}
    with quiet_hf():
        return ElmoModel.from_pretrained(str(reference), **kwargs).eval()
