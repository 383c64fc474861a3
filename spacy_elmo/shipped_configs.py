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
from pathlib import Path
from typing import Any

_HEADER = re.compile(r"^\[([^\]]+)\]\s*$")


def shipped_configs() -> dict[str, Path]:
    """The configs installed with the package (spacy_elmo/configs: the repository's configs/), by name."""
    folder = Path(__file__).resolve().parent / "configs"
    return {path.stem: path for path in sorted(folder.glob("*.cfg"))}


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
        last = max((i for i in range(header, end) if i == header or "=" in lines[i] and not lines[i].startswith("#")))
        lines.insert(last + 1, line)
    else:
        stop = found + 1
        while stop < end and lines[stop][:1] in (" ", "\t") and lines[stop].strip():
            stop += 1  # a value continued on indented lines
        lines[found:stop] = [line]
    return "\n".join(lines) + "\n"


def render_config(name: str, *, lang: str | None = None, gpu: bool = False, overrides: dict[str, Any] | None = None) -> str:
    """The text of shipped config `name` with the given changes, checked by the tool that reads it.

    lang: the spaCy language (`[nlp] lang` of a spaCy config, `[data] lang` of a pretraining one).
    gpu: a spaCy config allocates GPU memory through PyTorch (`[system] gpu_allocator`), a
        pretraining config trains on CUDA (`[system] device`).
    overrides: {"section.key": value}, e.g. {"paths.elmo": "my_elmo"}.
    """
    text = find_config(name).read_text(encoding="utf-8")
    spacy_config = is_spacy_config(text)
    changes = dict(overrides or {})
    if lang is not None:
        changes["nlp.lang" if spacy_config else "data.lang"] = lang
    if gpu:
        changes.update({"system.gpu_allocator": "pytorch"} if spacy_config else {"system.device": "cuda"})
    for dotted, value in changes.items():
        text = set_setting(text, dotted, value, must_exist=spacy_config)
    if spacy_config:
        from confection import Config

        Config().from_str(text, interpolate=False)  # still parses
    else:
        from .training.settings import load_settings

        load_settings(None, text=text)  # one line per bad setting
    return text


__all__ = ["find_config", "is_spacy_config", "render_config", "set_setting", "shipped_configs"]
