"""`spacy-elmo embed MODEL INPUT OUTPUT.hdf5`: every biLM layer of every line, in bilm-tf's layout
(`dump_embeddings`); `spacy-elmo embed MODEL`: a few components of each word's vector of each line of
standard input, printed (`print_embeddings`).

The layout is that of bilm-tf's `dump_bilm_embeddings`: one float32 dataset per input line, named by
the line's index ("0", "1", …), of shape [L + 1, n_tokens, 2·projection_dim] (layer 0 = token
layer, without `<S>`/`</S>`). Empty lines get a [L + 1, 0, dim] dataset so indices stay aligned.

Input is streamed (a chunk of lines at a time, sorted by length inside the chunk to limit padding);
the model is stateless, so batching does not change any sentence's vectors. Under torchrun each
process embeds the lines i with i mod world_size == rank into OUTPUT's sibling
`NAME.rank{r}-of-{n}.hdf5`, and rank 0 then writes OUTPUT itself as a file of HDF5 external links to
those datasets, so readers see one file with the usual layout (keep the files together).

Every file embed writes carries the root attribute `written_by = "spacy-elmo embed"` (`WRITTEN_BY`).
An existing OUTPUT (or rank file) is refused before any work, in one line, unless `overwrite`
(`files.check_output`, the one overwrite policy of the commands); a refused or failed run leaves it
as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..constants import DEFAULT_DEVICE
from ..devices import Distributed, pick_device
from ..files import check_output, made_folders, start_temporary, temporary_sibling
from ..precision import Precision, check_precision
from ..text_input import TextError, check_text_input, make_tokenizer, read_lines, stdin_bytes
from .options import OPTIONS


def _count_lines(path: Path) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


WRITTEN_BY = "spacy-elmo embed"  # the root attribute `written_by` of every file embed writes


def written_by_embed(path: Path) -> bool:
    """Whether `path` is an HDF5 file embed wrote (its root attribute `written_by`)."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            return handle.attrs.get("written_by") == WRITTEN_BY
    except OSError:  # not HDF5 (or unreadable): not ours
        return False


def rank_file(output: Path, rank: int, world_size: int) -> Path:
    return output.with_name(f"{output.stem}.rank{rank}-of-{world_size}{output.suffix or '.hdf5'}")


@torch.no_grad()
def dump_embeddings(
    model_ref: str | Path,
    input_path: str | Path,
    output_path: str | Path,
    *,
    batch_size: int = 32,
    data_format: str = "tokenized",
    lang: str = "en",
    progress: bool = True,
    device: str = DEFAULT_DEVICE,
    overwrite: bool = False,
    precision: str | None = None,
) -> int:
    """Writes the layers of every line of `input_path` ("-" = stdin) to `output_path`; returns lines written here.

    The input must be UTF-8 text with at least one non-empty line (`TextError` otherwise, naming
    the file and line); `device` is "auto" (CUDA when available), "cpu" or "cuda"; `precision`
    ("fp32" | "bf16" | "int8", `ElmoModel.set_precision`) replaces the model's own (None: as saved,
    fp32 unless its config.json records another). An existing `output_path` is refused
    (`FileExistsError`) unless `overwrite`."""
    import h5py

    from ..formats.references import parse_reference

    OPTIONS["embed"]["--batch-size"].check(batch_size, "batch_size")
    chosen = _check_precision(precision)  # before any work
    procs = Distributed.from_env(device)  # the same torchrun/device set-up as pretraining
    world, rank, torch_device = procs.world_size, procs.rank, procs.device
    output = Path(output_path)
    target = rank_file(output, rank, world) if world > 1 else output
    # before any work (the model is not loaded yet): what is there to replace, the model reference
    # (cheap: no weights read, no network), what there is to read, and that the output can be
    # written (its temporary file is made now)
    for path in {output, target}:
        check_output(path, overwrite=overwrite)
    reference = parse_reference(model_ref)
    checked = reference.check()
    check_text_input(input_path)
    tokenize = make_tokenizer(data_format, lang)
    with made_folders(output.parent), temporary_sibling(target) as tmp:
        start_temporary(tmp, target)
        model, tokenizer = reference.load(checked=checked)
        model = _with_precision(model.to(torch_device).eval(), chosen)
        from_stdin = str(input_path) == "-"
        bar = None
        if progress and rank == 0:  # only a shown bar needs the line count (a second pass over the file)
            from tqdm import tqdm

            total = None if from_stdin else _count_lines(Path(input_path))
            # (shown on a terminal only: disable=None)
            bar = tqdm(total=total, unit="line", dynamic_ncols=True, mininterval=1.0, disable=None)
        written = 0
        where = "<stdin>" if from_stdin else str(input_path)
        file = None if from_stdin else open(input_path, "rb")  # (standard input stays open)
        handle = stdin_bytes() if file is None else file
        has_text = False
        try:
            with h5py.File(tmp, "w") as out:
                out.attrs["written_by"] = WRITTEN_BY
                chunk: list[tuple[int, list[str]]] = []

                def flush():
                    nonlocal written
                    chunk.sort(key=lambda item: len(item[1]))
                    for start in range(0, len(chunk), batch_size):
                        part = chunk[start : start + batch_size]
                        real = [(i, words) for i, words in part if words]
                        if real:
                            inputs = tokenizer([words for _, words in real]).to(torch_device)
                            layers = torch.stack(model(**inputs).hidden_states, dim=1).float().cpu()
                            for row, (i, words) in enumerate(real):
                                out.create_dataset(str(i), data=layers[row, :, : len(words)].numpy())
                        for i, words in part:
                            if not words:
                                out.create_dataset(
                                    str(i),
                                    shape=(model.config.num_output_layers, 0, model.config.output_dim),
                                    dtype="float32",
                                )
                        written += len(part)
                    chunk.clear()

                for index, line in enumerate(read_lines(handle, where)):
                    has_text = has_text or bool(line.strip())
                    if index % world == rank:
                        chunk.append((index, tokenize(line.strip())))
                        if len(chunk) >= batch_size * 16:
                            flush()
                    if bar is not None:
                        bar.update(1)
                flush()
            if not has_text:
                raise TextError(f"{where}: no input: the file is empty (give one sentence per line)")
            os.replace(tmp, target)
        finally:
            if file is not None:
                file.close()
            if bar is not None:
                bar.close()
    if world > 1:
        procs.barrier()
        if procs.is_main:
            _link_shards(output, world)
        procs.barrier()
    return written


def _check_precision(precision: str | None) -> Precision | None:
    return None if precision is None else check_precision(precision, "precision")


def _with_precision(model, precision: Precision | None):
    """`model` computing in the checked `precision` (None: the precision it was saved with)."""
    from ..hf.modeling_elmo import bind_precision

    if precision is not None:
        bind_precision(model, precision)
    return model


def print_embeddings(
    model_ref: str | Path,
    *,
    dims: int = 6,
    data_format: str = "tokenized",
    lang: str = "en",
    device: str = DEFAULT_DEVICE,
    precision: str | None = None,
) -> None:
    """`spacy-elmo embed MODEL` (no files): each sentence of standard input (one per line) and the
    first `dims` components of its words' vectors (the mean of the layers) on standard output."""
    from ..formats.references import parse_reference

    OPTIONS["embed"]["--dims"].check(dims, "dims")
    chosen = _check_precision(precision)  # before any work
    reference = parse_reference(model_ref)
    checked = reference.check()  # cheap: no weights read, no network
    tokenize = make_tokenizer(data_format, lang)
    # standard input is read (and decoded) whole before the model loads
    lines = [words for words in (tokenize(line.strip()) for line in read_lines(stdin_bytes(), "<stdin>")) if words]
    if not lines:
        raise TextError("<stdin>: no input: give one sentence per line on stdin")
    model, tokenizer = reference.load(checked=checked)
    model = _with_precision(model.to(pick_device(device)), chosen)
    torch.set_printoptions(precision=4, sci_mode=False)
    with torch.no_grad():
        for words in lines:
            out = model(**tokenizer([words]).to(model.device))
            layers = torch.stack(out.hidden_states)[:, 0].float().cpu()
            print(f"sentence: {' '.join(words)}")
            print(f"layers: {tuple(layers.shape)}  (L+1 layers, tokens, dim)")
            for i, word in enumerate(words):
                vec = layers.mean(0)[i]
                shown = ", ".join(f"{v:.4f}" for v in vec[:dims].tolist())
                print(f"  {word:>15s}  [{shown}{', ...' if vec.numel() > dims else ''}]")


def _link_shards(output: Path, world: int) -> None:
    """OUTPUT as one file of external links to the per-rank files' datasets (relative names)."""
    import h5py

    with temporary_sibling(output) as tmp:
        with h5py.File(tmp, "w") as master:
            master.attrs["written_by"] = WRITTEN_BY
            for rank in range(world):
                part = rank_file(output, rank, world)
                with h5py.File(part, "r") as handle:
                    names = list(handle.keys())
                for name in names:
                    master[name] = h5py.ExternalLink(part.name, name)
        os.replace(tmp, output)


__all__ = ["WRITTEN_BY", "dump_embeddings", "print_embeddings", "rank_file", "written_by_embed"]
