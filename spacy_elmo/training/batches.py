"""Training batches for the biLM: streamed shard files → deterministic, resumable global batches.

The corpus is never loaded whole. Shard files are read one *block* (a few thousand lines) at a time;
inside a block the sequences are shuffled, sorted by length (little padding) and packed into global
batches of at most `batch_tokens × world_size` padded words, whose order is shuffled again. All
randomness comes from a generator seeded by (seed, epoch, shard, block offset), so a `DataPosition`
(epoch, shard, byte offset of the block, batches already taken from it) is all it takes to continue
exactly where a run stopped.

Under torchrun every process reads the same text, builds the same global batches and keeps only its
own rows (the char-id and word-id encoding, and the model work, are split; reading is cheap). A
global batch is therefore the same whatever the number of processes, which is what makes a
2-process run reproduce a 1-process run with the same global batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy
import torch

from ..characters import TokenEncoder, Utf8Characters
from ..text_input import read_block
from .text import iter_sequences, split_long

if TYPE_CHECKING:  # for the annotation only: spacy_elmo.training.vocabulary imports the model
    from .vocabulary import Vocabulary


@dataclass
class DataPosition:
    """Where the stream stands: `epoch`, index into that epoch's `shard` order, byte `offset` of the
    current block in the shard, and `batch`es already taken from that block."""

    epoch: int = 0
    shard: int = 0
    offset: int = 0
    batch: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DataPosition:
        return cls(**{k: int(data[k]) for k in ("epoch", "shard", "offset", "batch")})


@dataclass
class Batch:
    """This process's rows of one global batch, as model inputs."""

    char_ids: torch.Tensor  # [rows, tokens, max_chars] character ids
    mask: torch.Tensor  # [rows, tokens] True at real words
    word_ids: torch.Tensor  # [rows, tokens] vocabulary ids (targets)
    input_word_ids: torch.Tensor | None  # [rows, tokens] word-embedding ids (models with a word embedding)
    targets: int  # LM targets per direction in these rows (words + 1 boundary per row)
    global_targets: int  # the same over the whole global batch, all processes
    global_words: int  # words in the global batch (tokens/s counts these)
    weight: float = 1.0  # 0.0 when this process got no rows and holds a placeholder row

    def to(self, device) -> Batch:
        self.char_ids, self.mask, self.word_ids = (t.to(device) for t in (self.char_ids, self.mask, self.word_ids))
        if self.input_word_ids is not None:
            self.input_word_ids = self.input_word_ids.to(device)
        return self


class CharEncoder:
    """Sentences → padded character ids and mask as tensors (the UTF-8 `TokenEncoder`, which
    remembers the ids of the words it has seen)."""

    def __init__(self, max_chars: int, cache_size: int = 200_000):
        self.encoder = TokenEncoder(Utf8Characters(max_chars), cache_size=cache_size)

    def __call__(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask, _ = self.encoder(sentences)
        return torch.from_numpy(ids), torch.from_numpy(mask)


def pack_by_length(sequences: list[list[str]], budget: int) -> list[list[list[str]]]:
    """Batches of at most `budget` padded words (rows × longest row), similar lengths together:
    spaCy's `minibatch_by_padded_size` over the whole list (the same batcher as the spaCy layer)."""
    from spacy.training.batchers import minibatch_by_padded_size

    return list(minibatch_by_padded_size(sequences, budget, buffer=max(1, len(sequences))))


class Corpus:
    """A streamed, sharded corpus that yields this process's rows of each global batch plus the position after it."""

    def __init__(
        self,
        files: Sequence[Path],
        vocab: Vocabulary,
        tokenize: Callable[[str], list[str]] = str.split,
        *,
        encoder: TokenEncoder | None = None,
        batch_tokens: int = 2048,
        max_tokens: int = 100,
        block_lines: int = 10_000,
        max_line_bytes: int = 1 << 20,
        shuffle: bool = True,
        seed: int = 0,
        max_epochs: int = 0,
        world_size: int = 1,
        rank: int = 0,
    ):
        if not files:
            raise ValueError("the training corpus has no files")
        if max_tokens > batch_tokens:
            raise ValueError(f"max_tokens ({max_tokens}) cannot exceed batch_tokens ({batch_tokens})")
        self.files = list(files)
        self.vocab, self.tokenize = vocab, tokenize
        self.encode_words = encoder if encoder is not None else TokenEncoder(Utf8Characters(50))
        self.batch_tokens, self.max_tokens = batch_tokens, max_tokens
        self.block_lines, self.max_line_bytes = block_lines, max_line_bytes
        self.shuffle, self.seed, self.max_epochs = shuffle, seed, max_epochs
        self.world_size, self.rank = world_size, rank

    def shard_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.files)))
        if self.shuffle:
            numpy.random.default_rng([self.seed, epoch]).shuffle(order)
        return order

    def plan_block(self, lines: list[str], key: Sequence[int]) -> list[list[list[str]]]:
        """The global batches of one block: shuffled, bucketed by length, in shuffled order."""
        sequences = [seq for line in lines for seq in split_long(self.tokenize(line), self.max_tokens)]
        rng = numpy.random.default_rng([self.seed, *key])
        if self.shuffle:  # random order among equal lengths, then bucket
            sequences = [sequences[i] for i in rng.permutation(len(sequences))]
        batches = pack_by_length(sequences, self.batch_tokens * self.world_size)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def encode(self, rows: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Character ids, mask, vocabulary ids (targets) and word-embedding ids (or None) of `rows`."""
        char_ids, mask, input_word_ids = self.encode_words(rows)
        word_ids = torch.zeros(mask.shape, dtype=torch.long)
        for i, seq in enumerate(rows):
            word_ids[i, : len(seq)] = torch.tensor(self.vocab.encode(seq), dtype=torch.long)
        inputs = None if input_word_ids is None else torch.from_numpy(input_word_ids)
        return torch.from_numpy(char_ids), torch.from_numpy(mask), word_ids, inputs

    def make_batch(self, rows: list[list[str]]) -> Batch:
        """This process's share of a global batch (contiguous rows; a placeholder if it gets none)."""
        share = numpy.array_split(numpy.arange(len(rows)), self.world_size)[self.rank]
        mine = [rows[i] for i in share]
        weight = 1.0
        if not mine:  # fewer rows than processes: compute on a row but let it count 0
            mine, weight = [rows[0]], 0.0
        char_ids, mask, word_ids, input_word_ids = self.encode(mine)
        return Batch(
            char_ids,
            mask,
            word_ids,
            input_word_ids,
            targets=int(weight) * sum(len(s) + 1 for s in mine),
            global_targets=sum(len(s) + 1 for s in rows),
            global_words=sum(len(s) for s in rows),
            weight=weight,
        )

    def batches(self, position: DataPosition | None = None) -> Iterator[tuple[Batch, DataPosition]]:
        """This process's batches from `position` on, each with the position *after* it.

        Runs over the shards epoch after epoch (until `max_epochs`, if set).
        """
        pos = position or DataPosition()
        while not self.max_epochs or pos.epoch < self.max_epochs:
            from_start = pos == DataPosition(pos.epoch)
            produced = False
            order = self.shard_order(pos.epoch)
            while pos.shard < len(order):
                lines, next_offset = read_block(
                    self.files[order[pos.shard]], pos.offset, self.block_lines, self.max_line_bytes
                )
                if not lines:  # end of this shard
                    pos = DataPosition(pos.epoch, pos.shard + 1, 0, 0)
                    continue
                plan = self.plan_block(lines, (pos.epoch, order[pos.shard], pos.offset))
                for index in range(pos.batch, len(plan)):
                    if index + 1 < len(plan):
                        after = DataPosition(pos.epoch, pos.shard, pos.offset, index + 1)
                    else:
                        after = DataPosition(pos.epoch, pos.shard, next_offset, 0)
                    produced = True
                    yield self.make_batch(plan[index]), after
                pos = DataPosition(pos.epoch, pos.shard, next_offset, 0)
            if from_start and not produced:
                raise ValueError(f"the training corpus has no words ({len(self.files)} file(s), all empty)")
            pos = DataPosition(pos.epoch + 1)

    def eval_batches(self) -> Iterator[Batch]:
        """Every sequence once, in file order, packed by length; batch i goes to process i mod world_size."""
        sequences = iter_sequences(self.files, self.tokenize, self.max_tokens, self.max_line_bytes, self.block_lines)
        index = 0
        while True:
            block = [seq for _, seq in zip(range(self.block_lines), sequences)]
            if not block:
                return
            for rows in pack_by_length(block, self.batch_tokens):
                if index % self.world_size == self.rank:
                    n = sum(len(s) + 1 for s in rows)
                    yield Batch(*self.encode(rows), n, n, sum(len(s) for s in rows))
                index += 1


__all__ = ["DataPosition", "Batch", "CharEncoder", "pack_by_length", "Corpus"]
