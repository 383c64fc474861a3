"""`spacy-elmo similar MODEL WORD`: nearest words by cosine similarity.

Two kinds of word vectors:
- context-independent (default): the biLM's layer 0 (char CNN + highway + projection), so any word,
  in the vocabulary or not, gets a vector; the candidates are the words of the model's `vocab.txt`
  (saved by `spacy-elmo pretrain`) or of a `--vocab` file. Neighbours tend to share spelling.
- contextual (`--corpus FILE`): each word's layer-`layer` vectors averaged over its occurrences in a
  text (e.g. the user's own novel or news), minus the mean over all words (biLM vectors share a
  large common component that otherwise dominates the cosine). Neighbours share usage.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from ..constants import DEFAULT_DEVICE
from ..training.vocabulary import SPECIAL_TOKENS, Vocabulary
from .options import OPTIONS


def nearest_words(
    model_ref: str | Path,
    word: str,
    n: int = 10,
    *,
    vocab_file: str | Path | None = None,
    corpus: Path | None = None,
    layer: int = 2,
    min_count: int = 2,
    max_sentences: int = 0,
    device: str = DEFAULT_DEVICE,
    progress: bool = True,
) -> list[tuple[str, float]]:
    """`spacy-elmo similar`: the `n` (word, cosine) nearest to `word`: among the vocabulary
    (`vocab_file`, else the model's vocab.txt) by context-independent vectors, or, given a `corpus`,
    among its words by their layer-`layer` vectors averaged over it. The biLM runs on `device`."""
    from ..devices import pick_device
    from ..files import check_input_file
    from ..formats.references import parse_reference

    ranges = OPTIONS["similar"]  # (named as `spacy-elmo similar` names them)
    for option, value in (
        ("-n", n),
        ("--layer", layer),
        ("--min-count", min_count),
        ("--max-sentences", max_sentences),
    ):
        ranges[option].check(value, option)
    reference = parse_reference(model_ref)
    checked = reference.check()  # first (cheap): a wrong model reference is the likelier mistake
    if corpus is None:
        vocab = find_vocab(reference, vocab_file)  # read before the model loads
        model, tokenizer = reference.load(checked=checked)
        model = model.to(pick_device(device))
        return most_similar(model, word, vocab, n, tokenizer=tokenizer)
    from ..text_input import check_text_files

    check_text_files([check_input_file(corpus, "--corpus")], "--corpus")
    known = reference.lstm_layers()  # the bound of `layer`, from the config (None: known once loaded)
    if known is not None:
        ranges["--layer"].check(layer, "--layer", high=known)
    model, tokenizer = reference.load(checked=checked)
    ranges["--layer"].check(layer, "--layer", high=model.config.num_layers)
    model = model.to(pick_device(device))
    sentences = read_sentences(corpus, max_sentences)
    words, vectors = contextual_word_vectors(model, sentences, layer, min_count, progress=progress, tokenizer=tokenizer)
    try:
        return most_similar_in_context(words, vectors, word, n)
    except KeyError as error:
        raise ValueError(f"{corpus}: {error.args[0]}") from None


def find_vocab(model_ref, vocab_file: str | Path | None = None) -> Vocabulary:
    """`vocab_file`, else the model's `vocab.txt` (where its reference says one may be:
    `ModelReference.vocabulary_files`, e.g. in an HF or legacy directory)."""
    from ..files import check_input_file
    from ..formats.references import parse_reference

    if vocab_file is not None:
        return Vocabulary.load(check_input_file(vocab_file, "--vocab"))
    reference = parse_reference(model_ref)
    for path in reference.vocabulary_files():
        if path.is_file():
            return Vocabulary.load(path)
    raise FileNotFoundError(f"{reference} has no vocab.txt; pass the word list with --vocab FILE")


@torch.no_grad()
def token_vectors(model, words: list[str], batch_size: int = 2048, tokenizer=None) -> torch.Tensor:
    """[len(words), projection_dim] context-independent vectors (float32, CPU); `tokenizer`: the
    model's (default: `model_directory.default_tokenizer`)."""
    from ..hf.model_directory import default_tokenizer

    tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model)
    device = next(model.parameters()).device
    parts = []
    for start in range(0, len(words), batch_size):
        inputs = tokenizer.encode_words([[w] for w in words[start : start + batch_size]])
        char_ids = torch.from_numpy(inputs["input_ids"][:, 0]).to(device)
        word_ids = inputs.get("input_word_ids")
        word_ids = None if word_ids is None else torch.from_numpy(word_ids[:, 0]).to(device)
        parts.append(model.embed_tokens(char_ids, word_ids).float().cpu())
    return torch.cat(parts) if parts else torch.zeros(0, model.config.projection_dim)


def most_similar(model, word: str, vocab: Vocabulary, n: int = 10, tokenizer=None) -> list[tuple[str, float]]:
    """The `n` vocabulary words closest to `word` by cosine similarity (the word itself excluded)."""
    candidates = [w for w in vocab.words if w not in SPECIAL_TOKENS and w != word]
    if not candidates:
        return []
    vectors = torch.nn.functional.normalize(token_vectors(model, candidates, tokenizer=tokenizer), dim=-1)
    query = torch.nn.functional.normalize(token_vectors(model, [word], tokenizer=tokenizer), dim=-1)[0]
    scores = vectors @ query
    top = torch.topk(scores, min(n, len(candidates)))
    return [(candidates[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


@torch.no_grad()
def contextual_word_vectors(
    model,
    sentences: Iterable[list[str]],
    layer: int,
    min_count: int = 2,
    batch_size: int = 32,
    progress: bool = False,
    tokenizer=None,
) -> tuple[list[str], torch.Tensor]:
    """(words, [len(words), dim]): each word's layer-`layer` vectors averaged over its occurrences
    in `sentences` (words seen at least `min_count` times), then centred on the mean word.
    `progress`: a bar counting sentences on stderr (when it is a terminal); `tokenizer`: the model's."""
    from ..hf.model_directory import default_tokenizer

    OPTIONS["similar"]["--layer"].check(layer, "layer", high=model.config.num_layers)
    OPTIONS["similar"]["--min-count"].check(min_count, "min_count")
    tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model)
    device = next(model.parameters()).device
    width = 2 * model.config.projection_dim
    index: dict[str, int] = {}  # word -> row of sums/counts (rows grow by doubling)
    sums, counts = torch.zeros(1024, width), torch.zeros(1024)
    batch: list[list[str]] = []

    def flush() -> None:
        nonlocal sums, counts
        ids = torch.tensor([index.setdefault(w, len(index)) for sentence in batch for w in sentence])
        if len(index) > len(counts):
            grow = max(len(index), 2 * len(counts)) - len(counts)
            sums, counts = torch.cat([sums, sums.new_zeros(grow, width)]), torch.cat([counts, counts.new_zeros(grow)])
        out = model(**tokenizer(batch).to(device))
        sums.index_add_(0, ids, out.hidden_states[layer][out.attention_mask].float().cpu())
        counts.index_add_(0, ids, torch.ones(len(ids)))
        batch.clear()

    if progress:
        from tqdm import tqdm

        sentences = tqdm(sentences, unit="sentence", disable=None, mininterval=1.0, dynamic_ncols=True)
    for sentence in sentences:
        if sentence:
            batch.append(sentence)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if not index:
        return [], torch.zeros(0, width)
    total, count = sums[: len(index)], counts[: len(index)]
    keep = count >= min_count
    words = [w for w, i in index.items() if keep[i]]
    vectors = total[keep] / count[keep, None]
    return words, vectors - vectors.mean(dim=0, keepdim=True)


def most_similar_in_context(words: list[str], vectors: torch.Tensor, word: str, n: int = 10) -> list[tuple[str, float]]:
    """The `n` words closest to `word` among contextual word vectors (from `contextual_word_vectors`)."""
    try:
        query = words.index(word)
    except ValueError:
        raise KeyError(f"{word!r} does not occur often enough in the corpus to have a contextual vector") from None
    normed = torch.nn.functional.normalize(vectors, dim=-1)
    scores = normed @ normed[query]
    scores[query] = -2.0
    for i, w in enumerate(words):
        if w in SPECIAL_TOKENS:
            scores[i] = -2.0
    top = torch.topk(scores, min(n, max(len(words) - 1, 0)))
    return [(words[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist()) if s > -2.0]


def read_sentences(path: str | Path, max_sentences: int = 0) -> Iterator[list[str]]:
    """Whitespace-tokenized lines of a UTF-8 text file, at most `max_sentences` (text that is not
    UTF-8 raises `text_input.TextError`, naming the file and line)."""
    from ..text_input import read_lines

    with open(path, "rb") as handle:
        for i, line in enumerate(read_lines(handle, str(path))):
            if max_sentences and i >= max_sentences:
                break
            yield line.split()


__all__ = [
    "nearest_words",
    "find_vocab",
    "token_vectors",
    "most_similar",
    "contextual_word_vectors",
    "most_similar_in_context",
    "read_sentences",
]
