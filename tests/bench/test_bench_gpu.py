"""bench/gpu.sh installs what its runs import on the bare device image before running them, and says in
one line when it can't. No GPU here: the install step runs as pip's --dry-run, and what the device will
import is read from the code gpu.sh runs."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU_SH = ROOT / "bench" / "gpu.sh"
LOCAL = ("spacy_elmo", "bench")  # packages of this repository; tests/ and scripts/ modules are found by file
FLAT = (
    "tests",
    "scripts",
)  # folders whose modules are imported by bare name (bench's doc writers: scripts/doc_regions.py)


def _module_file(name: str) -> Path | None:
    """The file of a module of this repository (a package's __init__.py), None for any other."""
    parts = name.split(".")
    if parts[0] not in LOCAL:
        found = [ROOT / folder / f"{name}.py" for folder in FLAT if (ROOT / folder / f"{name}.py").is_file()]
        return found[0] if len(parts) == 1 and found else None
    base = ROOT.joinpath(*parts)
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def _imports(path: Path):
    """Every module `path` imports, at the top or inside a function (`from a import b`: a and a.b)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = list(parts[:-1])  # a module's package, or the package an __init__.py is
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".")
                if node.level
                else node.module
            )
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _outside_imports() -> set[str]:
    """The top-level modules from outside the repository and the standard library that what gpu.sh
    runs imports: its test files (with conftest.py) and `-m` modules, and the repository's modules
    they import, followed to the end."""
    script = GPU_SH.read_text(encoding="utf-8")
    modules = re.findall(r"-m ([\w.]+)", script)
    todo = [ROOT / "tests" / "conftest.py", *(ROOT / path for path in re.findall(r"tests/[\w/]+\.py", script))]
    todo += [_module_file(name) for name in modules if _module_file(name)]
    outside = {name.split(".")[0] for name in modules if not _module_file(name)}  # python -m pytest
    seen = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            if (found := _module_file(name)) is not None:
                todo.append(found)
            elif name.split(".")[0] not in (*LOCAL, "__future__", *sys.stdlib_module_names) and not _module_file(
                name.split(".")[0]
            ):
                outside.add(name.split(".")[0])
    assert (
        ROOT / "bench" / "gpu.py" in seen and ROOT / "spacy_elmo" / "training" / "pretrain.py" in seen
    )  # the end-to-end part
    return outside


def test_everything_gpu_sh_runs_imports_is_on_the_image_or_installed_from_the_carried_wheels():
    """Each outside module that the bench and the tests gpu.sh runs import comes from a distribution the
    device image holds or one that bench/device_wheels.py carries for its install step (pydantic, through
    the pretraining settings, was neither once, and the end-to-end part stopped there)."""
    sys.path.insert(0, str(ROOT))
    try:
        from bench.device_wheels import canonical, carried, image
    finally:
        sys.path.remove(str(ROOT))
    distributions = importlib.metadata.packages_distributions()
    outside = _outside_imports()
    assert {"torch", "spacy", "thinc", "pydantic"} <= outside  # pydantic: spacy_elmo.training.settings
    unknown = sorted(name for name in outside if name not in distributions)
    assert not unknown, f"imported by what gpu.sh runs but installed by no distribution here: {unknown}"
    there = image() | set(carried())
    missing = {name: distributions[name] for name in outside if not {canonical(d) for d in distributions[name]} & there}
    assert not missing, f"neither on the device image nor carried for gpu.sh's install step: {missing}"
    assert "torch" not in carried()  # the image's CUDA build stays


def _gpu_sh(*args, python: str | Path, wheels: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(python), **({"WHEELS": str(wheels)} if wheels else {})}
    return subprocess.run(["bash", str(GPU_SH), *args], capture_output=True, text=True, timeout=300, env=env)


def test_gpu_sh_parses_and_its_install_step_resolves_the_package_without_an_index():
    assert subprocess.run(["bash", "-n", str(GPU_SH)]).returncode == 0
    # here everything but the package itself is installed already, as torch is on the image
    done = _gpu_sh("--check", python=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Would install spacy-elmo-"), done.stdout


def test_gpu_sh_stops_at_a_failed_install_with_one_line_before_any_test(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    done = _gpu_sh(str(tmp_path / "gpu.json"), python=tmp_path / "bare" / "bin" / "python", wheels=tmp_path)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert (
        lines[0].startswith(f"gpu.sh: installing the package from {tmp_path}/ failed")
        and "No module named pip" in lines[0]
    )
    assert not (tmp_path / "gpu.json").exists()
