"""Where a result came from: commit, dirty tree, exact configs, command, seed, machine, UTC times.

Every project step that writes results records one of these (a `provenance.json` beside a training
output, a `provenance` block inside a JSON result). As a library::

    from spacy_elmo.provenance import Provenance
    prov = Provenance(command=["train", "ner.cfg"], seed=0, configs=["configs/ner_elmo.cfg"])   # start time now
    ...                                                                            # do the work
    prov.write(out_dir / "provenance.json")   # end time, copies of the configs in out_dir/configs/

The project's wrapper around a command it does not own (`python -m lab.experiments.provenance_step --out X --
CMD ...`) is the lab's, in lab/: it does not ship with the package.
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .constants import CONFIG_FILE, VERSION, WEIGHTS_FILE

__all__ = ["Provenance", "cpu_kind", "git_state", "input_hashes", "machine", "portable", "sha256", "threads", "utc_now"]


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# what identifies a model directory a command reads: its config and weights
HASHED_MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE)


def input_hashes(command: Sequence[str], exclude: Iterable[str | os.PathLike] = ()) -> dict[str, str]:
    """{argument: sha256} of what a command reads: every argument after the program (or the value of
    a `--key=value` one) naming an existing file, and for one naming a model directory its config.json
    and model.safetensors (as "DIR/config.json", ...), for any other directory the files in it, as
    pretraining reads a directory (the module after `-m` is a name, not a path, even where a folder of
    that name is in the working directory). A glob pattern or comma-separated list
    (`--paths.train 'corpus/*.txt'`) gives each file it names (as "corpus/a.txt", ...), expanded as
    pretraining expands it. Paths under `exclude` (e.g. the command's output) are left out. Two runs
    with equal commands and equal hashes read the same settings and data. Names are `portable`, as a
    record writes its command."""
    from .files import resolve_files

    skip = [Path(p).resolve() for p in exclude]

    def skipped(path: Path) -> bool:
        return any(path.resolve() == s or s in path.resolve().parents for s in skip)

    found: dict[str, str] = {}
    args = [str(a) for a in list(command)[1:]]
    for index, arg in enumerate(args):
        if index and args[index - 1] == "-m":  # `python -m spacy_elmo`: a module, not the package's folder
            continue
        text = str(arg).split("=", 1)[1] if str(arg).startswith("--") and "=" in str(arg) else str(arg)
        path = Path(text)
        try:
            exists = path.exists()
            if not exists and (glob.has_magic(text) or "," in text):
                found.update({str(f): sha256(f) for f in resolve_files(text) if not skipped(f)})
            if not exists or skipped(path):
                continue
        except OSError:  # a name too long for a path, a pattern matching nothing (FileNotFoundError): no file
            continue
        if path.is_file():
            found[text] = sha256(path)
        elif path.is_dir():
            files = [path / name for name in HASHED_MODEL_FILES if (path / name).is_file()]
            if not files:
                try:
                    files = resolve_files(path)
                except FileNotFoundError:  # no files in it
                    pass
            found.update({f"{text}/{f.name}": sha256(f) for f in files if not skipped(f)})
    # named as the record names them (the tree's root looked up once, and only for an absolute name)
    root = _tree_root() if any(os.path.isabs(name) for name in found) else None
    return {portable(name, root): digest for name, digest in found.items()}


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(where: str | os.PathLike | None = None) -> dict:
    """Commit, branch and dirty paths of the git tree holding `where` (default: the working directory);
    if that is not in a git tree, of the tree holding this package's source; else {"commit": None}."""
    for candidate in (Path(where or os.getcwd()), Path(__file__).resolve().parent):
        root_path = _tree_root(candidate)
        if root_path is None:
            continue
        commit = (_git(["rev-parse", "HEAD"], root_path) or "").strip() or None
        status = _git(["status", "--porcelain", "--untracked-files=normal"], root_path) or ""
        dirty = sorted({line[3:].strip() for line in status.splitlines() if line.strip()})
        return {
            "commit": commit,
            "branch": (_git(["rev-parse", "--abbrev-ref", "HEAD"], root_path) or "").strip() or None,
            "dirty": bool(dirty),
            "dirty_paths": dirty,
            "source": "working directory" if candidate == Path(where or os.getcwd()) else "spacy_elmo package",
        }
    return {"commit": None, "branch": None, "dirty": None, "dirty_paths": [], "source": None}


def portable(arg: str, root: str | os.PathLike | None = None) -> str:
    """`arg` as a reader of a committed record can use it: a path inside the git tree `root` (default: the
    working directory's tree) relative to that tree, this Python as "python", any other absolute path by
    its name alone. A folder of the machine that wrote a record means nothing to anyone else."""
    if not os.path.isabs(arg):
        return arg
    if arg == sys.executable:
        return "python"
    base = Path(root) if root is not None else _tree_root()
    if base is not None:
        try:
            return Path(arg).resolve().relative_to(base.resolve()).as_posix() or "."
        except ValueError:
            pass
    return Path(arg).name


def _tree_root(where: str | os.PathLike | None = None) -> Path | None:
    where = Path(where or os.getcwd())
    root = _git(["rev-parse", "--show-toplevel"], where if where.is_dir() else where.parent)
    return Path(root.strip()) if root else None


# the instruction-set flags that decide which kernels a CPU runs (and so how a float32 result rounds)
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (lower-case keys); empty where there is none."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            info[key.strip().lower()] = value.strip()
    except OSError:
        pass
    return info


def _cpu_model() -> str:
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_kind() -> dict:
    """What tells one CPU generation from another: vendor, family and model number (/proc/cpuinfo's
    `vendor_id`, `cpu family`, `model`) and the kernel-choosing flags it has. The model *name* does not:
    every AMD EPYC generation here is named just "AMD EPYC". None where /proc/cpuinfo is absent."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())

    def number(key: str) -> int | None:
        return int(info[key]) if info.get(key, "").isdigit() else None

    return {
        "vendor": info.get("vendor_id") or None,
        "family": number("cpu family"),
        "model": number("model"),
        "flags": [flag for flag in KERNEL_FLAGS if flag in flags],
    }


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - not installed (or odd metadata): record None
        return None


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def threads(env: Mapping[str, str] | None = None) -> dict:
    """The thread settings of `env` (default: this process's environment) that change a CPU run's
    arithmetic: torch's matrix products sum in another order with another thread count."""
    env = os.environ if env is None else env
    return {key: env[key] for key in THREAD_VARIABLES if key in env}


def machine(env: Mapping[str, str] | None = None) -> dict:
    """CPU model name and kind (`cpu_kind`), cores, memory, load average, GPU (if torch sees one), Python and
    library versions, and the thread settings of `env`: the environment the work ran in (default: this
    process's). The load average (1, 5 and 15 min, when the record is made) is what a reader needs to judge a
    time taken on shared cores."""
    info = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_kind": cpu_kind(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "load_average": _load_average(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "spacy": _version("spacy"),
        "thinc": _version("thinc"),
        "transformers": _version("transformers"),
        "spacy_elmo": VERSION,
        "gpu": None,
        "threads": threads(env),
    }
    if "torch" in sys.modules:  # only ask CUDA when torch is already loaded (importing it costs seconds)
        torch = sys.modules["torch"]
        try:
            if torch.cuda.is_available():
                info["gpu"] = torch.cuda.get_device_name(0)
        except Exception:  # noqa: BLE001
            pass
    return info


def _load_average() -> list[float] | None:
    try:
        return [round(load, 2) for load in os.getloadavg()]
    except OSError:  # not every platform has one
        return None


class Provenance:
    """One record: created at the start of the work, written at its end."""

    def __init__(
        self,
        command: Sequence[str],
        seed: int | None = None,
        configs: Iterable[str | os.PathLike] = (),
        where: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None,
        **extra,
    ):
        """`command`: the command line of the work, as its caller has it (the library reads no
        argv: a command-line face passes its own). `env`: the environment the work runs in when it
        is not this process's (a child's), for its thread settings."""
        self.started = utc_now()
        self.env = dict(env) if env is not None else None
        self.command = [str(c) for c in command]
        self.seed = seed
        self.configs = [Path(c) for c in configs]
        self.git = git_state(where)
        self.root = _tree_root(where)
        self.extra = extra
        # hash now: a config edited while the work runs must not be credited to this result
        self.config_hashes = {str(c): sha256(c) for c in self.configs if c.is_file()}
        self.config_texts = {str(c): c.read_bytes() for c in self.configs if c.is_file()}

    def record(self, config_dir: Path | None = None, **more) -> dict:
        configs = []
        for path in self.configs:
            entry = {"path": portable(str(path), self.root), "sha256": self.config_hashes.get(str(path))}
            if config_dir is not None and str(path) in self.config_texts:
                config_dir.mkdir(parents=True, exist_ok=True)
                copy = config_dir / path.name
                copy.write_bytes(self.config_texts[str(path)])
                entry["copy"] = copy.relative_to(config_dir.parent).as_posix()  # beside the record
            configs.append(entry)
        return {
            "git": self.git,
            "command": [portable(arg, self.root) for arg in self.command],
            "cwd": portable(os.getcwd(), self.root),
            "seed": self.seed,
            "configs": configs,
            "machine": machine(self.env),
            "started_utc": self.started,
            "ended_utc": utc_now(),
            **self.extra,
            **more,
        }

    def write(self, path: str | os.PathLike, **more) -> dict:
        """Writes `path` (JSON) and copies the configs into `path.parent/configs/`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = self.record(config_dir=path.parent / "configs", **more)
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")
        return record
