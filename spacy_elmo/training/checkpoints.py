"""What a pretraining run keeps on disk: checkpoints (atomic, with a `latest` pointer, pruned) and metrics.jsonl.

A checkpoint `OUTPUT/checkpoints/step-NNNNNNNN/` holds the model as HF writes it (`save_pretrained`:
config.json + model.safetensors, read back with the strict `from_pretrained`, safetensors only),
optimizer.pt and rng.pt (tensors and plain containers only, read with `torch.load(weights_only=True)`,
so a planted pickle is refused without running it), state.json and the run's config. It is written
into `.step-NNNNNNNN.tmp/`, every file and the directory fsynced, renamed into place, and only then
named in `latest` (itself written atomically), so a crash at any point leaves the previous
checkpoint loadable. A failing write (a full disk, an I/O error, including a failing directory
fsync) removes the partial directory and raises `CheckpointError`, one line naming the path.

Fault injection (tests): `SPACY_ELMO_CRASH_AT=POINT[:STEP]` ends the process with `os._exit(75)`,
and `SPACY_ELMO_FAIL_AT=POINT[:STEP]=ERRNO` (e.g. `mid-tensor:20=ENOSPC`) raises that OSError, at
POINT of the checkpoint of step STEP (any step without it): `mid-tensor` (half of optimizer.pt
written), `before-rename`, `before-latest`, `fsync-dir`; or `step` (right after optimizer step STEP).
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..constants import CHECKPOINTS_FOLDER, WEIGHTS_FILE
from ..files import write_text_atomic
from ..hf.model_directory import save_model_directory
from .batches import DataPosition
from .settings import PretrainError

CRASH_ENV, FAIL_ENV, CRASH_EXIT_CODE = "SPACY_ELMO_CRASH_AT", "SPACY_ELMO_FAIL_AT", 75


class CheckpointError(PretrainError):
    """A checkpoint could not be written (the previous one is intact) or read."""


def fault_point(point: str, step: int, path: Path | None = None) -> None:
    """A place where tests inject a crash or an OSError (see the module docstring); a no-op otherwise."""
    for variable in (CRASH_ENV, FAIL_ENV):
        spec = os.environ.get(variable)
        if not spec:
            continue
        target, _, code = spec.partition("=")
        name, _, at = target.partition(":")
        if name != point or (at and int(at) != step):
            continue
        if variable == CRASH_ENV:
            os._exit(CRASH_EXIT_CODE)
        number = getattr(errno, code or "EIO")
        raise OSError(number, os.strerror(number), None if path is None else str(path))


# --------------------------------------------------------------------------------------------------
# Files


def fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path, step: int = -1) -> None:
    """Makes the directory's entries (new, renamed files) durable. Failures raise: a rename that was
    not persisted is a checkpoint that may vanish. File systems that cannot sync a directory
    (EINVAL) are the one exception."""
    fault_point("fsync-dir", step, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def write_tensor_file(obj: Any, path: Path, step: int = -1) -> None:
    """`torch.save(obj)` to `path`, written in two halves (the `mid-tensor` fault point between) and fsynced."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getbuffer()
    half = len(data) // 2
    with open(path, "wb") as handle:
        handle.write(data[:half])
        handle.flush()
        os.fsync(handle.fileno())
        fault_point("mid-tensor", step, path)
        handle.write(data[half:])
        handle.flush()
        os.fsync(handle.fileno())


def read_tensor_file(path: Path, map_location=None) -> Any:
    """`torch.load(weights_only=True)`: tensors and plain containers only; anything else (a planted
    pickle) is refused without running it."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing") from None
    except Exception as err:  # pickle.UnpicklingError (a pickled object), RuntimeError (not a torch file), ...
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).split())
        found = re.search(r"WeightsUnpickler error: (.*?)(?: was not an allowed| Please|$)", text)
        reason = found.group(1) if found else text[:200]
        raise CheckpointError(f"{path}: refused to load, not a tensors-only torch file ({reason})") from None


def _os_error(err: Exception, path: Path) -> OSError | None:
    """The OSError behind `err`: itself, its context, or the errno safetensors' SafetensorError quotes."""
    if isinstance(err, OSError):
        return err
    if isinstance(err.__context__, OSError):
        return err.__context__
    found = re.search(r"os error (\d+)", str(err))
    if found:
        number = int(found.group(1))
        return OSError(number, os.strerror(number), str(path))
    return None


def _failure(err: OSError, final: Path, previous: Path | None) -> str:
    reason = (err.strerror or str(err)).lower()
    where = err.filename or final
    kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint exists"
    return f"cannot write checkpoint {final}: {reason} ({where}); {kept}"


# --------------------------------------------------------------------------------------------------
# Checkpoints


@dataclass
class TrainState:
    """The plain-number part of a run: what state.json of a checkpoint holds."""

    step: int = 0
    words: int = 0
    train_seconds: float = 0.0
    position: DataPosition = field(default_factory=DataPosition)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "words": self.words,
            "train_seconds": self.train_seconds,
            "position": self.position.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> TrainState:
        return cls(
            int(data["step"]),
            int(data["words"]),
            float(data["train_seconds"]),
            DataPosition.from_dict(data["position"]),
        )


class Checkpoints:
    """`OUTPUT/checkpoints`: step-NNNNNNNN directories and the `latest` pointer, written atomically."""

    def __init__(self, root: Path, keep: int = 2):
        self.root, self.keep = Path(root), keep

    def latest(self) -> Path | None:
        """The newest complete checkpoint (per `latest`, else the newest step directory with state.json)."""
        pointer = self.root / "latest"
        if pointer.is_file():
            candidate = self.root / pointer.read_text(encoding="utf-8").strip()
            if (candidate / "state.json").is_file():
                return candidate
        done = sorted(p for p in self.root.glob("step-*") if p.is_dir() and (p / "state.json").is_file())
        return done[-1] if done else None

    def save(self, step: int, model, tokenizer, optimizer_state: dict, rng: dict, texts: dict[str, str]) -> Path:
        """Writes checkpoint `step` (the model directory of `model` and `tokenizer`, optimizer and RNG
        state, `texts` as files); returns its directory. state.json must be among `texts`: it marks
        the checkpoint complete."""
        name = f"step-{step:08d}"
        final, tmp = self.root / name, self.root / f".{name}.tmp"
        previous = self.latest()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            save_model_directory(tmp, model, tokenizer, card=False)  # config.json, model.safetensors, tokenizer
            for written in tmp.iterdir():
                fsync_file(written)
            write_tensor_file(optimizer_state, tmp / "optimizer.pt", step)
            write_tensor_file(rng, tmp / "rng.pt", step)
            for filename, text in texts.items():
                with open(tmp / filename, "w", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
            fsync_dir(tmp, step)
            fault_point("before-rename", step, final)
            if final.exists():  # re-saving the same step (a resumed run that had nothing left to do)
                shutil.rmtree(final)
            os.replace(tmp, final)
            fsync_dir(self.root, step)
            fault_point("before-latest", step, self.root / "latest")
            write_text_atomic(self.root / "latest", name + "\n")
            fsync_dir(self.root, step)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)  # frees the space a partial write took
            if not isinstance(err, Exception):  # Ctrl-C, SIGTERM: the previous checkpoint stands
                raise
            cause = _os_error(err, tmp / WEIGHTS_FILE)
            if cause is None:
                raise
            raise CheckpointError(_failure(cause, final, previous)) from err
        self._prune(final)
        return final

    def _prune(self, newest: Path) -> None:
        done = sorted(p for p in self.root.glob("step-*") if p.is_dir())
        for old in [p for p in done if p != newest][: max(0, len(done) - self.keep)]:
            shutil.rmtree(old, ignore_errors=True)
        for tmp in self.root.glob(".step-*.tmp"):  # left by a crash mid-write
            shutil.rmtree(tmp, ignore_errors=True)
        for tmp in self.root.glob(".latest.tmp*"):
            tmp.unlink(missing_ok=True)

    # ---- reading -----------------------------------------------------------------------------------

    @staticmethod
    def load_model(path: Path, device: torch.device):
        """The checkpoint's model with LM head: HF's strict `from_pretrained`, safetensors only."""
        from ..hf.modeling_elmo import ElmoForBidirectionalLM

        try:
            model = ElmoForBidirectionalLM.from_pretrained(str(path), use_safetensors=True)
        except Exception as err:  # ElmoLoadError, OSError (no safetensors file), SafetensorError, ...
            first = " ".join(str(err).split())[:300]
            raise CheckpointError(f"cannot resume from {path}: the model does not load ({first})") from None
        return model.to(device).train()

    @staticmethod
    def load_optimizer(path: Path, device: torch.device) -> dict:
        return read_tensor_file(path / "optimizer.pt", map_location=device)

    @staticmethod
    def load_rng(path: Path, rank: int) -> dict[str, torch.Tensor] | None:
        """Process `rank`'s RNG states ("cpu", and "cuda" when saved) from rng.pt's [processes, state]
        stacks, or None when it holds fewer processes. Each state is a tensor of its own: a row of a
        stack is a view at an offset into the stack's storage, which torch's set_rng_state misreads
        (torch 2.13: "Invalid mt19937 state", or a crash)."""
        file = path / "rng.pt"
        saved = read_tensor_file(file)
        cpu = saved.get("cpu") if isinstance(saved, dict) else None
        expected = torch.get_rng_state()
        if not isinstance(cpu, torch.Tensor) or cpu.dtype != expected.dtype or cpu.shape[1:] != expected.shape:
            found = f"{cpu.dtype} {list(cpu.shape)}" if isinstance(cpu, torch.Tensor) else type(cpu).__name__
            raise CheckpointError(
                f"{file}: expected 'cpu': a uint8 tensor [processes, {expected.numel()}], found {found}"
            )
        if rank >= cpu.shape[0]:
            return None
        return {key: saved[key][rank].clone() for key in ("cpu", "cuda") if key in saved}

    @staticmethod
    def load_state(path: Path) -> tuple[TrainState, dict]:
        """state.json: the TrainState and the raw dict (with `world_size`)."""
        try:
            saved = json.loads((path / "state.json").read_text(encoding="utf-8"))
            return TrainState.from_dict(saved), saved
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"{path / 'state.json'}: unreadable ({err})") from None


# --------------------------------------------------------------------------------------------------
# Output directory


def interrupted_message(output: str | Path) -> str:
    """What an interrupted pretraining left in `output`: the checkpoint `--resume` continues from."""
    last = Checkpoints(Path(output) / CHECKPOINTS_FOLDER).latest()
    if last is None:
        return f"interrupted: no checkpoint was written to {output} yet"
    return (
        f"interrupted: {output} keeps its last checkpoint ({last.name}); "
        "the same command with --resume continues from it"
    )


def check_writable(output: Path) -> None:
    """Creates `output` and writes (then removes) a small probe file, or raises PretrainError."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".write-test-{os.getpid()}"
        with open(probe, "wb") as handle:
            handle.write(b"\0" * (1 << 16))
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OSError as err:
        raise PretrainError(f"--output {output}: cannot write there ({err.strerror or err})") from None


def check_free_space(output: Path, needed_bytes: int) -> None:
    """Raises PretrainError if the file system of `output` has less than `needed_bytes` free."""
    free = shutil.disk_usage(output).free
    if needed_bytes and free < needed_bytes:
        raise PretrainError(
            f"not enough free disk space in {output}: {free / 2**20:,.0f} MiB free, the checkpoints and "
            f"model need about {needed_bytes / 2**20:,.0f} MiB"
        )


# --------------------------------------------------------------------------------------------------
# Metrics


class MetricsLog:
    """`metrics.jsonl`: one JSON object per line (training records have "step", evaluations "heldout_ppl")."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = path, enabled

    def truncate_after(self, step: int) -> None:
        """Drops records past `step` (a resumed run rewrites them) and a torn last line."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [r for r in self.records() if r.get("step", 0) <= step]
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def records(self) -> list[dict]:
        """Every record of the log. Only the last line may be torn (a kill while appending: no final
        newline), and is skipped; an unparsable line anywhere else raises PretrainError naming it."""
        if not self.path.is_file():
            return []
        text = self.path.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        torn = lines.pop()  # "" when the file ends with a newline
        out = []
        for number, line in enumerate(lines, 1):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise PretrainError(
                    f"{self.path}, line {number}: not a JSON record ({err.msg}): {line[:80]!r}"
                ) from None
        if torn:
            try:
                out.append(json.loads(torn))  # complete, only its newline is missing
            except ValueError:
                pass
        return out

    def write(self, record: dict) -> None:
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")


__all__ = [
    "CheckpointError",
    "Checkpoints",
    "TrainState",
    "MetricsLog",
    "check_writable",
    "check_free_space",
    "fault_point",
    "fsync_dir",
    "interrupted_message",
    "read_tensor_file",
    "write_tensor_file",
]
