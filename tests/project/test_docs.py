"""The docs run: every python block of README.md and docs/*.md runs (blocks of one file in order,
sharing names, in a fresh folder holding tests/fixtures/allennlp_elmo, converted to models/fixture_elmo,
and the ELMoForManyLangs fixture as models/efml_zh), every
ini block parses and names registered architectures (every command the pages name exists and parses:
tests/project/test_documented_commands.py).
A block that cannot run offline is marked by an HTML comment `<!-- no-test ... -->` just before it."""

from __future__ import annotations

import inspect
import re
import shutil
from pathlib import Path

import pytest
import spacy
from confection import Config

from spacy_elmo.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!--\s*no-test[^>]*-->\s*\n)?^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(path: Path, lang: str):
    """(code, skipped) of each `lang` block in `path`."""
    return [(code, bool(skip)) for skip, kind, code in BLOCK.findall(path.read_text()) if kind == lang]


README_MAX_LINES = 150


def test_the_readme_stays_short():
    """README is the user's first page: at most 150 lines, the gains table `lab/reports/gains.py` writes into it
    included (when that table grows past it, the README gets a short form and the full one stays in
    results/gains.md)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, at most {README_MAX_LINES}"


def test_few_blocks_are_skipped():
    skipped = [
        (p.name, code[:40]) for p in DOCS for lang in ("python", "ini") for code, skip in blocks(p, lang) if skip
    ]
    assert len(skipped) <= 3, skipped


@pytest.mark.parametrize("doc", [p for p in DOCS if any(not s for _, s in blocks(p, "python"))], ids=lambda p: p.name)
def test_python_blocks_run(doc, allennlp_dir, tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(allennlp_dir, tmp_path / "tests" / "fixtures" / "allennlp_elmo")  # as the docs name it
    assert (
        main(
            [
                "convert",
                str(allennlp_dir / "options.json"),
                str(allennlp_dir / "lm_weights.hdf5"),
                "models/fixture_elmo",
            ]
        )
        == 0
    )
    # stands for an unzipped ELMoForManyLangs model
    shutil.copytree(allennlp_dir.parent / "efml_tiny", "models/efml_zh")
    namespace: dict = {"__name__": "__docs__"}
    for i, (code, skipped) in enumerate(blocks(doc, "python")):
        if not skipped:
            exec(compile(code, f"{doc.name} python block {i + 1}", "exec"), namespace)


def _architecture_blocks(config) -> list[dict]:
    found = []
    for value in config.values():
        if isinstance(value, dict):
            found += [value] if "@architectures" in value else []
            found += _architecture_blocks(value)
    return found


@pytest.mark.parametrize("doc", [p for p in DOCS if blocks(p, "ini")], ids=lambda p: p.name)
def test_config_blocks_parse(doc):
    for code, skipped in blocks(doc, "ini"):
        if skipped:
            continue
        # a fragment: declare the parents of its sections ([a.b.c] needs [a] and [a.b])
        sections = re.findall(r"^\[([^\]]+)\]", code, re.M)
        parents = {".".join(s.split(".")[:i]) for s in sections for i in range(1, s.count(".") + 1)} - set(sections)
        config = Config().from_str("".join(f"[{p}]\n" for p in sorted(parents)) + code, interpolate=False)
        found = _architecture_blocks(config)
        assert found, code
        for block in found:
            # raises if the docs name an unknown architecture
            accepts = inspect.signature(spacy.registry.get("architectures", block["@architectures"])).parameters
            for key, value in block.items():
                if key.startswith("@") or isinstance(value, dict):
                    continue
                assert key in accepts, f"{doc.name}: {block['@architectures']} has no setting {key!r}"
                # confection keeps `value   # comment` as a string, which then fails validation
                assert not (isinstance(value, str) and re.search(r"\s#", value)), (
                    f"{doc.name}: {key} = {value!r}: put the comment on its own line"
                )


# the user's pages, the experiment's report and the benchmarks' page
LINKED = [*DOCS, ROOT / "results" / "README.md", ROOT / "bench" / "results" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", FENCE.sub("", path.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("doc", LINKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc):
    """Every relative link (and image) of README.md, docs/*.md, results/README.md and bench/results/README.md names a
    file of the
    repository, and every #anchor a heading of the page it points to."""
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


# a commit as a page would name it: 7 to 40 hex digits with a letter and a digit, a word of its own (not inside a
# path or a name such as tests/fixtures/saved_c55240e or a sha256 prefix in backquotes)
COMMIT = re.compile(r"(?<![\w/.`-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/`-]|\.\w)")
PERFORMANCE_MAX_LINES = 250


def commit_mentions(text: str) -> list[str]:
    return COMMIT.findall(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_pages_name_no_commit(doc):
    """README.md and docs/ are for users: which commit measured what is in the records and the pages beside them
    (results/, bench/results/README.md), never on a user page, where it would be history to wade through."""
    assert commit_mentions(doc.read_text(encoding="utf-8")) == []


def test_a_commit_on_a_page_is_found():
    found = commit_mentions("measured at 7f386cf, see a10544b; a10544b0ff in full; c55240e.\n")
    assert found == ["7f386cf", "a10544b", "a10544b0ff", "c55240e"]
    assert commit_mentions("tests/fixtures/saved_c55240e, gpu_h200_7f386cf/, 1e-05, `9c9b68c2`, report.md") == []


def test_the_performance_page_stays_short():
    """docs/performance.md says what to choose on which hardware and cites the generated tables; the benchmarks'
    method, targets and development history are bench/results/README.md's."""
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= PERFORMANCE_MAX_LINES, f"docs/performance.md has {len(lines)} lines"
