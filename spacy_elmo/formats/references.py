"""Resolving a model reference to an `ElmoModel` and its `ElmoTokenizer`.

A reference is an HF directory (config.json + model.safetensors + tokenizer files), a hub id
(`owner/name`), legacy files (a directory holding options.json + *.hdf5, or
"OPTIONS.json,WEIGHTS.hdf5"), an ELMoForManyLangs directory, or an `https://` URL of any of these
(an archive of a directory, or a pair of URLs of legacy files), downloaded once into the cache
(`spacy_elmo.formats.download`).
"""

from __future__ import annotations

import json
from pathlib import Path

from .legacy import LegacyFormatError, load_legacy


def resolve_legacy(reference: str | Path) -> tuple[Path, Path] | None:
    """(options.json, weights.hdf5) if `reference` names legacy files: a directory holding both,
    or "OPTIONS.json,WEIGHTS.hdf5"; else None."""
    text = str(reference)
    if "," in text:
        options, weights = (Path(p.strip()) for p in text.split(",", 1))
        return options, weights
    path = Path(text)
    if path.is_dir() and (path / "options.json").is_file() and not (path / "config.json").is_file():
        found = sorted(path.glob("*.hdf5"))
        if not found:
            raise LegacyFormatError(f"{path}: has options.json but no .hdf5 weights file")
        preferred = [w for w in found if w.name == "lm_weights.hdf5"]
        return path / "options.json", (preferred or found)[0]
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
        raise ModelNotFoundError(
            f"no such directory: {repo_id}; no such model on the Hugging Face hub either"
        ) from None
    except EntryNotFoundError:
        raise ModelNotFoundError(
            f"{repo_id}: the hub repository has no config.json (not an ELMo model in the HF layout)"
        ) from None
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
    """Checks cheaply that `reference` can name a model, without reading weights, downloading or
    asking the network: a URL must be well formed; legacy files must exist; a local directory must
    hold an ELMo `config.json`, legacy files or an ELMoForManyLangs model (its architecture
    valid and its files present); anything else must be a
    well-formed hub id, in the local cache when HF_HUB_OFFLINE is set. Raises `ModelNotFoundError`
    (one line) otherwise."""
    from .download import check_url_reference, is_url
    from .efml import EfmlFormatError, check_efml_directory, is_efml_directory

    if is_url(str(reference)):
        check_url_reference(str(reference))
        return
    legacy = resolve_legacy(reference)
    if legacy is not None:
        for path in legacy:
            if not path.is_file():
                raise ModelNotFoundError(f"no such file: {path} (in the legacy reference {str(reference)!r})")
        return
    path = Path(str(reference))
    if path.exists():
        if is_efml_directory(path):
            try:
                check_efml_directory(path)
            except EfmlFormatError as err:
                raise ModelNotFoundError(str(err)) from None
            return
        config = path / "config.json"
        if not config.is_file():
            raise ModelNotFoundError(
                f"{path}: not an ELMo model: expected config.json + model.safetensors (HF layout), "
                "options.json + lm_weights.hdf5 (legacy layout) or an ELMoForManyLangs directory "
                "(config.json naming its architecture, char.dic, token_embedder.pkl, encoder.pkl)"
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


def local_reference(reference: str | Path, progress: bool = True) -> str:
    """`reference` with URLs replaced by their downloaded copies (see `spacy_elmo.formats.download`)."""
    from .download import fetch, is_url

    text = str(reference)
    return fetch(text, progress=progress) if is_url(text) else text


def load_pretrained(reference: str | Path, *, lang: str | None = None, progress: bool = True, **kwargs):
    """(`ElmoModel` in eval mode, `ElmoTokenizer`) for a model reference (see the module docstring).

    lang: the spaCy language of the tokenizer for references that do not record one (legacy and
    EFML files: default "en" and "xx"). kwargs go to `ElmoModel.from_pretrained` (HF directories
    and hub ids). A reference that names no model fails at once with one line (`ModelNotFoundError`).
    """
    from ..hf.model_directory import default_tokenizer
    from ..hf.modeling_elmo import ElmoModel
    from ..hf.tokenization_elmo import ElmoTokenizer
    from .efml import is_efml_directory, load_efml

    reference = local_reference(reference, progress)
    check_reference(reference)
    legacy = resolve_legacy(reference)
    if legacy is not None:
        model = load_legacy(*legacy)
        return model, ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token, lang=lang or "en")
    path = Path(reference)
    if is_efml_directory(path):
        return load_efml(path, lang=lang or "xx")
    if not path.exists():
        kwargs = {**hub_loading_kwargs(reference), **kwargs}
    model = ElmoModel.from_pretrained(reference, **kwargs).eval()
    if path.exists():
        tokenizer = ElmoTokenizer.from_pretrained(reference) if (path / "tokenizer_config.json").is_file() else None
    else:
        try:
            tokenizer = ElmoTokenizer.from_pretrained(reference, local_files_only=kwargs.get("local_files_only", False))
        except OSError:  # a hub repository without tokenizer files
            tokenizer = None
    tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model)
    try:
        tokenizer.check_model(model.config)
    except ValueError as err:
        raise ModelNotFoundError(f"{reference}: {err}") from None
    return model, tokenizer


def load_model(reference: str | Path, **kwargs):
    """The `ElmoModel` of `load_pretrained` (its tokenizer: `load_pretrained(...)[1]`)."""
    return load_pretrained(reference, **kwargs)[0]
