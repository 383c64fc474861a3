"""docs/architecture.md's folder map is the layout: every module of spacy_elmo falls under one of its
rows, each imports only modules of its own level or below (the import direction the doc states),
tests/ mirrors the package's folders, and the lab (lab/) uses the package's public API only."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spacy_elmo"
ROW = re.compile(r"^\| `([^`]+(?:\.py|/))` \| (\d) \| .+ \|$", re.M)


def documented_levels() -> dict[str, int]:
    """{row path: level} of docs/architecture.md's folder map (a folder's row ends in "/")."""
    rows = ROW.findall((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    paths = [path for path, _ in rows]
    assert len(paths) == len(set(paths)), f"listed twice: {sorted({p for p in paths if paths.count(p) > 1})}"
    return {path: int(level) for path, level in rows}


def module_files() -> list[str]:
    return sorted(str(p.relative_to(PACKAGE).as_posix()) for p in PACKAGE.rglob("*.py"))


def row_of(path: str, rows: dict[str, int]) -> str:
    """The folder-map row a module falls under: its own, else its top folder's."""
    if path in rows:
        return path
    folder = path.split("/")[0] + "/"
    assert folder in rows and "/" in path, f"{path}: under no row of docs/architecture.md's folder map"
    return folder


def module_name(path: str) -> str:
    parts = ("spacy_elmo", *Path(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: str, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports, at the top or inside a function."""
    name = module_name(path)
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: `from ..x import Y` in spacy_elmo/training/ is spacy_elmo.x
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:  # `from . import kernels` imports a module, `from .x import Y` the module x
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def levels_by_module() -> dict[str, int]:
    rows = documented_levels()
    return {module_name(path): rows[row_of(path, rows)] for path in module_files()}


def test_every_module_falls_under_one_row_and_every_row_exists():
    rows = documented_levels()
    used = {row_of(path, rows) for path in module_files()}
    assert set(rows) - used == set(), "docs/architecture.md lists paths that do not exist"


def test_at_most_eleven_modules_at_the_top():
    """Level 0's shared pieces and the entry points; the eleventh, constants.py, owns the names and defaults
    the standard-library-only CLI reads, which no other top module's job covers."""
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert 0 < len(top) <= 11, sorted(top)


def test_imports_point_to_the_same_level_or_below():
    levels = levels_by_module()
    upward = [
        f"{module_name(path)} (level {levels[module_name(path)]}) imports {target} (level {levels[target]})"
        for path in module_files()
        for target in sorted(imported_modules(path, set(levels)))
        if levels[target] > levels[module_name(path)]
    ]
    assert upward == []
    # the walk sees imports at all: a few edges the doc's diagram shows
    assert "spacy_elmo.kernels" in imported_modules("hf/modeling_elmo.py", set(levels))
    assert "spacy_elmo.hf.tokenization_elmo" in imported_modules("hf/model_directory.py", set(levels))  # in a function
    assert "spacy_elmo" in imported_modules("training/pretrain.py", set(levels))  # `from .. import save_legacy`


def test_the_walk_refuses_an_upward_import(tmp_path, monkeypatch):
    """An import from the model up into a face is found (the check above is not vacuous)."""
    levels = levels_by_module()
    fake = tmp_path / "spacy_elmo"
    (fake / "hf").mkdir(parents=True)
    (fake / "hf" / "modeling_elmo.py").write_text("from ..spacy.component import make_elmo\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    found = imported_modules("hf/modeling_elmo.py", set(levels))
    assert (
        found == {"spacy_elmo.spacy.component"}
        and levels["spacy_elmo.spacy.component"] > levels["spacy_elmo.hf.modeling_elmo"]
    )


def test_tests_mirror_the_package():
    """One test folder per folder of the package, none for a folder it lacks; beside them tests/lab (the lab's
    modules), tests/project (the workflows, docs, this layout, packaging and release) and the fixtures."""
    package = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    beside = {"lab", "project", "fixtures"}
    folders = {p.name for p in (ROOT / "tests").iterdir() if any(p.glob("*.py")) or p.name == "fixtures"}
    assert folders - beside == package and beside <= folders


def test_no_link_in_the_package():
    assert [p for p in PACKAGE.rglob("*") if p.is_symlink()] == []


# what reads the process's command line or its call stack
_ARGV_OR_STACK = {
    ("sys", "argv"),
    ("sys", "_getframe"),
    ("inspect", "stack"),
    ("inspect", "currentframe"),
    ("inspect", "getouterframes"),
    ("inspect", "getframeinfo"),
    ("traceback", "extract_stack"),
}


def argv_or_stack_reads(source: str) -> list[str]:
    """`module.name` reads (or `from module import name`) of argv or the call stack in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in _ARGV_OR_STACK:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in {m for m, _ in _ARGV_OR_STACK}:
            found += [
                f"{node.module}.{a.name} (line {node.lineno})"
                for a in node.names
                if (node.module, a.name) in _ARGV_OR_STACK
            ]
    return found


def test_the_library_reads_no_argv_nor_call_stack():
    """Only the command-line faces (`cli/`, `__main__.py`; `spacy_elmo_cli.py` beside the package)
    read the process's argv; everything else is given what it records (e.g. `Provenance(command)`)."""
    found = {
        path: reads
        for path in module_files()
        if not path.startswith("cli/") and path != "__main__.py"
        for reads in [argv_or_stack_reads((PACKAGE / path).read_text(encoding="utf-8"))]
        if reads
    }
    assert found == {}
    assert argv_or_stack_reads("import sys\nfrom inspect import stack\ncommand = sys.argv\n") == [
        "inspect.stack (line 2)",
        "sys.argv (line 3)",
    ]


def test_the_lab_is_one_package_and_the_library_never_imports_it():
    """lab/ is a package whose modules import each other as `lab.NAME` (run as `python -m lab.NAME`): nothing
    edits sys.path, and spacy_elmo/ imports nothing of it."""
    assert (ROOT / "lab" / "__init__.py").is_file() and not [*ROOT.glob("scripts/*.py"), *ROOT.glob("bench/*.py")]
    edits = [
        p.relative_to(ROOT).as_posix()
        for folder in ("lab", "spacy_elmo")
        for p in (ROOT / folder).rglob("*.py")
        if re.search(r"sys\.path\.(insert|append)|syspath_prepend", p.read_text(encoding="utf-8"))
    ]
    assert edits == []
    imports = [
        f"{path}: {target}"
        for path in module_files()
        for node in ast.walk(ast.parse((PACKAGE / path).read_text(encoding="utf-8")))
        for target in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        if target.split(".")[0] == "lab"
    ]
    assert imports == []


LAB_FOLDERS = {"data", "experiments", "reports", "benchmarks", "gpu"}
MAX_LAB_MODULE_LINES = 800


def test_the_lab_is_in_folders_by_job_and_no_module_is_long():
    """lab/ holds folders by job (lab/__init__.py names them), each a package; no module sits loose beside them
    and none is over 800 lines, so that a reader finds a step by what it does and reads it whole."""
    folders = {p.name for p in (ROOT / "lab").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == LAB_FOLDERS
    assert all((ROOT / "lab" / folder / "__init__.py").is_file() for folder in folders)
    assert [p.name for p in (ROOT / "lab").glob("*.py")] == ["__init__.py"]
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in (ROOT / "lab").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LAB_MODULE_LINES
    }
    assert long == {}


# --- the lab (lab/) uses the public API only --------------------------------------------------------------

LAB = sorted((ROOT / "lab").rglob("*.py"))
PUBLIC_ROW = re.compile(r"^\| `(spacy_elmo[\w.]*)` \| ([^|]+) \| [^|]+ \|$", re.M)

# Imports the public API does not offer, by file (lab/NAME.py), each with its reason; an entry no longer needed
# fails below, so that it goes with the use. None is allowed now.
NOT_YET_PUBLIC: dict[str, dict[str, set[str]]] = {}


def public_names() -> dict[str, set[str]]:
    """{module: names} of docs/architecture.md's table of the public API."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## The public API") :]
    section = section[: section.index("\n## ")]
    rows = PUBLIC_ROW.findall(section)
    modules = [module for module, _ in rows]
    assert rows and len(modules) == len(set(modules)), (
        f"listed twice: {sorted({m for m in modules if modules.count(m) > 1})}"
    )
    return {module: set(re.findall(r"`([^`]+)`", names)) for module, names in rows}


def lab_imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) of everything `path` takes from spacy_elmo: `from M import N` (N a name of M, or the
    submodule M.N, then also (M.N, A) for each attribute A read from it), `import M` ((M, "")), at the top
    or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, str]] = set()
    modules: dict[str, str] = {}  # local name -> spacy_elmo module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "spacy_elmo":
            for alias in node.names:
                found.add((node.module, alias.name))
                if (PACKAGE.parent / node.module.replace(".", "/") / alias.name).is_dir() or (
                    PACKAGE.parent / node.module.replace(".", "/") / f"{alias.name}.py"
                ).is_file():
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "spacy_elmo":
                    found.add((alias.name, ""))
                    if alias.asname:
                        modules[alias.asname] = alias.name
    for node in ast.walk(tree):  # `char_cnn.column_plan`, `spacy_elmo.ElmoModel`: names read from a module
        if isinstance(node, ast.Attribute):
            chain = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and (value.id in modules or value.id == "spacy_elmo"):
                module = modules.get(value.id, value.id)
                while (
                    chain
                    and (PACKAGE.parent / module.replace(".", "/") / chain[0]).is_dir()
                    or (chain and (PACKAGE.parent / module.replace(".", "/") / f"{chain[0]}.py").is_file())
                ):
                    module = f"{module}.{chain.pop(0)}"
                if chain:
                    found.add((module, chain[0]))
    return found


def refused(module: str, name: str, public: dict[str, set[str]]) -> str | None:
    """Why the lab may not take `name` from `module` (None: it may)."""
    if any(part.startswith("_") for part in [*module.split("."), name] if part):
        return "private"
    if not name:  # `import spacy_elmo.x`: the module itself
        return None if module in public else "a module the public API does not list"
    if name in public.get(module, set()):
        return None
    if f"{module}.{name}" in public:
        return None  # a listed submodule (`from spacy_elmo.spacy import component`)
    return "not in docs/architecture.md's public API"


def test_the_public_api_lists_names_that_exist_in_their_modules():
    import importlib

    problems = []
    for module, names in public_names().items():
        loaded = importlib.import_module(module)
        exported = getattr(loaded, "__all__", None)
        for name in sorted(names):
            if name.startswith("_"):
                problems.append(f"{module}.{name}: private")
            elif not hasattr(loaded, name):
                problems.append(f"{module}.{name}: no such name")
            elif exported is not None and name not in exported:
                problems.append(f"{module}.{name}: not in the module's __all__")
    assert problems == []


def test_the_lab_imports_only_public_names():
    public = public_names()
    problems, allowed_uses = [], set()
    for path in LAB:
        relative = path.relative_to(ROOT).as_posix()
        allowed = NOT_YET_PUBLIC.get(relative, {})
        for module, name in sorted(lab_imports(path)):
            why = refused(module, name, public)
            if why is None:
                continue
            if name in allowed.get(module, set()):
                allowed_uses.add((relative, module, name))
                continue
            problems.append(f"{relative}: {module} {name or '(module)'}: {why}")
    assert problems == [], "\n".join(problems)
    unused = {(f, m, n) for f, names in NOT_YET_PUBLIC.items() for m, ns in names.items() for n in ns} - allowed_uses
    assert unused == set(), f"NOT_YET_PUBLIC entries no longer needed (remove them): {sorted(unused)}"


def test_lab_imports_are_all_seen(tmp_path):
    """The reader sees imports inside functions, submodules and attributes read from them, and refuses
    private and unlisted names."""
    lab = tmp_path / "lab.py"
    lab.write_text(
        "from spacy_elmo.provenance import sha256 as _sha\n"
        "import spacy_elmo.formats.references\n"
        "def f():\n"
        "    from spacy_elmo import ElmoModel\n"
        "    from spacy_elmo.spacy import component\n"
        "    from spacy_elmo.kernels import char_cnn\n"
        "    from spacy_elmo.hf.modeling_elmo import _private\n"
        "    return char_cnn.column_plan, spacy_elmo.formats.references.load_model, component.make_elmo\n",
        encoding="utf-8",
    )
    found = lab_imports(lab)
    assert found == {
        ("spacy_elmo.provenance", "sha256"),
        ("spacy_elmo.formats.references", ""),
        ("spacy_elmo", "ElmoModel"),
        ("spacy_elmo.spacy", "component"),
        ("spacy_elmo.kernels", "char_cnn"),
        ("spacy_elmo.kernels.char_cnn", "column_plan"),
        ("spacy_elmo.hf.modeling_elmo", "_private"),
        ("spacy_elmo.formats.references", "load_model"),
        ("spacy_elmo.spacy.component", "make_elmo"),
    }
    public = public_names()
    verdicts = {item: refused(*item, public) for item in found}
    assert {item for item, why in verdicts.items() if why is None} == {
        ("spacy_elmo.provenance", "sha256"),
        ("spacy_elmo.formats.references", ""),
        ("spacy_elmo", "ElmoModel"),
        ("spacy_elmo.spacy", "component"),
        ("spacy_elmo.formats.references", "load_model"),
    }
    assert verdicts[("spacy_elmo.hf.modeling_elmo", "_private")] == "private"
    assert verdicts[("spacy_elmo.kernels.char_cnn", "column_plan")] == "not in docs/architecture.md's public API"
