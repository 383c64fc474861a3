"""Quiet Hugging Face I/O: transformers' progress bars off for a block of code.

`save_pretrained` draws "Writing model shards" and `from_pretrained` "Loading weights" for a
sub-second local step; every load (`ElmoPreTrainedModel.from_pretrained`) and save
(`model_directory.save_model_directory`) of a model here runs inside `quiet_hf()`.
The hub's download bars (huggingface_hub's own) stay as they were: a download can take minutes.
`no_progress_bars()` silences both (the CLI's `--no-progress`). Both restore the previous state.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_hf() -> Iterator[None]:
    """transformers' own progress bars off inside the block, through its tqdm hook (no global switch
    touched; transformers releases without the hook, `compat.TQDM_HOOK`: its switch, restored after);
    huggingface_hub's download bars untouched where the hook exists."""
    from transformers.utils import logging as hf_logging

    from .compat import TQDM_HOOK

    if not TQDM_HOOK:
        with no_progress_bars():
            yield
        return
    previous = hf_logging.set_tqdm_hook(lambda factory, args, kwargs: factory(*args, **{**kwargs, "disable": True}))
    try:
        yield
    finally:
        hf_logging.set_tqdm_hook(previous)


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """Every transformers and huggingface_hub progress bar off inside the block."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    shown, hub_hidden = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
        if hub_hidden:
            disable_progress_bars()
        else:
            enable_progress_bars()


__all__ = ["quiet_hf", "no_progress_bars"]
