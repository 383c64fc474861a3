"""Where a model's files are: a local folder, or a Hugging Face hub repository (in the local cache or
on the hub), and the one-line errors for a name that is neither.

`locate(name, ...)` is what `ElmoPreTrainedModel.from_pretrained` (and so `AutoModel`) asks before
transformers reads anything: an existing folder is read as it is; a name shaped like a path that
does not exist fails at once (`no such directory: …`); a hub id (`owner/name`) that is not cached
fails in one line, naming both readings, when HF_HUB_OFFLINE is set or the hub cannot be reached,
after one request without retries (huggingface_hub would retry a dead network for half a minute).
`formats.references.HubId` asks the same. `locate_any_model(name)` asks it of a model of any kind that
transformers reads (the transformer of a spacy-transformers config), whose hub id may have no owner.

This is the one module that asks huggingface_hub about its cache and the hub (`try_to_load_from_cache`,
`hf_hub_url`, `validate_repo_id`, names huggingface_hub 0.x and 1.x both have; offline mode and the one request
without retries through `compat`, where the releases differ).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..compat import ask_hub_once, hub_offline


class ModelNotFoundError(FileNotFoundError):
    """A model reference that names no model: not a directory, not legacy files, not a hub model
    (or the hub cannot be asked), or files that are not a valid model. Its message is one line;
    the CLI prints it and exits 2, as for every mistake of the user."""


class ModelAbsentError(ModelNotFoundError):
    """Nothing is at the reference: no such file or folder, a hub id neither in the local cache
    nor to be had from the hub. (A typo, or the leftover name in a saved pipeline's config.)"""


def is_hub_id(reference: str, *, owner: bool = True) -> bool:
    """Whether `reference` is a well-formed hub id `owner/name` (not a path that looks local:
    no leading `.`, `/` or `~`, exactly one slash); `owner=False`: or a bare `name`, as transformers
    takes the hub's oldest models (`roberta-base`)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(reference)
    slashes = (1,) if owner else (0, 1)
    if text.count("/") not in slashes or text.startswith((".", "/", "~")) or "\\" in text:
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def cached_file(repo_id: str, filename: str, *, cache_dir=None, revision: str | None = None) -> Path | None:
    """The local hub cache's copy of `filename` of `repo_id` (its snapshot path), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    return Path(found) if isinstance(found, str) else None


def cache_folder(snapshot_file: Path) -> Path:
    """The repository's folder in the hub cache (`models--owner--name`) of a file of one of its snapshots."""
    for parent in snapshot_file.parents:
        if parent.name.startswith("models--"):
            return parent
    return snapshot_file.parent


def check_cached_weights(repo_id: str, snapshot: Path) -> None:
    """The weights a hub repository's cached snapshot holds so far, checked from their headers
    (`model_directory.check_weights`: whole safetensors files); a damaged copy is one
    `ModelNotFoundError` line naming the file and how to fetch it again."""
    from .model_directory import WEIGHTS_FILE, WEIGHTS_INDEX, ElmoLoadError, check_weights

    if not any((snapshot / name).exists() for name in (WEIGHTS_FILE, WEIGHTS_INDEX)):
        return  # not downloaded yet
    try:
        check_weights(snapshot)
    except ElmoLoadError as err:
        raise ModelNotFoundError(
            f"{err}; it is {repo_id}'s copy in the Hugging Face cache: delete {cache_folder(snapshot)} "
            "(or load with force_download=True) to download it again"
        ) from None


def network_reason(err: BaseException) -> str:
    """What a failed request ran into, short: the system's `[Errno N] ...` where the message (urllib3's or httpx's,
    nested in huggingface_hub's) holds one, else the message's first line."""
    text = str(err)
    found = re.search(r"\[Errno -?\d+\][^'\")\]]*", text)
    if found:
        return found.group(0).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


def absent(repo_id: str, why: str) -> ModelAbsentError:
    """Both readings of a name that is neither a folder here nor a cached hub id."""
    return ModelAbsentError(
        f"no such directory: {repo_id}; as a Hugging Face hub id it is not in the local cache, and {why}"
    )


def locate(name, *, subfolder: str = "", **hub: Any) -> dict[str, Any]:
    """Checks, before transformers reads anything, that `name` names a model's files, and returns
    the `from_pretrained` arguments to add (`local_files_only` when the hub cannot be reached but
    the repository is cached). `hub`: `from_pretrained`'s cache_dir, revision, token,
    local_files_only. Raises `ModelAbsentError` / `ModelNotFoundError`, one line."""
    if name is None:  # (a config and a state dict given instead of files)
        return {}
    text = os.fspath(name)
    path = Path(text) / subfolder if subfolder else Path(text)
    if path.is_dir():
        return {}
    if Path(text).exists():
        raise ModelNotFoundError(f"{text}: not a directory; a model is a folder (config.json + model.safetensors)")
    if not is_hub_id(text):
        raise ModelAbsentError(f"no such directory: {text}")
    return locate_hub_model(text, subfolder=subfolder, **hub)


def locate_hub_model(
    repo_id: str,
    *,
    subfolder: str = "",
    cache_dir=None,
    revision: str | None = None,
    token=None,
    local_files_only: bool = False,
    force_download: bool = False,
    **_: Any,
) -> dict[str, Any]:
    """`locate` of a hub id: its config.json cached (and the weights cached with it whole), or the
    hub asked once (no retries)."""
    config = f"{subfolder}/config.json" if subfolder else "config.json"
    cached_config = cached_file(repo_id, config, cache_dir=cache_dir, revision=revision)
    cached = cached_config is not None
    if cached_config is not None and not force_download:
        check_cached_weights(repo_id, cached_config.parent)
    if hub_offline() or local_files_only:
        if cached:
            return {}
        raise absent(repo_id, "HF_HUB_OFFLINE is set" if hub_offline() else "local_files_only is set")
    return ask_hub(repo_id, config, cached=cached, revision=revision, token=token)


def ask_hub(
    repo_id: str,
    filename: str,
    *,
    cached: bool,
    revision: str | None = None,
    token=None,
    layout: str = "an ELMo model in the HF layout",
) -> dict[str, Any]:
    """Asks the hub once (no retries) for `filename` of `repo_id`: {} when it is there,
    `{"local_files_only": True}` when the hub cannot be reached but the repository is `cached`; else
    `ModelAbsentError` / `ModelNotFoundError`, one line (`layout`: what a repository without the file is not)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError

    try:  # one request, no retries
        ask_hub_once(hf_hub_url(repo_id, filename, revision=revision), timeout=10, token=token)
    except RepositoryNotFoundError:
        raise ModelAbsentError(f"no such directory: {repo_id}; no such model on the Hugging Face hub either") from None
    except EntryNotFoundError:
        raise ModelNotFoundError(f"{repo_id}: the hub repository has no {filename} (not {layout})") from None
    except HfHubHTTPError as err:
        raise ModelNotFoundError(f"{repo_id}: the Hugging Face hub refused it: {str(err).splitlines()[0]}") from None
    except Exception as err:  # no network: DNS, refused connection, timeout, proxy
        if cached:
            return {"local_files_only": True}
        raise absent(repo_id, f"the hub cannot be reached ({network_reason(err)})") from None
    return {}


def locate_any_model(name: str) -> None:
    """That `name` names a model of any kind as transformers' `from_pretrained` reads one (the `name`
    of spacy-transformers' TransformerModel): an existing folder, or a hub id (`owner/name`, or a bare
    `name`) whose config.json is in the local cache or on the hub (asked once, no retries). Where the
    files are, only: what they hold is for the loader to check. Raises `ModelAbsentError` /
    `ModelNotFoundError`, one line."""
    text = os.fspath(name)
    if Path(text).is_dir():
        return
    if Path(text).exists():
        raise ModelNotFoundError(f"{text}: not a directory; a model is a folder (config.json and its weights)")
    if not is_hub_id(text, owner=False):
        raise ModelAbsentError(f"no such directory: {text}")
    if cached_file(text, "config.json") is not None:
        return
    if hub_offline():
        raise absent(text, "HF_HUB_OFFLINE is set")
    ask_hub(text, "config.json", cached=False, layout="a transformers model")


__all__ = [
    "ModelAbsentError",
    "ModelNotFoundError",
    "absent",
    "ask_hub",
    "cache_folder",
    "cached_file",
    "check_cached_weights",
    "is_hub_id",
    "network_reason",
    "locate",
    "locate_any_model",
    "locate_hub_model",
]
