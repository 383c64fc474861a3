"""The names, defaults and counts that more than one module uses, each defined once, here.

The standard library only: the command line (`cli/`, which imports nothing else at import time) and
the console script may read them. The shipped configs (configs/*.cfg) cannot import them: where one
repeats a default, `tests/tools/test_spacy_tools.py` checks that it equals the value here.
"""

from __future__ import annotations

from typing import Literal, get_args

# the package's version: setup.cfg reads it (`attr:`), the CLI prints it, provenance records it
VERSION = "0.2.0"

# --- the files of a model directory (`hf/model_directory.py` writes them; `from_pretrained`, the model
# references and the commands read them)
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # beside shards, instead of WEIGHTS_FILE
PICKLED_WEIGHTS_FILE = "pytorch_model.bin"  # read with weights_only=True where no safetensors are
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # the tokenizer's settings
SPECIAL_TOKENS_FILE = "special_tokens_map.json"  # what transformers 4.x writes beside them
CHAR_VOCAB_FILE = "char_vocab.json"  # a character lexicon (ELMoForManyLangs-style models)
WORD_VOCAB_FILE = "word_vocab.json"  # a word embedding's vocabulary
TOKENIZER_FILES = (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_FILE, CHAR_VOCAB_FILE, WORD_VOCAB_FILE)
# everything a model directory holds but its card: what `convert` replaces in an existing folder
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, WEIGHTS_INDEX, *TOKENIZER_FILES)
CARD_FILE = "README.md"  # the model card (a README.md without its mark is the user's, and kept)
VOCAB_FILE = "vocab.txt"  # an LM's word vocabulary, one word a line (bilm-tf's; `similar` reads it)

# --- legacy (AllenNLP / bilm-tf) files
LEGACY_OPTIONS_FILE = "options.json"
LEGACY_WEIGHTS_FILE = "lm_weights.hdf5"  # the name bilm-tf writes; a folder's other *.hdf5 is taken too

# --- an ELMoForManyLangs model folder (its config.json, CONFIG_FILE, names the architecture json)
EFML_CHAR_LEXICON_FILE = "char.dic"
EFML_WORD_LEXICON_FILE = "word.dic"
EFML_TOKEN_EMBEDDER_FILE = "token_embedder.pkl"  # read without unpickling (formats/efml.py)
EFML_ENCODER_FILE = "encoder.pkl"
EFML_WEIGHT_FILES = (EFML_TOKEN_EMBEDDER_FILE, EFML_ENCODER_FILE)

# --- what a pretraining run writes in its output directory, beside a model directory's files
CHECKPOINTS_FOLDER = "checkpoints"
METRICS_FILE = "metrics.jsonl"
RUN_CONFIG_FILE = "pretrain.cfg"  # the settings the run used (also in each checkpoint)
RUN_SUMMARY_FILE = "pretrain_summary.json"
LEGACY_FOLDER = "legacy"  # `training.legacy = true`: the model as legacy files too

# --- the spaCy biLM layer's defaults (`spacy-elmo.ElmoBiLM.v2` and its segmenters)
MAX_BATCH_TOKENS = 4096  # padded tokens per biLM batch
MAX_LENGTH = 256  # longer Docs run by sentence or in windows
WINDOW_OVERLAP = 64  # tokens neighbouring windows share

# --- where a command or a pretraining runs: "auto" is CUDA when there is a GPU
Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[str, ...] = get_args(Device)
DEFAULT_DEVICE: Device = "auto"

__all__ = [
    "CARD_FILE",
    "CHAR_VOCAB_FILE",
    "CHECKPOINTS_FOLDER",
    "CONFIG_FILE",
    "DEFAULT_DEVICE",
    "DEVICES",
    "Device",
    "EFML_CHAR_LEXICON_FILE",
    "EFML_ENCODER_FILE",
    "EFML_TOKEN_EMBEDDER_FILE",
    "EFML_WEIGHT_FILES",
    "EFML_WORD_LEXICON_FILE",
    "LEGACY_FOLDER",
    "LEGACY_OPTIONS_FILE",
    "LEGACY_WEIGHTS_FILE",
    "MAX_BATCH_TOKENS",
    "MAX_LENGTH",
    "METRICS_FILE",
    "MODEL_FILES",
    "PICKLED_WEIGHTS_FILE",
    "RUN_CONFIG_FILE",
    "RUN_SUMMARY_FILE",
    "SPECIAL_TOKENS_FILE",
    "TOKENIZER_CONFIG_FILE",
    "TOKENIZER_FILES",
    "VERSION",
    "VOCAB_FILE",
    "WEIGHTS_FILE",
    "WEIGHTS_INDEX",
    "WINDOW_OVERLAP",
    "WORD_VOCAB_FILE",
]
