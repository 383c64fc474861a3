"""The `spacy-elmo` command line: one module per command, each with its arguments and a thin handler
that parses them and makes one call into the module doing the work (`tools/`, `training/`).

- `convert`, `embed`, `pretrain` (pretrain and finetune), `similar`, `init_config`, `probe`: the commands.
- `arguments`: what they share (the parser, the help formatter, `--device`, `--no-progress`) and the
  convention for a user's mistake: `error: ` lines on stderr, exit status 2.

Only the standard library is imported here and by the command modules: each handler imports what it
uses (spaCy, the tools, training) when it runs. (Importing this package runs `spacy_elmo/__init__`,
which registers the model with transformers; the console script `spacy_elmo_cli` answers `--version`
before that.)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator

from ..constants import VERSION
from . import convert, embed, init_config, pretrain, probe, similar
from .arguments import TERMINATED, USER_ERROR, Parser, Terminated

COMMANDS = (convert, init_config, embed, pretrain, similar, probe)  # the order --help lists them in


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="spacy-elmo", description="ELMo for spaCy and Hugging Face")
    parser.add_argument("--version", action="version", version=f"spacy-elmo {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_to(sub)
    return parser


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """For the block: SIGTERM raises `Terminated` in the command (Python's default would end the
    process without running a single `finally`), SIGINT KeyboardInterrupt as ever; and either, when
    it lands in a weakref callback or a `__del__` (where Python can only print "Exception ignored"
    and carry on: h5py's objects have them), is sent again a moment later, from another thread, to
    land at the next point it can: sent at once, Python 3.10 runs its handler in the hook that caught
    it (where what it raises is lost: the command went on). Signal handlers belong to the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = {Terminated: signal.SIGTERM, KeyboardInterrupt: signal.SIGINT}
    in_hook: list[bool] = []

    def send_later(signum: int) -> None:
        timer = threading.Timer(0.01, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()

    def terminate(signum, frame):
        if in_hook:
            return send_later(signum)
        raise Terminated()

    def interrupt(signum, frame):
        if in_hook:
            return send_later(signum)
        raise KeyboardInterrupt()

    hook = sys.unraisablehook

    def send_again(unraisable) -> None:
        in_hook.append(True)
        try:
            signum = raised.get(type(unraisable.exc_value))
            if signum is None:
                hook(unraisable)
            else:
                send_later(signum)
        finally:
            in_hook.clear()

    handlers = ((signal.SIGTERM, terminate), (signal.SIGINT, interrupt))
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers}
    sys.unraisablehook = send_again
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# a config override, `--section.key` (its value follows, or is given with `=`): spaCy's form
_OVERRIDE = re.compile(r"^--[A-Za-z_][\w-]*(\.[\w-]+)+(=.*)?$")


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """(arguments, config overrides): the `--section.key value` pairs taken out wherever they are,
    so that an option before a positional argument (`pretrain --paths.train x.txt my.cfg`) does not
    make its value the positional one. A key followed by another option, or by nothing, is a flag."""
    rest: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if _OVERRIDE.match(arg):
            overrides.append(arg)
            if "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                overrides.append(argv[i + 1])
                i += 1
        else:
            rest.append(arg)
        i += 1
    return rest, overrides


def error_lines(err: BaseException) -> list[str]:
    """The lines of a user's mistake: its message, or for an error straight from the OS the path and
    the OS's reason (`[Errno 13] Permission denied: 'x'` → `x: Permission denied`); paths as the user
    gave them (`files.user_path`: no temporary names)."""
    from ..files import user_path

    text = str(err)
    if isinstance(err, OSError) and err.strerror and err.filename is not None and text.startswith("[Errno"):
        target = err.filename2 if err.filename2 is not None else err.filename
        text = f"{os.fsdecode(target)}: {err.strerror}"
    return [user_path(line) for line in text.splitlines()] or [type(err).__name__]


def _discard_stdout() -> None:
    """Standard output's reader is gone: what Python would flush to it at exit goes nowhere (else
    it reports the broken pipe once more, as "Exception ignored")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # (no file descriptor: a replaced sys.stdout)
        pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    arguments, overrides = split_overrides(argv)
    args, extra = parser.parse_known_args(arguments)
    args.argv = argv  # the command line as given, for a record of it (the library reads no argv)
    if extra or (overrides and not getattr(args, "accepts_overrides", False)):
        parser.error(f"unrecognized arguments: {' '.join(extra + overrides)}")
    args.overrides = overrides
    try:
        with _signals_raise():
            if getattr(args, "no_progress", False):  # --no-progress also hides transformers' and the hub's bars
                from ..quiet import no_progress_bars

                with no_progress_bars():
                    status = args.func(args)
            else:
                status = args.func(args)
            sys.stdout.flush()  # (here, where a reader that went away ends the command quietly)
            return status
    except BrokenPipeError:  # the reader of the output stopped (`| head`): done, quietly
        _discard_stdout()
        return 0
    except (FileNotFoundError, ValueError, OSError) as err:  # the user's mistake (a missing model included)
        for line in error_lines(err):  # several problems: one line each
            print(f"error: {line}", file=sys.stderr)
        return USER_ERROR
    except Terminated:
        print("terminated", file=sys.stderr)
        return TERMINATED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


__all__ = ["Terminated", "build_parser", "error_lines", "main", "split_overrides"]
