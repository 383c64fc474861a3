"""`ElmoConfig`: the sizes and switches of an ELMo biLM (the fields of a legacy options.json, flattened).

Types and choices are checked by huggingface_hub's `@strict` dataclass validation from the
annotations below (`int`, `Literal[...]`, ...) and the per-field validators; `validate_elmo` checks
only what involves several fields. `config_error_message` turns any of these errors into one line.
"""

# (no `from __future__ import annotations`: @strict validates from the evaluated annotations)
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from huggingface_hub.dataclasses import strict, validated_field
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError

from ..compat import SAVES_NAME_OR_PATH, Number, OptionalNumber, PreTrainedConfig
from ..precision import PRECISIONS, Precision, check_precision

# Which code evaluates the biLSTM, as `attn_implementation` chooses attention kernels in HF: a
# run-time choice (a `from_pretrained` / `ElmoConfig` keyword, or set on `model.config`), never
# written to config.json. The table of kernels is `lstm_implementations.LSTM_IMPLEMENTATIONS`.
LstmImplementation = Literal["auto", "eager", "packed", "fused", "cuda_graphs"]
RUNTIME_FIELDS = ("lstm_implementation",)

# How inference computes (`spacy_elmo.precision`: the one list and the one check): an opt-in
# quantization recorded in config.json like HF's `quantization_config`, saved unless "fp32" (so fp32
# directories stay as they were) and bound again by `from_pretrained`: loading never changes it.
# Saved weights stay fp32 in every case (HF's `dtype` is the weights' storage type, a different thing).
# This field is the one store of a model's precision: the model binds it when it is built or loaded
# and when `ElmoModel.set_precision` sets it, the one way to change a built model's precision.
# Setting `config.precision` on a config whose model exists changes what is saved (and what a model
# built from it computes in), not the model: no registry of models, no callbacks.

# A character lexicon (`char_vocab_size` > 0) reserves ids 0-6 (see `spacy_elmo.characters`)
LEXICON_RESERVED_IDS = 7
UTF8_CHAR_ROWS = 262  # id 0 pads a whole token, 1-256 are the bytes, 257-261 the markers

# Run once, by the first ElmoConfig made in this process: `register_auto_classes` puts here the
# registration of ElmoModel and ElmoTokenizer with AutoModel and AutoTokenizer, which imports
# transformers' modeling code (seconds), so that `import spacy_elmo` does not. Every Auto path makes
# the config before it looks up a model or tokenizer class. A callback, not an import: this module
# knows nothing of the model.
ON_FIRST_CONFIG: list[Callable[[], None]] = []


def _first_config_made() -> None:
    if not ON_FIRST_CONFIG:
        return
    # emptied before the calls: a config made while they import the model does not come back here
    callbacks = ON_FIRST_CONFIG[:]
    ON_FIRST_CONFIG.clear()
    try:
        for callback in callbacks:
            callback()
    except BaseException:
        ON_FIRST_CONFIG[:0] = callbacks  # not registered: the next config tries again
        raise


def _at_least(minimum: int):
    def check(value) -> None:
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")

    return check


def _fraction(value) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"must be in [0, 1), got {value}")


def _filters(value) -> None:
    if not value:
        raise ValueError("must list at least one [width, number] pair")
    for pair in value:
        if len(pair) != 2 or min(pair) < 1:
            raise ValueError(f"each filter is a [width, number] pair of positive integers, got {pair}")


def _char_vocab(value) -> None:
    if value != 0 and value < LEXICON_RESERVED_IDS:
        raise ValueError(
            f"is 0 (UTF-8 bytes) or the size of a character lexicon (>= {LEXICON_RESERVED_IDS}: "
            f"ids 0-{LEXICON_RESERVED_IDS - 1} are reserved), got {value}"
        )


def _precision_checked_first(cls):
    """A `precision` set on the config (its constructor, `from_pretrained` and `AutoConfig`
    arguments, `config.precision = ...`) is checked by `spacy_elmo.precision` before `@strict`'s
    validation, so an invalid one is the same one-line `ValueError` in every face."""
    strict_setattr = cls.__setattr__

    def __setattr__(self, name: str, value) -> None:
        if name == "precision" and value not in PRECISIONS:  # (a valid one: @strict's check suffices)
            check_precision(value)  # raises
        strict_setattr(self, name, value)

    cls.__setattr__ = __setattr__
    return cls


@_precision_checked_first
@strict
class ElmoConfig(PreTrainedConfig):
    """Configuration of a character-based ELMo biLM (Peters et al., 2018).

    Defaults are the "original" 5.5B architecture (2x4096_512_2048cnn_2xhighway).
    `vocab_size` > 0 only when the model carries an LM softmax head (pretraining).
    `char_vocab_size` / `word_vocab_size` / `word_embedding_dim` describe ELMoForManyLangs-style
    models (a character lexicon instead of UTF-8 bytes, a word embedding beside the char CNN);
    their defaults (0) are the bilm-tf / AllenNLP architecture.
    """

    model_type = "elmo"

    # character CNN (options.json "char_cnn")
    n_characters: Literal[261, 262] = 262
    max_characters_per_token: int = validated_field(_at_least(3), default=50)  # markers + 1 character
    char_embedding_dim: int = validated_field(_at_least(1), default=16)
    filters: list[list[int]] = validated_field(
        _filters, default_factory=lambda: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    )
    n_highway: int = validated_field(_at_least(0), default=2)
    activation: Literal["relu", "tanh"] = "relu"
    # biLSTM (options.json "lstm")
    num_layers: int = validated_field(_at_least(1), default=2)
    lstm_dim: int = validated_field(_at_least(1), default=4096)
    projection_dim: int = validated_field(_at_least(1), default=512)
    cell_clip: OptionalNumber = 3.0
    proj_clip: OptionalNumber = 3.0
    use_skip_connections: bool = True
    forget_bias: Number = 1.0  # added to the forget gate at run time (bilm-tf); 0 for AllenNLP's cell
    # scalar mixes returned by ElmoModel (0 = none, only the raw layers)
    num_output_representations: int = validated_field(_at_least(0), default=0)
    scalar_mix_layer_norm: bool = False
    # LM head (pretraining); 0 = no head
    vocab_size: int = validated_field(_at_least(0), default=0)
    dropout: Number = validated_field(_fraction, default=0.1)
    initializer_range: Number = 0.02
    # characters: 0 = UTF-8 bytes (bilm-tf); N = rows of a character lexicon's embedding (the
    # tokenizer's char_vocab.json holds it; ids 1-6 are the markers, see spacy_elmo.characters)
    char_vocab_size: int = validated_field(_char_vocab, default=0)
    # a word embedding concatenated with the char CNN output before the projection (EFML); 0 = none
    word_vocab_size: int = validated_field(_at_least(0), default=0)
    word_embedding_dim: int = validated_field(_at_least(0), default=0)
    # biLSTM kernel (see LstmImplementation): a run-time setting, not saved
    lstm_implementation: LstmImplementation = "auto"
    # inference precision (see Precision): saved unless "fp32"
    precision: Precision = "fp32"

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        _first_config_made()

    def __setstate__(self, state: dict) -> None:
        """Unpickling makes a config without `__post_init__`: in a fresh process it may be the first."""
        self.__dict__.update(state)
        _first_config_made()

    def validate_elmo(self):
        """What involves several fields (called by `@strict` on init)."""
        for width, _ in self.filters:
            if width > self.max_characters_per_token:
                raise ValueError(
                    f"filter width {width} exceeds max_characters_per_token={self.max_characters_per_token}"
                )
        if self.projection_dim > self.lstm_dim:
            raise ValueError(f"projection_dim ({self.projection_dim}) cannot exceed lstm_dim ({self.lstm_dim})")
        if (self.word_vocab_size > 0) != (self.word_embedding_dim > 0):
            raise ValueError(
                f"word_vocab_size ({self.word_vocab_size}) and word_embedding_dim ({self.word_embedding_dim}) "
                "are both 0 (no word embedding) or both > 0"
            )
        if self.word_vocab_size and self.word_vocab_size < 3:
            raise ValueError(
                f"word_vocab_size must be >= 3 (sentence markers and unknown word), got {self.word_vocab_size}"
            )

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """As `PreTrainedConfig.from_dict`, ignoring a run-time field a config.json may carry (files
        written by 0.1.0 saved `lstm_implementation`: tests/fixtures/saved_v0_1 needs this); keyword
        arguments still set it. An invalid value read from a file (AutoConfig and AutoModel pass its
        folder as `name_or_path`) is one `ElmoConfigError` line naming the file and the field."""
        saved = {k: v for k, v in config_dict.items() if k not in RUNTIME_FIELDS}
        try:
            return super().from_dict(saved, **kwargs)
        except CONFIG_ERRORS as err:
            source = kwargs.get("name_or_path")
            if source is None or isinstance(err, ElmoConfigError) or _valid(cls, saved):
                raise  # (the arguments' value, not the file's: their own one line)
            raise ElmoConfigError(f"{source}: invalid config.json: {config_error_message(err)}") from None

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):  # type: ignore[override]
        """As `PreTrainedConfig.from_pretrained`; an invalid config.json is one `ElmoConfigError`
        line naming the file and the field."""
        return super().from_pretrained(
            pretrained_model_name_or_path, name_or_path=pretrained_model_name_or_path, **kwargs
        )

    def to_dict(self) -> dict:
        """The saved fields (without the run-time `lstm_implementation`, nor `precision` when fp32)."""
        data = super().to_dict()
        for name in RUNTIME_FIELDS:
            data.pop(name, None)
        if data.get("precision") == "fp32":
            data.pop("precision")
        if SAVES_NAME_OR_PATH:
            data.pop("_name_or_path", None)
        return data

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def num_output_layers(self) -> int:
        """The layers the biLM returns, L + 1: the token layer (0) and one per biLSTM layer (`num_layers`)."""
        return self.num_layers + 1

    @property
    def output_dim(self) -> int:
        """Width of every biLM layer output (forward + backward)."""
        return 2 * self.projection_dim

    @property
    def char_embedding_rows(self) -> int:
        """Rows of the character embedding: the UTF-8 table's 262, or the lexicon's size."""
        return self.char_vocab_size or UTF8_CHAR_ROWS

    @property
    def uses_char_lexicon(self) -> bool:
        return self.char_vocab_size > 0

    @classmethod
    def from_options(cls, options: dict, **kwargs) -> "ElmoConfig":
        """Builds a config from a legacy bilm-tf / AllenNLP options.json dict."""
        cnn, lstm = options["char_cnn"], options["lstm"]
        return cls(
            n_characters=cnn.get("n_characters", 262),
            max_characters_per_token=cnn.get("max_characters_per_token", 50),
            char_embedding_dim=cnn["embedding"]["dim"],
            filters=cnn["filters"],
            n_highway=cnn.get("n_highway", 0),
            activation=cnn.get("activation", "relu"),
            num_layers=lstm.get("n_layers", 2),
            lstm_dim=lstm["dim"],
            projection_dim=lstm["projection_dim"],
            cell_clip=lstm.get("cell_clip"),
            proj_clip=lstm.get("proj_clip"),
            use_skip_connections=lstm.get("use_skip_connections", False),
            **kwargs,
        )

    def to_options(self) -> dict:
        """The legacy options.json dict for this config; `ValueError` for what that format cannot hold."""
        unsupported = [
            name
            for name, value, plain in (
                ("a character lexicon (char_vocab_size)", self.char_vocab_size, 0),
                ("a word embedding (word_embedding_dim)", self.word_embedding_dim, 0),
                ("forget_bias other than 1", float(self.forget_bias), 1.0),
            )
            if value != plain
        ]
        if unsupported:
            raise ValueError(
                "the legacy options.json + lm_weights.hdf5 format cannot hold "
                + ", ".join(unsupported)
                + "; save it with save_pretrained instead"
            )
        options = {
            "char_cnn": {
                "activation": self.activation,
                "embedding": {"dim": self.char_embedding_dim},
                "filters": [list(f) for f in self.filters],
                "max_characters_per_token": self.max_characters_per_token,
                "n_characters": 262,
                "n_highway": self.n_highway,
            },
            "lstm": {
                "cell_clip": self.cell_clip,
                "dim": self.lstm_dim,
                "n_layers": self.num_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "use_skip_connections": self.use_skip_connections,
            },
        }
        if self.vocab_size:
            options["n_tokens_vocab"] = self.vocab_size
        return options


class ElmoConfigError(ValueError):
    """A config.json (or options read into a config) holds an invalid value: one line naming the
    file and the field."""


CONFIG_ERRORS = (StrictDataclassClassValidationError, StrictDataclassFieldValidationError, ValueError, TypeError)


def _valid(cls, values: dict) -> bool:
    """Whether `values` (a config.json's) make a valid config by themselves."""
    try:
        cls(**values)  # (what PreTrainedConfig.from_dict makes of them)
    except CONFIG_ERRORS:
        return False
    return True


def config_error_message(err: BaseException) -> str:
    """One line for a config validation error: "field 'x': ..." or the cross-field reason."""
    while not isinstance(err, (StrictDataclassFieldValidationError, StrictDataclassClassValidationError)):
        inner = err.__cause__ or err.__context__
        if inner is None:
            break
        err = inner
    if isinstance(err, StrictDataclassFieldValidationError):
        field = str(err).split("'", 2)[1]
        causes, cause = [], err.__cause__
        while cause is not None:  # e.g. "Invalid item at index 0 in list 'filters'" ← its reason
            causes.append(" ".join(str(cause).split()))
            cause = cause.__cause__
        reason = "; ".join(causes) or str(err)
        union = re.match(r"Field '[^']*' with value (.*) doesn't match any type in \((.*?)\)\.", reason)
        if union:  # a union annotation (OptionalNumber) lists every failed alternative: say it once
            kinds = [k.split("'")[1] if "'" in k else k for k in union.group(2).split(", ")]
            reason = f"expected {' or '.join(k.replace('NoneType', 'null') for k in kinds)}, got {union.group(1)}"
        return f"field '{field}': " + re.sub(rf"^Field '{field}' ", "", reason)
    if isinstance(err, StrictDataclassClassValidationError):
        return " ".join(str(err.__cause__ or err).split())
    return " ".join(str(err).split())


def read_json_object(path: Path, error: type[Exception]) -> dict:
    """A JSON file that must hold an object; `error` names the file when it does not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise error(f"{path}: not valid JSON ({err})") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a JSON file") from None
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as err:  # the OS's reason (Permission denied, ...)
        raise error(f"{path}: cannot read it ({err.strerror or err})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


__all__ = [
    "ElmoConfig",
    "ElmoConfigError",
    "LstmImplementation",
    "Precision",
    "PRECISIONS",
    "check_precision",
    "config_error_message",
    "read_json_object",
]
