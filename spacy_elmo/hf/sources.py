"""Where a model's files are: a local folder, or a Hugging Face hub repository (in the local cache or
on the hub), resolved once into the local folder that holds them (`ModelFolder`), and the one-line
errors for a name that is neither.

`resolve(name, ...)` is what `ElmoPreTrainedModel.from_pretrained` (and so `AutoModel`) asks before
transformers reads anything, and `formats.references.HubId` asks of a hub id: an existing folder is
read as it is; a name shaped like a path that does not exist fails at once (`no such directory: …`);
a hub id (`owner/name`) becomes its snapshot in the local cache, after one request to the hub (a
HEAD of its config.json, without retries: huggingface_hub would retry a dead network for half a
minute) that says which commit the revision is; only the files of that commit not cached yet are
downloaded (`hub_snapshot`). Offline (HF_HUB_OFFLINE, `local_files_only`), or when the hub cannot be
reached, the cached snapshot is read; a hub id not cached then fails in one line naming both
readings. The name the user gave stays the model's name (`ModelFolder.name`: what configs, model
cards and messages keep). `locate_any_model(name)` asks where a model of any kind that transformers
reads is (the transformer of a spacy-transformers config), whose hub id may have no owner.

This is the one module that asks huggingface_hub about its cache and the hub (`try_to_load_from_cache`,
`hf_hub_download`, `hf_hub_url`, `validate_repo_id`, names huggingface_hub 0.x and 1.x both have;
offline mode and the one request without retries through `compat`, where the releases differ).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compat import ask_hub_once, hub_offline
from ..constants import CONFIG_FILE, PICKLED_WEIGHTS_FILE, TOKENIZER_FILES, WEIGHTS_FILE, WEIGHTS_INDEX

# the `from_pretrained` arguments that say where a model's files come from: settled once they are resolved
HUB_ARGUMENTS = ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "subfolder", "token")


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


@dataclass(frozen=True)
class ModelFolder:
    """A model's files, resolved once: `path`, the local folder that holds them (the folder named, or a
    hub repository's snapshot in the local cache), and `name`, what the user gave (what configs, model
    cards and messages keep). `repo_folder`: a snapshot's repository folder in the cache (None for a
    local folder)."""

    path: Path
    name: str
    repo_folder: Path | None = None

    def local_text(self, hub: dict[str, Any]) -> str:
        """A local folder as the user wrote it (its `subfolder` in `hub`, `from_pretrained`'s arguments,
        joined): what messages about its files name."""
        subfolder = hub.get("subfolder") or ""
        return os.path.join(self.name, subfolder) if subfolder else self.name

    def damaged(self, err: Exception) -> Exception:
        """`err`, a check's one line about a file here; for a cached snapshot, a `ModelNotFoundError` that
        says how to download it again."""
        if self.repo_folder is None:
            return err
        return ModelNotFoundError(
            f"{err}; it is {self.name}'s copy in the Hugging Face cache: delete {self.repo_folder} "
            "(or load with force_download=True) to download it again"
        )


def resolve(name, *, subfolder: str = "", **hub: Any) -> ModelFolder | None:
    """The local folder of the model `name` names (None for None: a config and a state dict given
    instead of files), resolved once, before transformers reads anything: an existing folder as it is;
    a hub id's snapshot in the local cache (`hub_snapshot`: one request to the hub, the files not yet
    cached downloaded). `hub`: `from_pretrained`'s cache_dir, revision, token, local_files_only,
    force_download, variant, use_safetensors. Raises `ModelAbsentError` / `ModelNotFoundError`, one line."""
    if name is None:
        return None
    text = os.fspath(name)
    path = Path(text) / subfolder if subfolder else Path(text)
    if path.is_dir():
        return ModelFolder(path, text)
    if Path(text).exists():
        raise ModelNotFoundError(f"{text}: not a directory; a model is a folder ({CONFIG_FILE} + {WEIGHTS_FILE})")
    if not is_hub_id(text):
        raise ModelAbsentError(f"no such directory: {text}")
    return hub_snapshot(text, subfolder=subfolder, **hub)


def cached_snapshot(
    repo_id: str, *, subfolder: str = "", cache_dir=None, revision: str | None = None
) -> ModelFolder | None:
    """The snapshot of `repo_id` (at `revision`, default the main branch) in the local hub cache whose
    config.json is there (None: none is), as a `ModelFolder`; its other files may not be downloaded yet."""
    config = cached_file(
        repo_id, f"{subfolder}/{CONFIG_FILE}" if subfolder else CONFIG_FILE, cache_dir=cache_dir, revision=revision
    )
    return None if config is None else ModelFolder(config.parent, repo_id, cache_folder(config))


def hub_snapshot(
    repo_id: str,
    *,
    subfolder: str = "",
    cache_dir=None,
    revision: str | None = None,
    token=None,
    local_files_only: bool = False,
    force_download: bool = False,
    variant: str | None = None,
    use_safetensors: bool | None = None,
    proxies: dict | None = None,
    **_: Any,
) -> ModelFolder:
    """A hub repository's snapshot in the local cache, holding its model's files: offline (HF_HUB_OFFLINE,
    `local_files_only`) the cached one; else the hub is asked once (no retries) which commit `revision`
    is, and that commit's config.json, weights (safetensors, or their index and shards; else pickled
    weights unless `use_safetensors`) and tokenizer files not yet cached are downloaded (a file the hub
    said it lacks is not asked for again). The hub unreachable, the cached snapshot is read. Raises
    `ModelAbsentError` / `ModelNotFoundError`, one line."""
    from .model_directory import with_variant

    if proxies:  # (huggingface_hub's downloads take the environment's HTTPS_PROXY, not an argument)
        raise ValueError("proxies= is not supported for a hub id: set HTTPS_PROXY (and HTTP_PROXY) instead")
    cached = cached_snapshot(repo_id, subfolder=subfolder, cache_dir=cache_dir, revision=revision)
    if hub_offline() or local_files_only:
        if cached is None:
            raise absent(repo_id, "HF_HUB_OFFLINE is set" if hub_offline() else "local_files_only is set")
        return cached
    config = f"{subfolder}/{CONFIG_FILE}" if subfolder else CONFIG_FILE
    commit = ask_hub(repo_id, config, cached=cached is not None, revision=revision, token=token)
    if commit is None:  # the hub cannot be reached: the cached copy
        assert cached is not None
        return cached
    files = _SnapshotFiles(repo_id, subfolder, commit, cache_dir, token, force_download)
    config_path = files.fetch(CONFIG_FILE, required=True)
    assert config_path is not None
    weights = files.fetch(with_variant(WEIGHTS_FILE, variant))
    if weights is None:
        index = files.fetch(with_variant(WEIGHTS_INDEX, variant))
        if index is not None:
            for shard in _shards(index):
                files.fetch(shard)
        elif not use_safetensors:
            files.fetch(with_variant(PICKLED_WEIGHTS_FILE, variant))
    for name in TOKENIZER_FILES:
        files.fetch(name)
    folder = ModelFolder(config_path.parent, repo_id, cache_folder(config_path))
    _remember_revision(folder.repo_folder, revision or "main", commit)
    return folder


@dataclass(frozen=True)
class _SnapshotFiles:
    """The files of one commit of a hub repository, each taken from the local cache or downloaded once."""

    repo_id: str
    subfolder: str
    commit: str
    cache_dir: Any
    token: Any
    force_download: bool

    def fetch(self, name: str, *, required: bool = False) -> Path | None:
        """The cached copy of `name` at this commit, downloaded if not there yet; None where the hub
        has no such file (remembered in the cache, so it is not asked again), unless `required`."""
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
        from huggingface_hub.errors import EntryNotFoundError

        filename = f"{self.subfolder}/{name}" if self.subfolder else name
        if not self.force_download:
            found = try_to_load_from_cache(self.repo_id, filename, cache_dir=self.cache_dir, revision=self.commit)
            if isinstance(found, str):
                return Path(found)
            if found is not None:  # the hub said, at this commit, that it has no such file
                return None
        try:
            return Path(
                hf_hub_download(
                    self.repo_id,
                    filename,
                    revision=self.commit,
                    cache_dir=self.cache_dir,
                    token=self.token,
                    force_download=self.force_download,
                )
            )
        except EntryNotFoundError:
            if required:
                raise ModelNotFoundError(f"{self.repo_id}: the hub repository has no {filename}") from None
            return None
        except Exception as err:  # the network went away, a full disk: one line
            raise ModelNotFoundError(
                f"{self.repo_id}: downloading {filename} from the Hugging Face hub failed ({network_reason(err)})"
            ) from None


def _shards(index: Path) -> list[str]:
    """The shard files a downloaded weights index lists (none where it is not one: the check names it)."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return []
    return sorted({v for v in weight_map.values() if isinstance(v, str)}) if isinstance(weight_map, dict) else []


def _remember_revision(repo_folder: Path | None, revision: str, commit: str) -> None:
    """Records in the cache that `revision` (a branch or tag) is `commit` now, as huggingface_hub's own
    downloads do (refs/REVISION): offline, the cache then serves the commit the hub last named."""
    from ..files import write_text_atomic

    if repo_folder is None or revision == commit:
        return
    ref = repo_folder / "refs" / revision
    try:
        if not ref.is_file() or ref.read_text().strip() != commit:
            ref.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(ref, commit)
    except OSError:  # a read-only cache: the snapshot is read all the same
        pass


def ask_hub(
    repo_id: str,
    filename: str,
    *,
    cached: bool,
    revision: str | None = None,
    token=None,
    layout: str = "an ELMo model in the HF layout",
) -> str | None:
    """Asks the hub once (no retries) for `filename` of `repo_id` at `revision`: the commit it serves it
    from (the revision itself, where the answer names none), or None when the hub cannot be reached but
    the repository is `cached`; else `ModelAbsentError` / `ModelNotFoundError`, one line (`layout`: what
    a repository without the file is not)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError

    try:  # one request, no retries
        commit = ask_hub_once(hf_hub_url(repo_id, filename, revision=revision), timeout=10, token=token)
    except RepositoryNotFoundError:
        raise ModelAbsentError(f"no such directory: {repo_id}; no such model on the Hugging Face hub either") from None
    except EntryNotFoundError:
        raise ModelNotFoundError(f"{repo_id}: the hub repository has no {filename} (not {layout})") from None
    except HfHubHTTPError as err:
        raise ModelNotFoundError(f"{repo_id}: the Hugging Face hub refused it: {str(err).splitlines()[0]}") from None
    except Exception as err:  # no network: DNS, refused connection, timeout, proxy
        if cached:
            return None
        raise absent(repo_id, f"the hub cannot be reached ({network_reason(err)})") from None
    return commit or revision or "main"


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
    if cached_file(text, CONFIG_FILE) is not None:
        return
    if hub_offline():
        raise absent(text, "HF_HUB_OFFLINE is set")
    ask_hub(text, CONFIG_FILE, cached=False, layout="a transformers model")


__all__ = [
    "HUB_ARGUMENTS",
    "ModelAbsentError",
    "ModelFolder",
    "ModelNotFoundError",
    "absent",
    "ask_hub",
    "cache_folder",
    "cached_file",
    "cached_snapshot",
    "hub_snapshot",
    "is_hub_id",
    "locate_any_model",
    "network_reason",
    "resolve",
]
