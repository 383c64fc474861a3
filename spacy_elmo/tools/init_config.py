"""The configs that ship with the package, and `spacy-elmo init-config`: one of them with a few
settings changed in place, its comments kept.

The spaCy configs (`ner_elmo`, `tagger_baseline`, …) are complete, as `spacy init fill-config`
would write them, so `spacy debug config` and `spacy train` take them as they are. The pretraining
configs (`pretrain_small`, …) set what differs from the defaults of `spacy-elmo pretrain`, which
validates them against its schema. Only the standard library is imported at module level.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spacy.language import Language

_HEADER = re.compile(r"^\[([^\]]+)\]\s*$")


def configs_folder() -> Path:
    """Where the shipped configs are: spacy_elmo/configs in an installed wheel (setup.cfg maps the
    repository's configs/ there), the repository's configs/ itself in a checkout or editable install."""
    package = Path(__file__).resolve().parents[1]
    wheel, checkout = package / "configs", package.parent / "configs"
    return wheel if wheel.is_dir() else checkout


def shipped_configs() -> dict[str, Path]:
    """The configs installed with the package (see `configs_folder`), by name."""
    return {path.stem: path for path in sorted(configs_folder().glob("*.cfg"))}


def find_config(name: str) -> Path:
    """The shipped config called `name` (with or without `.cfg`), or a ValueError listing them."""
    configs = shipped_configs()
    stem = name[: -len(".cfg")] if name.endswith(".cfg") else name
    if stem not in configs:
        raise ValueError(f"no shipped config {name!r}; shipped: {', '.join(configs)}")
    return configs[stem]


def is_spacy_config(text: str) -> bool:
    """Whether a config is a spaCy training config (it has an [nlp] section) rather than a pretraining one."""
    return any(_HEADER.match(line) and line.strip() == "[nlp]" for line in text.splitlines())


def _render(value: Any) -> str:
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return value  # a reference to another setting
    return json.dumps(value)


def set_setting(text: str, dotted: str, value: Any, *, must_exist: bool) -> str:
    """`text` with `[section] key = value` for `dotted` = "section.key" (the section may be dotted
    itself), changed on its own line; other lines, comments included, stay as they are. A setting
    that is not there is added to its section (and the section to the end), unless `must_exist`."""
    section, _, key = dotted.rpartition(".")
    if not section or not key:
        raise ValueError(f"config override {dotted!r}: expected --section.key value")
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip() == f"[{section}]"), None)
    line = f"{key} = {_render(value)}"
    if header is None:
        if must_exist:
            raise ValueError(f"config override {dotted!r}: the config has no [{section}] section")
        return text.rstrip("\n") + f"\n\n[{section}]\n{line}\n"
    end = next((i for i in range(header + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
    setting = re.compile(rf"^{re.escape(key)}\s*=")
    found = next((i for i in range(header + 1, end) if setting.match(lines[i])), None)
    if found is None:
        if must_exist:
            raise ValueError(f"config override {dotted!r}: [{section}] has no setting {key!r}")
        last = max(i for i in range(header, end) if i == header or "=" in lines[i] and not lines[i].startswith("#"))
        lines.insert(last + 1, line)
    else:
        stop = found + 1
        while stop < end and lines[stop][:1] in (" ", "\t") and lines[stop].strip():
            stop += 1  # a value continued on indented lines
        lines[found:stop] = [line]
    return "\n".join(lines) + "\n"


def replace_section(text: str, section: str, block: str) -> str:
    """`text` with [section] and its subsections replaced by `block` (config text that starts with
    `[section]`); the other lines stay as they are. A section that is not there is added at the end."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"[{section}]"), None)
    new = block.strip("\n").splitlines()
    if start is None:
        return text.rstrip("\n") + "\n\n" + "\n".join(new) + "\n"

    def inside(line: str) -> bool:
        match = _HEADER.match(line)
        return match is None or match.group(1) == section or match.group(1).startswith(section + ".")

    end = next((i for i in range(start + 1, len(lines)) if not inside(lines[i])), len(lines))
    return "\n".join(lines[:start] + new + ([""] if end < len(lines) else []) + lines[end:]) + "\n"


def language_class(lang: str) -> type[Language]:
    """spaCy's Language subclass for `lang`, or a ValueError in one line."""
    import spacy

    try:
        return spacy.util.get_lang_class(lang)
    except (ImportError, AttributeError):
        raise ValueError(
            f"--lang {lang!r}: spaCy has no such language (expected a code of spacy.lang, e.g. en, de, zh, ja, xx)"
        ) from None


def language_tokenizer(lang: str) -> dict[str, str]:
    """The [nlp.tokenizer] and [initialize.tokenizer] sections of spaCy's default config for `lang`
    (what `spacy init config --lang` writes), as config text by section name."""
    from confection import Config

    defaults = language_class(lang).default_config
    blocks = {}
    for section in ("nlp.tokenizer", "initialize.tokenizer"):
        top, key = section.split(".")
        text = Config({top: {key: defaults[top][key]}}).to_str(interpolate=False)
        blocks[section] = text[text.index(f"[{section}]") :]
    return blocks


def _setting_error(tokenizer: str, error: dict) -> str:
    """One setting's error from confection, with the allowed values where the setting is an Enum
    (e.g. `segmenter` of spacy.zh.ChineseTokenizer: char, jieba, pkuseg)."""
    import enum
    import inspect

    from spacy.util import registry

    key = ".".join(map(str, error["loc"][1:]))
    text = f"{key}: {error['msg']}"
    try:
        kind = inspect.signature(registry.get("tokenizers", tokenizer)).parameters[key].annotation
    except (
        KeyError,
        ValueError,
        TypeError,
    ):  # not registered (catalogue's RegistryError is a ValueError), no such parameter
        return text
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        text += f" (expected one of {', '.join(str(m.value) for m in kind)})"
    return text


def _check_tokenizer(text: str) -> None:
    """Builds the config's tokenizer, as `spacy train` will: a segmenter whose package is missing
    (jieba, SudachiPy for ja, …) fails here, in one line, rather than when training starts."""
    import spacy
    from confection import Config, ConfigValidationError

    nlp_section = Config().from_str(text, interpolate=False)["nlp"]
    lang = nlp_section["lang"]
    language_class(lang)
    name = nlp_section["tokenizer"].get("@tokenizers")
    try:
        spacy.blank(lang, config={"nlp": {"tokenizer": nlp_section["tokenizer"]}})
    except ConfigValidationError as error:
        found = "; ".join(_setting_error(name, e) for e in error.errors or [])
        raise ValueError(f"[nlp.tokenizer] {name}: {found or error.title}") from None
    except ImportError as error:
        raise ValueError(
            f"[nlp.tokenizer] {name} (language {lang!r}) needs a package not installed here: "
            f"{' '.join(str(error).split())}"
        ) from None


def _check_transformers(text: str) -> None:
    """The transformer each spacy-transformers model of the config names (`[components.X.model] name`,
    e.g. `${paths.transformer}`) is a local folder, or a hub id cached or on the hub (asked once):
    else one line here, rather than transformers' tracebacks when training starts. What the folder
    holds is for spacy-transformers to check, and its errors stay its own."""
    from confection import Config

    from ..hf.sources import ModelNotFoundError, locate_any_model

    raw = Config().from_str(text, interpolate=False)
    config = Config().from_str(text)
    for name, component in config.get("components", {}).items():
        model = component.get("model")
        if not isinstance(model, dict) or not str(model.get("@architectures", "")).startswith(
            "spacy-transformers.TransformerModel"
        ):
            continue
        transformer = model.get("name")
        if transformer is None:  # not given yet: spacy train asks for it
            continue
        given = re.fullmatch(r"\$\{(paths\.\w+)\}", str(raw["components"][name]["model"].get("name")))
        setting = f"--{given.group(1)}" if given else f"[components.{name}.model] name"  # as the user set it
        try:
            locate_any_model(str(transformer))
        except ModelNotFoundError as err:
            raise ModelNotFoundError(f"{setting} {transformer!r}: {err}") from None


def render_config(
    name: str, *, lang: str | None = None, gpu: bool = False, overrides: dict[str, Any] | None = None
) -> str:
    """The text of shipped config `name` with the given changes, checked by the tool that reads it.

    lang: the spaCy language (`[nlp] lang` of a spaCy config, `[data] lang` of a pretraining one).
        A spaCy config gets that language's own tokenizer too ([nlp.tokenizer] and
        [initialize.tokenizer] from spaCy's defaults for it, as `spacy init config` writes them:
        e.g. spacy.zh.ChineseTokenizer for zh); an `nlp.lang` override does the same.
    gpu: a spaCy config allocates GPU memory through PyTorch (`[system] gpu_allocator`), a
        pretraining config trains on CUDA (`[system] device`).
    overrides: {"section.key": value}, e.g. {"paths.elmo": "my_elmo"}; applied after `lang`, so
        they can change its tokenizer's settings (e.g. {"nlp.tokenizer.segmenter": "jieba"}).
    """
    text = find_config(name).read_text(encoding="utf-8")
    spacy_config = is_spacy_config(text)
    changes = dict(overrides or {})
    if spacy_config:
        lang = changes.pop("nlp.lang", lang)  # the override, as set later, wins over --lang
    if lang is not None:
        language_class(lang)
        if spacy_config:
            text = set_setting(text, "nlp.lang", lang, must_exist=True)
            for section, block in language_tokenizer(lang).items():
                text = replace_section(text, section, block)
        else:
            changes["data.lang"] = lang
    if gpu:
        changes.update({"system.gpu_allocator": "pytorch"} if spacy_config else {"system.device": "cuda"})
    for dotted, value in changes.items():
        text = set_setting(text, dotted, value, must_exist=spacy_config)
    if spacy_config:
        _check_tokenizer(text)  # parses it too
        _check_transformers(text)
    else:
        from ..training.settings import load_settings

        load_settings(None, text=text)  # one line per bad setting
    return text


def write_config(
    name: str,
    output: Path,
    *,
    lang: str | None = None,
    gpu: bool = False,
    overrides: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """`spacy-elmo init-config`: `render_config`'s text written to `output` ('-': standard output),
    its folders made; an existing file is kept unless `overwrite` (`files.check_output`, checked
    before the config is rendered). Returns the shipped config used."""
    import os

    from ..files import check_output, made_folders, start_temporary, temporary_sibling

    if str(output) == "-":
        sys.stdout.write(render_config(name, lang=lang, gpu=gpu, overrides=overrides))
        return find_config(name)
    output = check_output(output, overwrite=overwrite)
    with made_folders(output.parent), temporary_sibling(output) as tmp:
        start_temporary(tmp, output)  # (writable: before the config is rendered)
        text = render_config(name, lang=lang, gpu=gpu, overrides=overrides)
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, output)
    return find_config(name)


__all__ = [
    "find_config",
    "is_spacy_config",
    "language_tokenizer",
    "render_config",
    "replace_section",
    "set_setting",
    "shipped_configs",
    "write_config",
]
