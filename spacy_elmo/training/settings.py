"""The settings of a pretraining run: a confection config checked against a pydantic schema.

This is the validation spaCy itself uses: the config file (plus `--section.key value` overrides)
is parsed by confection and validated with `Config.validate(schema)` against the pydantic models
below (strict types, ranges and choices per setting, unknown sections and keys forbidden). The
`[model]` section's keys and types are derived from `ElmoConfig`'s dataclass fields, so a new
architecture field becomes a setting without being listed here. Every problem is reported in one
line that names the setting, what was expected and what was found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from ..constants import DEFAULT_DEVICE, Device


class PretrainError(ValueError):
    """A run cannot start: bad settings, unusable output directory, missing data or checkpoint."""


class TrainingDiverged(RuntimeError):
    """The loss or the gradient became NaN/inf; training stopped without saving the bad state."""


# --------------------------------------------------------------------------------------------------
# Schema


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PathsSettings(_Section):
    train: str | None = None  # file, directory, glob, or comma-separated list
    heldout: str | None = None
    vocab: str | None = None
    init_from: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _path_to_str(cls, value):
        return os.fspath(value) if isinstance(value, os.PathLike) else value


class SystemSettings(_Section):
    seed: int = Field(0, ge=0)
    threads: int = Field(0, ge=0)  # 0 = torch's default
    device: Device = DEFAULT_DEVICE


class DataSettings(_Section):
    format: Literal["tokenized", "text"] = "tokenized"  # "text": the spaCy tokenizer of `lang`
    lang: str = "en"
    min_count: int = Field(1, ge=1)  # words seen fewer times are <UNK> (as targets)
    max_vocab: int = Field(0, ge=0)  # at most this many ids, specials included (0 = no limit)
    max_tokens: int = Field(100, ge=1)  # longer lines are split into sequences of this many words
    max_line_bytes: int = Field(1 << 20, ge=16)  # longer lines are cut
    batch_tokens: int = Field(2048, ge=1)  # padded words per process and step (rows × longest row)
    block_lines: int = Field(10000, ge=1)  # lines read, shuffled and bucketed by length together
    shuffle: bool = True
    # "utf8": characters are UTF-8 bytes (bilm-tf); "lexicon": a character lexicon built from the
    # training text (characters seen char_min_count times; the rest are unknown), as ELMoForManyLangs
    characters: Literal["utf8", "lexicon"] = "utf8"
    char_min_count: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _sequence_fits_batch(self):
        if self.max_tokens > self.batch_tokens:
            raise ValueError(
                f"data.max_tokens: expected at most data.batch_tokens ({self.batch_tokens}), found {self.max_tokens}"
            )
        return self


class TrainingSettings(_Section):
    max_steps: int = Field(1000, ge=0)  # 0 = until max_epochs
    max_epochs: int = Field(0, ge=0)  # 0 = no limit
    optimizer: Literal["adagrad", "adam"] = "adagrad"
    learning_rate: float = Field(0.2, gt=0)
    lr_schedule: Literal["constant", "linear"] = "constant"  # linear: decays to 0 at max_steps
    lr_decay_start: float = Field(0.5, ge=0, lt=1)  # fraction of max_steps where the decay begins
    warmup_steps: int = Field(0, ge=0)  # linear warm-up from 0 over this many steps
    adagrad_initial_accumulator: float = Field(1.0, ge=0)
    # typing's List, not list[float]: see _confection_readable
    adam_betas: typing.List[float] = Field([0.9, 0.999], min_length=2, max_length=2)  # noqa: UP006
    adam_eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    clip_norm: float = Field(10.0, ge=0)  # global gradient norm (0 = no clipping)
    # fp32, or bf16 autocast for the forward pass (matrix products in bf16, master weights, optimizer
    # state and the LSTM cell math in fp32): ~2x the words/s of fp32 on recent GPUs
    precision: Literal["fp32", "bf16"] = "fp32"
    softmax: Literal["auto", "full", "sampled"] = "auto"  # auto: full up to full_softmax_max_vocab ids
    full_softmax_max_vocab: int = Field(32768, ge=1)
    n_negative_samples: int = Field(8192, ge=1)
    checkpoint_every: int = Field(500, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    eval_every: int = Field(0, ge=0)  # 0 = evaluate on paths.heldout at the end only
    eval_batch_tokens: int = Field(4096, ge=1)
    log_every: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _has_an_end(self):
        if self.max_steps <= 0 and self.max_epochs <= 0:
            raise ValueError("training.max_steps: expected > 0 or training.max_epochs > 0, found both 0")
        if self.lr_schedule == "linear" and self.max_steps <= 0:
            raise ValueError(
                "training.lr_schedule: 'linear' expected training.max_steps > 0 (it decays to 0 there), found 0"
            )
        return self


class ExportSettings(_Section):
    legacy: bool = False  # also write legacy/options.json, lm_weights.hdf5 and vocab.txt


# `[model]`: ElmoConfig's own dataclass fields, except those a pretraining run sets itself.
MODEL_EXCLUDED = {
    "vocab_size": "set from the vocabulary",
    "num_output_representations": "the LM loss uses no scalar mix",
    "scalar_mix_layer_norm": "the LM loss uses no scalar mix",
    "lstm_implementation": "training takes the auto rule (the fused kernel, eager under autocast)",
    "char_vocab_size": 'set from the character lexicon (data.characters = "lexicon")',
    "word_vocab_size": "set from the vocabulary when word_embedding_dim > 0",
}


def _confection_readable(annotation: Any) -> Any:
    """`list[X]` (nested too) as `typing.List[X]`, the same type to pydantic and confection. Python 3.10 takes a
    builtin generic alias for a class (`isinstance(list[int], type)` is true there, not on 3.11), and confection's
    schema reading then calls `issubclass` on it, which raises."""
    if isinstance(annotation, types.GenericAlias) and annotation.__origin__ is list:
        (item,) = get_args(annotation)
        return typing.List[_confection_readable(item)]  # type: ignore[misc]  # noqa: UP006
    return annotation


def _model_fields() -> dict[str, tuple[Any, Any]]:
    from ..compat import base_config_fields
    from ..hf.configuration_elmo import ElmoConfig

    namespace = vars(sys.modules[ElmoConfig.__module__])
    inherited = base_config_fields()
    fields = {}
    for field in dataclasses.fields(ElmoConfig):
        if field.name in inherited or field.name in MODEL_EXCLUDED:
            continue
        annotation = eval(field.type, namespace) if isinstance(field.type, str) else field.type  # noqa: S307
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            raise TypeError(f"ElmoConfig.{field.name} has no default")
        fields[field.name] = (_confection_readable(annotation), default)
    return fields


def _check_model(self):
    """The set keys must make a valid ElmoConfig (its own checks: sizes, filters, ranges)."""
    from ..hf.configuration_elmo import ElmoConfig, config_error_message

    values = self.model_dump(exclude_unset=True)
    if values.get("word_embedding_dim"):  # pretraining sets the size from its vocabulary
        values["word_vocab_size"] = 3
    try:
        ElmoConfig(**values)
    except Exception as err:  # ValueError / huggingface_hub's StrictDataclass errors
        raise ValueError(f"[model] {config_error_message(err)}") from None
    return self


# (pydantic types __validators__ as plain functions; its documented use passes decorated ones, as here)
ModelSettings = create_model(  # type: ignore[call-overload]
    "ModelSettings",
    __base__=_Section,
    __validators__={"_valid_elmo": model_validator(mode="after")(_check_model)},
    **_model_fields(),
)
MODEL_KEYS = tuple(ModelSettings.model_fields)


class PretrainSettings(BaseModel):
    """A whole pretraining config: every section optional, every key checked."""

    model_config = ConfigDict(extra="forbid", strict=True)
    paths: PathsSettings = PathsSettings()
    system: SystemSettings = SystemSettings()
    data: DataSettings = DataSettings()
    model: ModelSettings = ModelSettings()
    training: TrainingSettings = TrainingSettings()
    export: ExportSettings = ExportSettings()

    def to_config(self):
        """The confection `Config` of these settings (what a run saves as pretrain.cfg): every section
        complete; `[model]` holds only the keys the config sets (the rest are ElmoConfig's defaults,
        or the pretrained model's when fine-tuning)."""
        from confection import Config

        full = self.model_dump()
        full["model"] = self.model.model_dump(exclude_unset=True)
        return Config(full)


# (every field of PretrainSettings is a section model)
SECTIONS: dict[str, type[BaseModel]] = {
    name: cast(type[BaseModel], field.annotation) for name, field in PretrainSettings.model_fields.items()
}
# Every setting with its default (the `[model]` defaults are ElmoConfig's).
DEFAULTS: dict[str, dict[str, Any]] = {name: schema().model_dump() for name, schema in SECTIONS.items()}
# Settings a resumed run must share with the run that wrote the checkpoint.
RESUME_FIXED = ("data", "system.seed")


# --------------------------------------------------------------------------------------------------
# Reading


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """`--section.key value` / `--section.key=value` command-line pairs → {"section.key": value}.

    spaCy's own parser, the one `spacy train` uses: values are read as JSON when they parse
    (numbers, true/false, null, lists), else as strings; a key without a value is `true`.
    spaCy's SPACY_CONFIG_OVERRIDES variable is not read (its keys are meant for `spacy train`).
    """
    from click.exceptions import NoSuchOption
    from spacy.cli._util import parse_config_overrides

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # spaCy prints its own message before exiting
            return parse_config_overrides(list(args), env_var=None)
    except (NoSuchOption, SystemExit):
        raise PretrainError(
            f"config overrides look like --section.key value or --section.key=value, found: {shlex.join(args)}"
        ) from None


def _describe(errors: list[dict]) -> list[str]:
    """pydantic errors → one "section.key: expected …, found …" per setting (a union's branches merged)."""
    merged: dict[str, tuple[list[str], Any]] = {}
    for error in errors:
        # a union reports one error per branch, with the branch's type in `loc`: drop it
        loc = ".".join(str(part) for part in error.get("loc", ()) if not re.search(r"[\[\]]", str(part)))
        message, found, kind = str(error.get("msg", "")), error.get("input"), error.get("type", "")
        if kind == "extra_forbidden":
            section, _, key = loc.partition(".")
            if not key:
                message = f"unknown section (expected one of {', '.join(SECTIONS)})"
                loc = f"[{section}]"
            else:
                known = ", ".join(SECTIONS[section].model_fields) if section in SECTIONS else ""
                message = f"unknown setting (expected one of {known})"
        elif message.startswith("Value error, "):  # our validators' messages name setting and values
            message = " ".join(message[len("Value error, ") :].split())
            merged.setdefault(message, ([], None))
            continue
        elif message.startswith("Input should be "):
            message = "expected " + message[len("Input should be ") :]
        expected, _ = merged.setdefault(loc, ([], found))
        expected.append(message.removeprefix("expected ") if expected else message)
    return [f"{loc}: {' or '.join(parts)}, found {found!r}" if parts else loc for loc, (parts, found) in merged.items()]


def validate(config) -> PretrainSettings:
    """Checks a parsed config (confection `Config`) against the schema; PretrainError lists every
    problem, one line each."""
    from confection import Config, ConfigValidationError

    try:
        Config(config).validate(PretrainSettings)
    except ConfigValidationError as err:
        problems = _describe(list(err.errors or [])) or [err.title or "invalid"]
        raise PretrainError("\n".join(f"invalid pretraining config: {problem}" for problem in problems)) from None
    return PretrainSettings.model_validate(dict(config))


def read_settings(
    config_path: str | Path | None, overrides: dict[str, Any] | None = None, text: str | None = None
) -> PretrainSettings:
    """Reads a pretraining config (file or `text`), applies dotted overrides and validates it: the
    typed settings a run reads (`settings.training.max_steps`), defaults filled in."""
    from confection import Config

    overrides = dict(overrides or {})
    for key in overrides:
        section, _, name = key.partition(".")
        if section not in SECTIONS or name not in SECTIONS[section].model_fields:
            where = ", ".join(SECTIONS[section].model_fields) if section in SECTIONS else ", ".join(SECTIONS)
            raise PretrainError(f"unknown config setting {key!r} in overrides (expected one of {where})")
    if text is None:
        if config_path is None:
            raise TypeError("read_settings: pass config_path or text")
        path = Path(config_path)
        if not path.is_file():
            raise PretrainError(f"config file not found: {path}")
        text = path.read_text(encoding="utf-8")
    try:
        config = Config().from_str(text, overrides=overrides)
    except Exception as err:  # confection raises several error types for syntax problems
        reason = " ".join(str(err).split())
        raise PretrainError(f"{config_path or 'config'}: cannot parse ({reason})") from None
    return validate(config)


def load_settings(config_path: str | Path | None, overrides: dict[str, Any] | None = None, text: str | None = None):
    """`read_settings` as a confection `Config` (`PretrainSettings.to_config`): every section
    complete, `[model]` only the keys the config sets."""
    return read_settings(config_path, overrides, text).to_config()


def check_resumable(saved, cfg, checkpoint: Path) -> None:
    """Raises PretrainError if `cfg` (a `Config` or `PretrainSettings`) changes a setting the data
    position depends on (RESUME_FIXED) from the checkpoint's `saved` config."""
    if isinstance(cfg, PretrainSettings):
        cfg = cfg.to_config()
    for dotted in RESUME_FIXED:
        before, now = _get(saved, dotted), _get(cfg, dotted)
        if before != now:
            raise PretrainError(
                f"cannot resume {checkpoint}: [{dotted}] differs from the run that wrote it "
                f"(was {before!r}, now {now!r}); the data position would not match"
            )


def _get(cfg, dotted: str):
    section, _, key = dotted.partition(".")
    return cfg[section] if not key else cfg[section][key]


def learning_rate_at(training: TrainingSettings | dict, step: int) -> float:
    """The rate of optimizer step `step` (1-based): warm-up, then constant or a linear decay to 0.

    A pure function of the step, so a resumed run follows the same schedule exactly.
    """
    if isinstance(training, TrainingSettings):
        training = {
            key: getattr(training, key)
            for key in ("learning_rate", "warmup_steps", "lr_schedule", "max_steps", "lr_decay_start")
        }
    rate = float(training["learning_rate"])
    warmup = training["warmup_steps"]
    if warmup and step <= warmup:
        rate *= step / warmup
    if training["lr_schedule"] == "linear":
        total = training["max_steps"]
        start = int(training["lr_decay_start"] * total)
        if step > start:
            rate *= max(total - step + 1, 0) / (total - start + 1)
    return rate


__all__ = [
    "PretrainError",
    "TrainingDiverged",
    "PretrainSettings",
    "MODEL_KEYS",
    "DEFAULTS",
    "RESUME_FIXED",
    "parse_overrides",
    "read_settings",
    "load_settings",
    "validate",
    "check_resumable",
    "learning_rate_at",
]
