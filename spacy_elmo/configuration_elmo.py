"""`ElmoConfig`: the sizes and switches of an ELMo biLM (the fields of a legacy options.json, flattened)."""

from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

_ACTIVATIONS = ("relu", "tanh")
# which code evaluates the biLSTM (as `attn_implementation` chooses attention kernels in HF):
# "eager" = the readable autograd definition in modeling_elmo.py; "packed" = the exact inference
# kernel (spacy_elmo.kernels.packed_lstm, no autograd); "fused" = the exact training kernel
# (spacy_elmo.kernels.fused_lstm, one autograd Function per layer); "cuda_graphs" = eager captured
# once per bucketed shape in a CUDA graph and replayed (inference on CUDA;
# spacy_elmo.kernels.cuda_graphs); "auto" = packed when nothing can need a gradient and the model
# is in eval mode, else fused (eager under autocast)
LSTM_IMPLEMENTATIONS = ("auto", "eager", "packed", "fused", "cuda_graphs")
_INT_FIELDS = (
    "n_characters", "max_characters_per_token", "char_embedding_dim", "n_highway", "num_layers",
    "lstm_dim", "projection_dim", "num_output_representations", "vocab_size",
)
_FLOAT_FIELDS = ("cell_clip", "proj_clip", "forget_bias", "dropout", "initializer_range")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@strict
class ElmoConfig(PreTrainedConfig):
    """Configuration of a character-based ELMo biLM (Peters et al., 2018).

    Defaults are the "original" 5.5B architecture (2x4096_512_2048cnn_2xhighway).
    `vocab_size` > 0 only when the model carries an LM softmax head (pretraining).
    """

    model_type = "elmo"

    # character CNN (options.json "char_cnn")
    n_characters: int = 262
    max_characters_per_token: int = 50
    char_embedding_dim: int = 16
    filters: list[list[int]] | tuple = (
        (1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024),
    )
    n_highway: int = 2
    activation: str = "relu"
    # biLSTM (options.json "lstm")
    num_layers: int = 2
    lstm_dim: int = 4096
    projection_dim: int = 512
    cell_clip: float | int | None = 3.0
    proj_clip: float | int | None = 3.0
    use_skip_connections: bool = True
    forget_bias: float | int = 1.0
    # scalar mixes returned by ElmoModel (0 = none, only the raw layers)
    num_output_representations: int = 0
    scalar_mix_layer_norm: bool = False
    # LM head (pretraining); 0 = no head
    vocab_size: int = 0
    dropout: float | int = 0.1
    initializer_range: float = 0.02
    # biLSTM kernel: "auto" | "eager" | "packed" | "fused" (see LSTM_IMPLEMENTATIONS)
    lstm_implementation: str = "auto"

    def __post_init__(self, **kwargs):
        if not isinstance(self.filters, (list, tuple)) or not all(
            isinstance(f, (list, tuple)) and len(f) == 2 and all(_is_int(x) for x in f) for f in self.filters
        ):
            raise ValueError(f"filters must be a list of [width, number] integer pairs, got {self.filters!r}")
        self.filters = [[int(w), int(n)] for w, n in self.filters]
        super().__post_init__(**kwargs)

    def validate_elmo(self):
        """Checks the sizes make a working biLM (called by `@strict` on init)."""
        problems = []
        for name in _INT_FIELDS:
            if not _is_int(getattr(self, name)):
                problems.append(f"{name} must be an integer, got {getattr(self, name)!r}")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if not (value is None and name.endswith("_clip")) and not _is_number(value):
                problems.append(f"{name} must be a number, got {value!r}")
        if not isinstance(self.use_skip_connections, bool) or not isinstance(self.scalar_mix_layer_norm, bool):
            problems.append("use_skip_connections and scalar_mix_layer_norm must be true/false")
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))
        if self.lstm_implementation not in LSTM_IMPLEMENTATIONS:
            problems.append(
                f"lstm_implementation must be one of {LSTM_IMPLEMENTATIONS}, got {self.lstm_implementation!r}"
            )
        if self.activation not in _ACTIVATIONS:
            problems.append(f"activation must be one of {_ACTIVATIONS}, got {self.activation!r}")
        if not self.filters:
            problems.append("filters must list at least one [width, number] pair")
        for width, num in self.filters:
            if width < 1 or num < 1:
                problems.append(f"filter [{width}, {num}] must have positive width and number")
            elif width > self.max_characters_per_token:
                problems.append(
                    f"filter width {width} exceeds max_characters_per_token={self.max_characters_per_token}"
                )
        if self.max_characters_per_token < 3:
            problems.append("max_characters_per_token must be >= 3 (begin/end-of-word markers + 1 byte)")
        if self.n_characters not in (261, 262):
            problems.append(f"n_characters must be 261 or 262, got {self.n_characters}")
        for name in ("char_embedding_dim", "num_layers", "lstm_dim", "projection_dim"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_highway < 0 or self.num_output_representations < 0 or self.vocab_size < 0:
            problems.append("n_highway, num_output_representations and vocab_size must be >= 0")
        if self.projection_dim > self.lstm_dim:
            problems.append(f"projection_dim ({self.projection_dim}) cannot exceed lstm_dim ({self.lstm_dim})")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"dropout must be in [0, 1), got {self.dropout}")
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every biLM layer output (forward + backward)."""
        return 2 * self.projection_dim

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
        """The legacy options.json dict for this config."""
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


def read_json_object(path: Path, error: type[Exception]) -> dict:
    """A JSON file that must hold an object; `error` names the file when it does not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise error(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


__all__ = ["ElmoConfig", "LSTM_IMPLEMENTATIONS", "read_json_object"]
