"""Helpers the test folders share (tests/ is on sys.path: the rootdir conftest): the tiny pretraining config, the
generated corpora the tests train on, and running a command as a user types it (`on_a_terminal`: with
its stderr on a pseudo-terminal, where progress bars show)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import spacy
from spacy.tokens import Doc, DocBin

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "pretrain_tiny.cfg"


def write_grammar_corpus(path: Path, n_sentences: int, seed: int) -> Path:
    """Sentences of a small grammar: a biLM can predict them far better than word frequencies can."""
    rng = random.Random(seed)
    dets, adjs = ["the", "a", "this", "every"], ["big", "small", "red", "old", "quick", "lazy", "happy"]
    nouns = ["cat", "dog", "bird", "man", "woman", "child", "horse", "fox"]
    verbs, preps = ["sees", "likes", "chases", "follows", "hears", "finds"], ["near", "behind", "under", "with"]
    places = ["house", "garden", "river", "tree", "park"]

    def noun_phrase():
        return [rng.choice(dets)] + ([rng.choice(adjs)] if rng.random() < 0.5 else []) + [rng.choice(nouns)]

    lines = []
    for _ in range(n_sentences):
        words = noun_phrase() + [rng.choice(verbs)] + noun_phrase()
        if rng.random() < 0.4:
            words += [rng.choice(preps), "the", rng.choice(places)]
        lines.append(" ".join(words + ["."]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_corpus(path: Path, n: int = 16) -> Path:
    """Tiny DocBin with entities, tags and categories, enough for every shipped config."""
    nlp = spacy.blank("en")
    rng = random.Random(0)
    names = {"Alice": "PER", "Bob": "PER", "Paris": "LOC", "Acme": "ORG"}
    db = DocBin()
    for i in range(n):
        name = rng.choice(sorted(names))
        doc = Doc(nlp.vocab, words=["Yesterday", name, "went", "to", "see", "the", "sea", "."])
        doc.ents = [doc.char_span(doc[1].idx, doc[1].idx + len(name), label=names[name])]
        for token, tag in zip(doc, ["RB", "NNP", "VBD", "TO", "VB", "DT", "NN", "."]):
            token.tag_ = tag
        doc.cats = {"SPORT": float(i % 2 == 0), "POLITICS": float(i % 2 == 1)}
        db.add(doc)
    db.to_disk(path)
    return path


def lm_text(path: Path, lines: int = 200) -> Path:
    words = "the cat sat on a mat while dogs ran to the big red house".split()
    path.write_text(
        "\n".join(" ".join(words[(i + j) % len(words)] for j in range(4 + i % 7)) for i in range(lines)) + "\n"
    )
    return path


def run(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **kwargs.pop("env", {})}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env, **kwargs)


def source_tree(dest: Path) -> Path:
    """A copy of the checkout as a clone has it (tracked files and new ones git does not ignore)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if not (source.exists() or source.is_symlink()):  # deleted in the working tree, not yet in the index
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            (dest / name).symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, dest / name)
    return dest


def spacy_transformers_missing() -> str | None:
    """Why spacy-transformers cannot be tested here (None where it is installed): the tests of the trf config
    skip with this reason under transformers 5, which no release of spacy-transformers takes."""
    import importlib.util

    if importlib.util.find_spec("spacy_transformers") is not None:
        return None
    import transformers

    return (
        "spacy-transformers is not installed: its newest release, 1.4.0, requires transformers<4.53.3 and this "
        f"environment has transformers {transformers.__version__} (`make test-compat` runs it beside "
        "spacy-transformers 1.4.0)"
    )


def on_a_terminal(*args) -> tuple[int, str, str]:
    """Runs the console script with its stderr on a pseudo-terminal: (status, stdout, what the terminal got)."""
    import fcntl
    import pty
    import struct
    import termios

    terminal, child_end = pty.openpty()
    # a terminal's size, 24 × 80 (a new pseudo-terminal has 0 × 0, and tqdm fits its bar into 0 columns)
    fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    script = Path(sys.executable).with_name("spacy-elmo")  # the console script, as a user runs it
    child = subprocess.Popen([str(script), *map(str, args)], stdout=subprocess.PIPE, stderr=child_end, env=env)
    os.close(child_end)
    shown = b""
    while True:
        try:
            data = os.read(terminal, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        shown += data
    os.close(terminal)
    out = child.stdout.read().decode()
    return child.wait(timeout=300), out, shown.decode(errors="replace")
