"""README.md model cards for saved biLMs.

`write_model_card(directory, model, ...)` writes an HF model card (huggingface_hub's `ModelCard`):
a metadata header (library_name, tags, license when known), the architecture, the parameter
count, the training text with its size and held-out perplexity when known, and how to load the
model with transformers and in spaCy. `model_directory.save_model_directory` calls it, so
`save_pretrained` / `push_to_hub` give a complete, documented repository; `spacy-elmo convert` and
`spacy-elmo pretrain` add what they know (the source files, the training run), and a model built by
`load_legacy` or `load_efml` names the files it was read from (`converted_from`). The card's first line
is `CARD_MARK`: a README.md without it is the user's, and is kept (one logged line) instead of replaced.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..constants import CARD_FILE, CHAR_VOCAB_FILE, VOCAB_FILE, WORD_VOCAB_FILE

CARD_MARK = (
    "<!-- Written by spacy-elmo, whose save_pretrained/convert rewrites this file; "
    "delete this line to keep your edits. -->"
)
logger = logging.getLogger(__name__)
TAGS = ["elmo", "feature-extraction", "spacy", "bilm"]


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters()) if module is not None else 0


def _architecture(model) -> list[str]:
    c = model.config
    elmo = getattr(model, "elmo", model)
    head = getattr(model, "lm_head", None)
    widths = ", ".join(f"{n}×{w}" for w, n in c.filters)
    rows = [
        "| part | settings |",
        "| --- | --- |",
        (
            f"| characters | a character lexicon of {c.char_vocab_size:,} ids (`{CHAR_VOCAB_FILE}`), at most "
            f"{c.max_characters_per_token - 2} characters per word, embedded in {c.char_embedding_dim} dims |"
            if c.char_vocab_size
            else f"| characters | UTF-8 bytes of each word, at most {c.max_characters_per_token - 2} per word; "
            f"{c.n_characters} character ids embedded in {c.char_embedding_dim} dims |"
        ),
        f"| character CNN | {c.n_filters} filters (count×width: {widths}), {c.activation}, "
        f"{c.n_highway} highway layer(s), projection to {c.projection_dim} |",
        *(
            [
                f"| word embedding | {c.word_vocab_size:,} words (`{WORD_VOCAB_FILE}`) in {c.word_embedding_dim} dims, "
                "concatenated with the char CNN output before the projection |"
            ]
            if c.word_embedding_dim
            else []
        ),
        f"| biLSTM | {c.num_layers} layers per direction, cell {c.lstm_dim}, projection {c.projection_dim}, "
        f"skip connections: {'yes' if c.use_skip_connections else 'no'}, cell clip {c.cell_clip}, "
        f"projection clip {c.proj_clip} |",
        f"| output | {c.num_output_layers} layers (layer 0: context-independent token vectors) of "
        f"{c.output_dim} dims (forward ; backward) per token |",
    ]
    if head is not None:
        rows.append(f"| LM head | softmax over {c.vocab_size:,} words (`{VOCAB_FILE}`), shared by both directions |")
    mixes = getattr(elmo, "scalar_mixes", None)
    params = f"{_count(elmo) - _count(mixes):,} in the biLM"
    if mixes is not None and _count(mixes):
        params += f" + {_count(mixes):,} in {len(mixes)} scalar mix(es)"
    if head is not None:
        params += f" + {_count(head):,} in the LM head"
    rows.append(f"| parameters | {params} |")
    return rows


def _training(source: str | None, training: dict | None) -> list[str]:
    lines = []
    if source:
        lines.append(f"- Converted from the original ELMo files: {source}.")
    if training:
        text = training.get("text")
        if text:
            # file names only: a card may be published, the folders it was trained in are private
            names = [Path(t).name for t in ([text] if isinstance(text, (str, os.PathLike)) else text)]
            shown = ", ".join(f"`{n}`" for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            lines.append(f"- Training text: {shown}.")
        if training.get("corpus_words"):
            lines.append(f"- Size of the training text: {training['corpus_words']:,} words.")
        if training.get("step"):
            words = f" ({training['words']:,} words seen)" if training.get("words") else ""
            lines.append(f"- Trained for {training['step']:,} steps{words}.")
        if training.get("heldout_ppl") is not None:
            lines.append(
                f"- Held-out perplexity: {training['heldout_ppl']:.2f} (mean of the forward and backward LMs)."
            )
    return lines or ["- Not recorded (this card was written by `save_pretrained`)."]


def _usage(reference: str, has_head: bool, language: str | None) -> list[str]:
    ref = json.dumps(reference, ensure_ascii=False)
    lang = json.dumps(language or "en")
    lm = f"\n`ElmoForBidirectionalLM.from_pretrained({ref})` loads it with its LM head.\n" if has_head else ""
    return [
        "```python",
        "import torch, spacy_elmo",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f"model = AutoModel.from_pretrained({ref}).eval()",
        f"tokenizer = AutoTokenizer.from_pretrained({ref})",
        "with torch.no_grad():",
        '    out = model(**tokenizer(["The cat sat on the mat."]))',
        "out.hidden_states   # all layers, each [batch, tokens, dim]",
        "```",
        lm,
        "In spaCy (installing spacy-elmo registers the `elmo` component; it is not on PyPI: "
        "`pip install .` in a clone of its repository):",
        "",
        "```python",
        "import spacy",
        "",
        f"nlp = spacy.blank({lang})",
        f'nlp.add_pipe("elmo", config={{"model": {ref}}})',
        'doc = nlp("The cat sat on the mat.")',
        "doc._.elmo.layers   # [layers, tokens, dim]; doc.tensor holds their average",
        "```",
        "",
        f"or in a training config: `[paths] elmo = {ref}`.",
    ]


def render_model_card(
    model,
    *,
    reference: str = "path/to/model",
    license: str | None = None,
    source: str | None = None,
    training: dict | None = None,
    language: str | None = None,
):
    """The `huggingface_hub.ModelCard` of `model` (an `ElmoModel` or `ElmoForBidirectionalLM`).

    reference: how users name the model (a directory or a hub id); license: an SPDX-style id
    (e.g. "apache-2.0"); source: what it was converted from; training: `text` (files), `corpus_words`,
    `step`, `words`, `heldout_ppl` (any may be missing).
    """
    from huggingface_hub import ModelCard, ModelCardData

    has_head = getattr(model, "lm_head", None) is not None
    data = ModelCardData(
        library_name="spacy-elmo",
        tags=list(TAGS),
        license=license,
        pipeline_tag="feature-extraction",
        language=language,
    )
    title = "ELMo biLM with LM head" if has_head else "ELMo biLM"
    body = [
        f"# {title}",
        "",
        "A character-based bidirectional LSTM language model (ELMo; Peters et al., 2018, *Deep contextualized "
        "word representations*) saved by spacy-elmo: contextual word "
        "vectors for Hugging Face transformers and spaCy.",
        "",
        "## Architecture",
        "",
        *_architecture(model),
        "",
        "## Training",
        "",
        *_training(source, training),
        "",
        "## How to use",
        "",
        *_usage(reference, has_head, language),
        "",
    ]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body))


def write_model_card(directory, model, **info) -> Path | None:
    """Writes `directory`/README.md (see `render_model_card` for `info`) and returns its path, unless
    a README.md that this package did not write (no `CARD_MARK` line) is there: that one is kept,
    with one logged line, and None is returned."""
    path = Path(directory) / CARD_FILE
    if path.is_file() and CARD_MARK not in path.read_text(encoding="utf-8", errors="replace"):
        logger.warning(
            "kept %s: it was not written by spacy-elmo, so no model card was written (delete it for one)", path
        )
        return None
    info.setdefault("reference", str(directory))
    card = render_model_card(model, **info)
    card.text = f"{CARD_MARK}\n{card.text}"
    card.save(str(path))
    return path


__all__ = ["CARD_MARK", "render_model_card", "write_model_card"]
