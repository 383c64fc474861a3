"""A model reference, parsed once into a typed value that checks and loads itself.

The text naming a model is one of (`parse_reference` tells which, looking only at the text and
at which files exist):

- `UrlReference`: an `https://` URL of an archive of a model folder, or a pair of URLs of legacy
  files, downloaded once into the cache (`spacy_elmo.formats.download`) and then read as the
  local reference it becomes;
- `LegacyPair`: AllenNLP / bilm-tf files, "OPTIONS.json,WEIGHTS.hdf5" or a folder holding
  options.json and *.hdf5 (and no config.json);
- `EfmlFolder`: an ELMoForManyLangs model folder;
- `HfFolder`: a local path, existing or not, meant as a model folder (config.json +
  model.safetensors + tokenizer files);
- `HubId`: `owner/name` where no such local path exists, a Hugging Face hub repository.

Each kind has `str()`, the text as the user gave it (what messages name), `check() -> Checked`,
cheap (no weights read, no download, no network), and `load(checked=..., lang=..., progress=...,
**kwargs) -> (ElmoModel, ElmoTokenizer)`, which checks first unless handed what `check` found (so a
model's files are checked once per load, however many faces ask) and fits the tokenizer to the model
(`fit_tokenizer`, the one place that check is made for a loaded biLM). An HF folder and a hub id
resolve to the local folder of their files (`hf.sources.ModelFolder`: a hub id's snapshot, after one
request to the hub), which the model loads from, keeping the name the user gave. Each also answers
what the commands ask of a model instead of re-reading its text: `describe()` (what a model card
says it was converted from), `vocabulary_files()` (where a `vocab.txt` may be, for `spacy-elmo
similar`) and `lstm_layers()` (L, from the config without the weights, where it is at hand: the
bound of `similar --layer`). Every problem is one line: `ModelNotFoundError`, or its subclass
`ModelAbsentError` when nothing is at the reference (no such file or folder; a hub id not in the
local cache while offline); legacy files that are there but broken raise `LegacyFormatError` and a
malformed URL `DownloadError`, as their readers do (the CLI prints each as one line and exits 2).
The spaCy component needs that difference: a saved pipeline's config still names the files its biLM
came from after they are gone, so a reference to nothing is not an error until the weights are needed.

A new format is one new kind here (its reader in its own module, as `legacy` and `efml`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..compat import hub_offline
from ..constants import (
    CONFIG_FILE,
    EFML_CHAR_LEXICON_FILE,
    EFML_WEIGHT_FILES,
    LEGACY_OPTIONS_FILE,
    LEGACY_WEIGHTS_FILE,
    TOKENIZER_CONFIG_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
    WEIGHTS_INDEX,
)
from ..hf import sources
from ..hf.sources import ModelFolder
from .legacy import LegacyFormatError

# the errors of a reference that names no model: defined with the model's own loading (`hf.sources`,
# which `from_pretrained` raises them from), named here for the commands and faces
ModelNotFoundError = sources.ModelNotFoundError
ModelAbsentError = sources.ModelAbsentError
is_hub_id = sources.is_hub_id


@dataclass(frozen=True)
class UrlReference:
    """One URL of a model archive, or "URL_options,URL_weights" (a part may be a local file).
    `parts`: the text split once (`download.reference_parts`)."""

    url: str
    parts: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.parts:
            from .download import reference_parts

            object.__setattr__(self, "parts", tuple(reference_parts(self.url)))

    def check(self) -> Checked:
        """The URL's form (archive suffix, `#sha256=` fragment); makes no request. Raises
        `DownloadError` (one line). (The files are checked once downloaded, by the local reference.)"""
        from .download import check_url_parts

        check_url_parts(self.parts)
        return Checked(self)

    def local(self, *, progress: bool = True) -> ModelReference:
        """The local reference it becomes: downloaded (once, into the cache) and parsed."""
        from .download import fetch_parts

        self.check()
        return parse_reference(fetch_parts(self.parts, progress=progress))

    def load(self, *, checked: Checked | None = None, lang: str | None = None, progress: bool = True, **kwargs):
        """The local reference's `load`. A cached copy that its reader finds broken (one line naming
        the file) is downloaded again, once; a fresh download that is broken is reported, with the URL."""
        from .download import forget, is_cached

        if checked is None:
            self.check()
        if is_cached(self.parts):
            try:
                return self.local(progress=progress).load(lang=lang, progress=progress, **kwargs)
            except (ModelNotFoundError, ValueError):  # the readers' errors: a damaged copy
                forget(self.parts)
        try:
            return self.local(progress=progress).load(lang=lang, progress=progress, **kwargs)
        except (ModelNotFoundError, ValueError) as err:
            raise ModelNotFoundError(f"{err} (downloaded from {self.url})") from None

    def describe(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def vocabulary_files(self) -> list[Path]:
        """Those of the local reference it becomes (fetched if not cached)."""
        return self.local(progress=False).vocabulary_files()

    def lstm_layers(self) -> int | None:
        """Unknown until downloaded (None): the load tells."""
        return None


@dataclass(frozen=True)
class LegacyPair:
    """options.json and the hdf5 weights (None: a folder holding options.json and no .hdf5)."""

    options: Path
    weights: Path | None

    def check(self) -> Checked:
        """Both files are there (else `ModelNotFoundError`), options.json is a valid config and the
        hdf5 file opens, no weights read (else `LegacyFormatError`, naming the file)."""
        from .legacy import check_legacy

        if self.weights is None:
            raise LegacyFormatError(
                f"{self.options.parent / LEGACY_WEIGHTS_FILE}: no such file; {self.options.parent} has "
                f"{LEGACY_OPTIONS_FILE} but no .hdf5 weights file"
            )
        files = {"options": self.options, "weights": self.weights}
        # neither file there: the pair names nothing (ModelAbsentError); one of them: a broken pair
        absent = ModelAbsentError if not any(path.exists() for path in files.values()) else ModelNotFoundError
        for role, path in files.items():
            if path.is_dir():
                raise ModelNotFoundError(f"{path}: is a directory, expected the legacy {role} file")
            if not path.is_file():
                raise absent(f"no such file: {path} (the legacy {role} file)")
        check_legacy(self.options, self.weights)
        return Checked(self)

    def load(self, *, checked: Checked | None = None, lang: str | None = None, progress: bool = True, **kwargs):
        """kwargs (`from_pretrained` arguments) do not apply to legacy files."""
        from ..hf.tokenization_elmo import ElmoTokenizer
        from .legacy import load_legacy

        if checked is None:
            self.check()
        assert self.weights is not None  # (check: a folder without weights fails)
        model = load_legacy(self.options, self.weights)
        tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token, lang=lang or "en")
        return model, fit_tokenizer(model, tokenizer, source=str(self.options))

    def describe(self) -> str:
        from .legacy import describe_legacy

        return describe_legacy(self.options, self.weights)

    def __str__(self) -> str:
        return str(self.options) if self.weights is None else f"{self.options},{self.weights}"

    def vocabulary_files(self) -> list[Path]:
        return [self.options.parent / VOCAB_FILE]

    def lstm_layers(self) -> int | None:
        """The biLSTM's layers, L (options.json's lstm.n_layers), read without the weights."""
        from .legacy import config_from_options

        return config_from_options(self.options).num_layers


@dataclass(frozen=True)
class EfmlFolder:
    """An ELMoForManyLangs model folder (its config.json names the architecture json)."""

    path: Path

    def check(self) -> Checked:
        """The architecture is found and supported, and every file the runtime reads is there."""
        from .efml import EfmlFormatError, check_efml_directory

        try:
            check_efml_directory(self.path)
        except EfmlFormatError as err:
            raise ModelNotFoundError(str(err)) from None
        return Checked(self)

    def load(self, *, checked: Checked | None = None, lang: str | None = None, progress: bool = True, **kwargs):
        """lang: the spaCy language of the tokenizer (default "xx": the folder does not say)."""
        from .efml import load_efml

        if checked is None:
            self.check()
        model, tokenizer = load_efml(self.path, lang=lang or "xx")
        return model, fit_tokenizer(model, tokenizer, source=str(self.path))

    def describe(self) -> str:
        from .efml import describe_efml

        return describe_efml(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def vocabulary_files(self) -> list[Path]:
        return [self.path / VOCAB_FILE]

    def lstm_layers(self) -> int | None:
        """The biLSTM's layers, L (the architecture's encoder.n_layers), read without the weights."""
        from .efml import read_architecture
        from .efml_config import EfmlArchitecture

        return EfmlArchitecture.read(*read_architecture(self.path)).encoder.n_layers


@dataclass(frozen=True)
class HfFolder:
    """A local path (as written: messages quote it) meant as a model folder; it may not exist."""

    text: str

    @property
    def path(self) -> Path:
        return Path(self.text)

    def check(self) -> Checked:
        """The folder exists, its config.json is an ELMo config and its files pass the cheap check
        of a model directory (`model_directory.check_directory`: no tensor read)."""
        path = self.path
        if not path.exists():
            raise ModelAbsentError(f"no such directory: {self.text}")
        if not path.is_dir():
            raise ModelNotFoundError(f"{path}: is a file; {_EXPECTED}")
        try:
            os.listdir(path)
        except OSError as err:  # (what it holds cannot be told: say so, not which file it lacks)
            raise ModelNotFoundError(f"{path}: cannot read this folder ({err.strerror or err})") from None
        if not (path / CONFIG_FILE).is_file():
            raise ModelNotFoundError(_not_a_model_folder(path))
        return Checked(self, check_folder(ModelFolder(path, self.text)))

    def load(self, *, checked: Checked | None = None, lang: str | None = None, progress: bool = True, **kwargs):
        """kwargs go to `ElmoModel.from_pretrained` (a `subfolder` of the folder is checked and read
        instead); the tokenizer is the folder's (the UTF-8 one for a folder without tokenizer files),
        its spaCy language `lang` when given."""
        folder: ModelFolder | None
        if kwargs.get("subfolder"):
            folder = check_folder(ModelFolder(self.path / kwargs["subfolder"], self.text))
        else:
            folder = (checked if checked is not None else self.check()).folder
        assert folder is not None  # (an HF folder's check resolves it)
        return load_folder(folder, lang=lang, **kwargs)

    def describe(self) -> str:
        return f"`{self.path.name}`"

    def __str__(self) -> str:
        return self.text

    def vocabulary_files(self) -> list[Path]:
        return [self.path / VOCAB_FILE]

    def lstm_layers(self) -> int | None:
        """The biLSTM's layers, L (config.json's num_layers), read without the weights."""
        from ..hf.model_directory import read_config

        return read_config(self.path).num_layers


@dataclass(frozen=True)
class HubId:
    """`owner/name` of a Hugging Face hub repository, where no such local path exists."""

    repo_id: str

    def check(self) -> Checked:
        """In the local cache: its config.json is an ELMo config and, where its weights are cached, the
        snapshot passes the cheap check of a model directory (a damaged copy is one line naming the
        file and how to fetch it again). Not cached: an error offline (HF_HUB_OFFLINE), else nothing to
        check without asking the hub (`load` asks it, once)."""
        cached = sources.cached_snapshot(self.repo_id)
        if cached is None:
            if hub_offline():
                raise sources.absent(self.repo_id, "HF_HUB_OFFLINE is set")
            return Checked(self)
        _check_elmo_config(cached.path / CONFIG_FILE)
        if not any((cached.path / name).exists() for name in (WEIGHTS_FILE, WEIGHTS_INDEX)):
            return Checked(self)  # the weights are not downloaded yet: `load` fetches and checks them
        return Checked(self, check_folder(cached))

    def load(self, *, checked: Checked | None = None, lang: str | None = None, progress: bool = True, **kwargs):
        """kwargs go to `ElmoModel.from_pretrained` (those that say where the files come from, e.g.
        `revision`, to `sources.hub_snapshot`); the tokenizer is the repository's (the UTF-8 one for
        a repository without tokenizer files), its spaCy language `lang` when given. The hub is
        asked once (no retries): the snapshot its answer names is checked once (not again where
        `checked` checked it) and read."""
        if checked is None:
            checked = self.check()
        hub = {name: kwargs[name] for name in (*sources.HUB_ARGUMENTS, "variant", "use_safetensors") if name in kwargs}
        folder = sources.hub_snapshot(self.repo_id, **hub)
        if checked.folder is None or checked.folder.path != folder.path:
            folder = check_folder(folder)
        return load_folder(folder, lang=lang, **kwargs)

    def describe(self) -> str:
        return self.repo_id

    def __str__(self) -> str:
        return self.repo_id

    def vocabulary_files(self) -> list[Path]:
        """The repository's vocab.txt, where the local hub cache has it."""
        found = sources.cached_file(self.repo_id, VOCAB_FILE)
        return [found] if found is not None else []

    def lstm_layers(self) -> int | None:
        """The biLSTM's layers, L, where the local hub cache has its config.json (else None: the load tells)."""
        from ..hf.model_directory import read_config

        cached = sources.cached_file(self.repo_id, CONFIG_FILE)
        return None if cached is None else read_config(cached.parent).num_layers


def check_folder(folder: ModelFolder) -> ModelFolder:
    """`folder`, checked once: its config.json is an ELMo config and its files pass the cheap check of a
    model directory (`model_directory.check_directory`: no tensor read). A problem is one line naming
    the file (for a hub snapshot, with how to download it again)."""
    from ..hf.model_directory import ElmoLoadError, check_directory
    from ..hf.modeling_elmo import ElmoModel

    try:
        _check_elmo_config(folder.path / CONFIG_FILE)
        check_directory(folder.path, ElmoModel)
    except (ModelNotFoundError, ElmoLoadError) as err:
        raise folder.damaged(err) from None
    return folder


def load_folder(folder: ModelFolder, *, lang: str | None = None, **kwargs):
    """(`ElmoModel` in eval mode, its tokenizer) of a folder `check_folder` checked, read without checking
    it again: kwargs go to `ElmoModel.from_pretrained`; the tokenizer is the folder's (the UTF-8 one for
    a folder without tokenizer files), its spaCy language `lang` when given."""
    from ..hf.modeling_elmo import ElmoModel
    from ..hf.tokenization_elmo import ElmoTokenizer

    model = ElmoModel.from_checked_folder(folder, **kwargs).eval()
    settings = folder.path / TOKENIZER_CONFIG_FILE
    tokenizer = None
    if settings.is_file():
        try:
            tokenizer = ElmoTokenizer.from_pretrained(str(folder.path), **_lang_setting(lang))
        except (OSError, ValueError, TypeError) as err:  # its own errors name the file already
            text = " ".join(str(err).split()) or type(err).__name__
            raise ModelNotFoundError(text if text.startswith(str(folder.path)) else f"{settings}: {text}") from None
    return model, fit_tokenizer(model, tokenizer, source=folder.name, lang=lang)


ModelReference = UrlReference | LegacyPair | EfmlFolder | HfFolder | HubId


@dataclass(frozen=True)
class Checked:
    """What a reference's `check` found, to hand to its `load`, which then reads without checking again:
    the reference, and the local folder of its files where the check resolved and checked one (an HF
    folder; a hub id's cached snapshot, which `load` reads if the hub names the same one)."""

    reference: ModelReference
    folder: ModelFolder | None = None


def parse_reference(reference: str | Path | ModelReference) -> ModelReference:
    """The kind of model `reference` names (see the module docstring); a parsed one is returned as
    it is. Reads no weights and asks no network; what the files hold is `check`'s to say."""
    from .download import is_url, reference_parts
    from .efml import is_efml_directory

    if isinstance(reference, ModelReference):
        return reference
    text = str(reference)
    parts = reference_parts(text)
    if any(is_url(part) for part in parts):
        return UrlReference(text, tuple(parts))
    if len(parts) > 1:
        return LegacyPair(Path(parts[0]), Path(",".join(parts[1:])))
    path = Path(text)
    if path.is_dir():
        if (path / LEGACY_OPTIONS_FILE).is_file() and not (path / CONFIG_FILE).is_file():
            found = sorted(path.glob("*.hdf5"), key=lambda w: (w.name != LEGACY_WEIGHTS_FILE, w.name))
            return LegacyPair(path / LEGACY_OPTIONS_FILE, found[0] if found else None)
        if is_efml_directory(path):
            return EfmlFolder(path)
    elif not path.exists() and is_hub_id(text):
        return HubId(text)
    return HfFolder(text)


_EXPECTED = (
    f"expected {CONFIG_FILE} + {WEIGHTS_FILE} (HF layout), {LEGACY_OPTIONS_FILE} + {LEGACY_WEIGHTS_FILE} (legacy "
    f"layout) or an ELMoForManyLangs directory ({CONFIG_FILE} naming its architecture, {EFML_CHAR_LEXICON_FILE}, "
    f"{', '.join(EFML_WEIGHT_FILES)})"
)


def _not_a_model_folder(path: Path) -> str:
    """What a folder without config.json is, as precisely as its files tell."""
    config = path / CONFIG_FILE
    if config.is_dir():
        return f"{config}: is a directory, expected the model's config.json"
    if (path / "config.cfg").is_file() and (path / "meta.json").is_file():
        bilms = sorted(found.parent for found in path.glob("*/bilm/config.json"))
        if bilms:
            return (
                f"{path}: a saved spaCy pipeline, not a biLM folder: its biLM is {bilms[0]} "
                "(give that folder as the model, or load the pipeline with spacy.load)"
            )
        return f"{path}: a saved spaCy pipeline without an elmo component's biLM (elmo/bilm), not a biLM folder"
    if any((path / name).exists() for name in (WEIGHTS_FILE, WEIGHTS_INDEX)):
        return f"{config}: no such file; expected the model's config.json beside its weights"
    options = path / LEGACY_OPTIONS_FILE
    if options.is_dir():
        return f"{options}: is a directory, expected the legacy options.json"
    if any(path.glob("*.hdf5")):
        return f"{options}: no such file; a legacy model folder holds options.json beside its .hdf5 weights"
    return f"{path}: not an ELMo model: {_EXPECTED}"


def _check_elmo_config(config: Path) -> None:
    """A model folder's config.json: a JSON object with model_type "elmo"."""
    from ..hf.configuration_elmo import read_json_object

    model_type = read_json_object(config, ModelNotFoundError).get("model_type")
    if model_type != "elmo":
        raise ModelNotFoundError(f"{config}: not an ELMo model (model_type {model_type!r}, expected 'elmo')")


def _lang_setting(lang: str | None) -> dict:
    return {} if lang is None else {"lang": lang}


def fit_tokenizer(model, tokenizer=None, *, source: str | None = None, lang: str | None = None):
    """The tokenizer a loaded biLM runs with: `tokenizer` (default: the UTF-8 one, for a model
    without a character or word lexicon, in spaCy language `lang` when given), checked against the
    model's config. The one check that a tokenizer fits a biLM: every kind's `load` makes it, and so
    does the spaCy layer for a biLM handed to it (`set_elmo_model`). A misfit is one line:
    `ModelNotFoundError` naming `source` (the files the pair was read from), or `ValueError`
    without one (objects handed over)."""
    from ..hf.model_directory import default_tokenizer
    from ..hf.tokenization_elmo import ElmoTokenizer

    try:
        if (
            tokenizer is None
            and lang is not None
            and not (model.config.char_vocab_size or model.config.word_vocab_size)
        ):
            tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token, lang=lang)
        tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model)
        tokenizer.check_model(model.config)
    except ValueError as err:
        if source is None:
            raise
        raise ModelNotFoundError(f"{source}: {err}") from None
    return tokenizer


def load_pretrained(
    reference: str | Path | ModelReference, *, lang: str | None = None, progress: bool = True, **kwargs
):
    """(`ElmoModel` in eval mode, `ElmoTokenizer`) for a model reference (see the module docstring).

    lang: the spaCy language of the tokenizer (default: the one the reference records; legacy and
    EFML files record none: "en" and "xx"). kwargs go to `ElmoModel.from_pretrained` (HF folders and
    hub ids). A reference that names no model fails at once with one line (`ModelNotFoundError`).
    """
    return parse_reference(reference).load(lang=lang, progress=progress, **kwargs)


def load_model(reference: str | Path | ModelReference, **kwargs):
    """The `ElmoModel` of `load_pretrained` (its tokenizer: `load_pretrained(...)[1]`)."""
    return load_pretrained(reference, **kwargs)[0]


__all__ = [
    "Checked",
    "EfmlFolder",
    "HfFolder",
    "HubId",
    "LegacyPair",
    "ModelAbsentError",
    "ModelNotFoundError",
    "ModelReference",
    "UrlReference",
    "check_folder",
    "fit_tokenizer",
    "is_hub_id",
    "load_folder",
    "load_model",
    "load_pretrained",
    "parse_reference",
]
