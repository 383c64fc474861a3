"""Linear probes of a frozen biLM's layers (Peters et al. 2018, §5.3): what each layer encodes.

For each layer j = 0..L (0 = the character-based token vectors) a linear softmax classifier is fitted
on that layer's frozen vectors alone, and one more on a learned scalar mix of all layers
(softmax(s)·layers, fitted jointly with the classifier); each is scored by token accuracy on DEV.

Tasks (labels read from spaCy `.spacy` DocBin files, one biLM pass per sentence of `doc.sents`):

- ``pos``: every token's fine-grained tag (`token.tag_`, e.g. the PTB tags of the CoNLL-2003 POS
  column); ``upos``: `token.pos_`. Syntactic.
- ``ner-type``: the entity type (PER / LOC / ORG / MISC on CoNLL-2003) of every token inside a gold
  entity mention; tokens outside entities are not scored. Semantic: the layer must tell
  "Washington" the person from "Washington" the place.

One optimiser for every probe: full-batch L-BFGS (strong Wolfe line search) on the mean
cross-entropy + l2·‖W‖², from a fixed seed, on features standardised per layer with the train
set's mean and scale. The majority-class baseline (DEV accuracy of always answering TRAIN's most
frequent label) is reported beside them.

    spacy-elmo probe MODEL train.spacy dev.spacy --task pos ner-type --max-sentences 3000 \
        --output probe.json --plot probe.png
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..constants import DEFAULT_DEVICE
from .options import OPTIONS

TASKS = ("pos", "upos", "ner-type")
LABEL_SOURCE = {
    "pos": "fine-grained tags (token.tag_)",
    "upos": "coarse tags (token.pos_)",
    "ner-type": "entities (doc.ents)",
}

__all__ = [
    "TASKS",
    "read_examples",
    "layer_features",
    "fit_probe",
    "run_probe",
    "probe_tasks",
    "probe_and_report",
    "plot_probe",
    "plot_format",
    "check_settings",
]


def read_examples(path: str | Path, task: str, max_sentences: int = 0) -> list[tuple[list[str], list[str | None]]]:
    """[(words, labels)] per sentence of a DocBin; a label is None for tokens the task does not score."""
    import spacy
    from spacy.tokens import DocBin

    if task not in TASKS:
        raise ValueError(f"unknown probe task {task!r}: choose from {', '.join(TASKS)}")
    from ..files import check_input_file

    path = check_input_file(path)
    vocab = spacy.blank("xx").vocab
    examples = []
    try:
        docs = DocBin().from_disk(path)
    except Exception as err:  # zlib's, msgpack's and spaCy's errors for a file that is not a DocBin
        reason = " ".join(str(err).split()).split(". ")[0] or type(err).__name__
        raise ValueError(f"{path}: not a spaCy DocBin (.spacy) file ({reason})") from None
    for doc in docs.get_docs(vocab):
        sentences = doc.sents if doc.has_annotation("SENT_START") else [doc[:]]
        for sent in sentences:
            words = [t.text for t in sent]
            if task == "pos":
                labels = [t.tag_ or None for t in sent]
            elif task == "upos":
                labels = [t.pos_ or None for t in sent]
            else:
                labels = [t.ent_type_ or None for t in sent]
            if words:
                examples.append((words, labels))
            if max_sentences and len(examples) >= max_sentences:
                break
        if max_sentences and len(examples) >= max_sentences:
            break
    if not any(label is not None for _, labels in examples for label in labels):
        raise ValueError(f"{path}: probe task {task!r} needs {LABEL_SOURCE[task]}, and no token here has one")
    return examples


@torch.no_grad()
def layer_features(
    model, examples, batch_size: int = 32, progress: bool = False, tokenizer=None
) -> tuple[torch.Tensor, list[str]]:
    """([L+1, N, dim] float32 features of the N labelled tokens, their N labels); `progress`: a bar
    on stderr (when it is a terminal); `tokenizer`: the model's (default: `default_tokenizer`)."""
    from tqdm import tqdm

    from ..hf.model_directory import default_tokenizer

    tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model)
    device = next(model.parameters()).device
    chunks, labels = [], []
    starts = range(0, len(examples), batch_size)
    for start in tqdm(starts, unit="batch", disable=None if progress else True, mininterval=1.0, dynamic_ncols=True):
        batch = examples[start : start + batch_size]
        out = model(**tokenizer([words for words, _ in batch]).to(device))
        keep = torch.tensor([label is not None for _, sent in batch for label in sent], dtype=torch.bool)
        layers = torch.stack([h[out.attention_mask] for h in out.hidden_states]).float().cpu()  # [L+1, tokens, dim]
        chunks.append(layers[:, keep])
        labels += [label for _, sent in batch for label in sent if label is not None]
    if not labels:
        raise ValueError("no labelled tokens for this task in the data")
    return torch.cat(chunks, dim=1), labels


class _Probe(torch.nn.Module):
    """softmax(s)-weighted sum of standardised layers → linear classifier. `layer` fixes s to one layer."""

    def __init__(self, n_layers: int, dim: int, n_classes: int, layer: int | None):
        super().__init__()
        self.layer = layer
        self.s = torch.nn.Parameter(torch.zeros(n_layers), requires_grad=layer is None)
        self.linear = torch.nn.Linear(dim, n_classes)

    def weights(self) -> torch.Tensor:
        if self.layer is not None:
            return torch.nn.functional.one_hot(torch.tensor(self.layer), len(self.s)).float()
        return torch.softmax(self.s, dim=0)

    def forward(self, features: torch.Tensor) -> torch.Tensor:  # features [L+1, N, dim]
        if self.layer is not None:
            return self.linear(features[self.layer])
        return self.linear(torch.einsum("l,lnd->nd", self.weights(), features))


def fit_probe(
    features, y, n_classes, layer: int | None, seed: int = 0, l2: float = 1e-4, max_iter: int = 100
) -> _Probe:
    """Fits one probe (on `layer`, or on a learned mix of all layers if None) by full-batch L-BFGS."""
    torch.manual_seed(seed)
    probe = _Probe(features.shape[0], features.shape[-1], n_classes, layer)
    params = [p for p in probe.parameters() if p.requires_grad]
    optimizer = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(probe(features), y) + l2 * probe.linear.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return probe.eval()


def run_probe(
    model,
    train_examples,
    dev_examples,
    seed: int = 0,
    l2: float = 1e-4,
    max_iter: int = 100,
    progress: bool = False,
    tokenizer=None,
) -> dict:
    """Dev accuracy of a probe per layer and of the learned mix, with the majority-class baseline."""
    train_x, train_labels = layer_features(model, train_examples, progress=progress, tokenizer=tokenizer)
    dev_x, dev_labels = layer_features(model, dev_examples, progress=progress, tokenizer=tokenizer)
    counts = Counter(train_labels)
    labels = sorted(counts)
    index = {label: i for i, label in enumerate(labels)}
    y = torch.tensor([index[label] for label in train_labels])
    # a dev label never seen in training cannot be predicted: it stays in the denominator as an error
    dev_y = torch.tensor([index.get(label, -1) for label in dev_labels])
    mean = train_x.mean(dim=1, keepdim=True)
    scale = train_x.std(dim=1, keepdim=True).mean(dim=2, keepdim=True).clamp_min(1e-6)
    train_x, dev_x = (train_x - mean) / scale, (dev_x - mean) / scale
    majority = counts.most_common(1)[0][0]

    def accuracy(probe) -> float:
        with torch.no_grad():
            return round(100.0 * float((probe(dev_x).argmax(-1) == dev_y).float().mean()), 2)

    layers = []
    for j in range(train_x.shape[0]):
        probe = fit_probe(train_x, y, len(labels), j, seed, l2, max_iter)
        layers.append({"layer": j, "accuracy": accuracy(probe)})
    mix = fit_probe(train_x, y, len(labels), None, seed, l2, max_iter)
    return {
        "train_sentences": len(train_examples),
        "dev_sentences": len(dev_examples),
        "train_tokens": len(train_labels),
        "dev_tokens": len(dev_labels),
        "labels": len(labels),
        "majority_label": majority,
        "majority_accuracy": round(100.0 * sum(label == majority for label in dev_labels) / len(dev_labels), 2),
        "layers": layers,
        "mix": {"accuracy": accuracy(mix), "weights": [round(float(w), 4) for w in mix.weights().detach()]},
        "optimizer": {"method": "L-BFGS, full batch, strong Wolfe", "max_iter": max_iter, "l2": l2, "seed": seed},
    }


def probe_tasks(
    model_ref,
    train,
    dev,
    tasks: Iterable[str],
    max_sentences: int = 0,
    seed: int = 0,
    l2: float = 1e-4,
    max_iter: int = 100,
    device: str = DEFAULT_DEVICE,
    progress: bool = False,
) -> dict:
    """{"tasks": {task: run_probe(...)}} for a model reference (HF dir, hub id, legacy or EFML files,
    URL); the biLM runs on `device` ("auto": CUDA when available), the probes on the CPU."""
    from ..devices import pick_device
    from ..formats.references import parse_reference

    tasks = list(tasks)
    check_settings(tasks, max_sentences, seed, l2, max_iter)
    torch.manual_seed(seed)
    reference = parse_reference(model_ref)
    checked = reference.check()  # a wrong reference fails before the data is read
    data = {
        task: (read_examples(train, task, max_sentences), read_examples(dev, task, max_sentences)) for task in tasks
    }
    model, tokenizer = reference.load(checked=checked)
    model = model.to(pick_device(device))
    result: dict[str, Any] = {
        "model": str(model_ref),
        "train": str(train),
        "dev": str(dev),
        "max_sentences": max_sentences,
        "tasks": {},
    }
    for task in tasks:
        result["tasks"][task] = run_probe(
            model, *data[task], seed=seed, l2=l2, max_iter=max_iter, progress=progress, tokenizer=tokenizer
        )
    return result


def check_settings(tasks: Sequence[str], max_sentences: int, seed: int, l2: float, max_iter: int) -> None:
    """The probes' settings in their declared ranges (`options.OPTIONS["probe"]`), before any work."""
    ranges = OPTIONS["probe"]
    ranges["--max-sentences"].check(max_sentences, "max_sentences")
    ranges["--seed"].check(seed, "seed")
    ranges["--l2"].check(l2, "l2")
    ranges["--max-iter"].check(max_iter, "max_iter")
    unknown = [task for task in tasks if task not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"task: expected one or more of {', '.join(TASKS)}, got {list(tasks)}")


def plot_format(plot: Path) -> str:
    """The image format a plot is written in (its suffix; none: png), checked before any work:
    matplotlib is installed and writes it."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ValueError(
            f"--plot {plot}: needs matplotlib, which is not installed (pip install 'spacy-elmo[plot]')"
        ) from None
    image_format = plot.suffix.lstrip(".").lower() or "png"
    supported = Figure().canvas.get_supported_filetypes()
    if image_format not in supported:
        raise ValueError(
            f"--plot {plot}: matplotlib writes no .{image_format} files; choose one of {', '.join(sorted(supported))}"
        )
    return image_format


def probe_and_report(
    model_ref,
    train,
    dev,
    tasks: Iterable[str],
    max_sentences: int = 0,
    seed: int = 0,
    l2: float = 1e-4,
    max_iter: int = 100,
    device: str = DEFAULT_DEVICE,
    progress: bool = False,
    output: Path | None = None,
    plot: Path | None = None,
    overwrite: bool = False,
    *,
    command: Sequence[str],
) -> dict:
    """`spacy-elmo probe`: `probe_tasks`, one line of scores per task on standard output, then the
    result with its provenance as JSON (`output`) and a plot of it (`plot`), each when asked for.
    Before any work: the settings, the outputs (an existing one is kept unless `overwrite`; each
    temporary is made, so an unwritable one is refused now), matplotlib for `plot`. `command`: the
    command line its provenance records (the caller's: the library reads no argv)."""
    import contextlib
    import json

    from ..files import check_output, made_folders, start_temporary, temporary_sibling
    from ..provenance import Provenance

    tasks = list(tasks)
    check_settings(tasks, max_sentences, seed, l2, max_iter)
    outputs = {what: Path(path) for what, path in (("--output", output), ("--plot", plot)) if path is not None}
    for what, path in outputs.items():
        check_output(path, overwrite=overwrite, what=what)
    if len(outputs) == 2 and outputs["--output"].resolve() == outputs["--plot"].resolve():
        raise ValueError(f"--output and --plot name the same file ({output}): give each its own")
    image_format = plot_format(outputs["--plot"]) if "--plot" in outputs else None
    prov = Provenance(command, seed=seed)
    with contextlib.ExitStack() as stack:
        temporaries = {}
        for what, path in outputs.items():
            stack.enter_context(made_folders(path.parent))
            temporaries[what] = tmp = stack.enter_context(temporary_sibling(path))
            start_temporary(tmp, path, what=what)
        result = probe_tasks(
            model_ref, train, dev, tasks, max_sentences, seed, l2, max_iter, device=device, progress=progress
        )
        for task, scores in result["tasks"].items():
            cells = "  ".join(f"L{e['layer']} {e['accuracy']:.2f}" for e in scores["layers"])
            print(
                f"{task}: {cells}  mix {scores['mix']['accuracy']:.2f}  (majority {scores['majority_accuracy']:.2f}; "
                f"{scores['train_tokens']:,} train / {scores['dev_tokens']:,} dev tokens)"
            )
        if "--output" in temporaries:
            result["provenance"] = prov.record()
            with open(temporaries["--output"], "w", encoding="utf-8") as handle:
                handle.write(json.dumps(result, indent=2) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        if "--plot" in temporaries:
            plot_probe(result, temporaries["--plot"], image_format=image_format)
        for what, tmp in temporaries.items():  # both written: into place
            os.replace(tmp, outputs[what])
    return result


def plot_probe(result: dict, path: str | Path, image_format: str | None = None) -> None:
    """Dev accuracy by layer (and the mix) per task, with each task's majority baseline dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for task, scores in sorted(result["tasks"].items()):
        xs = [f"layer {e['layer']}" for e in scores["layers"]] + ["mix"]
        ys = [e["accuracy"] for e in scores["layers"]] + [scores["mix"]["accuracy"]]
        (line,) = ax.plot(xs, ys, marker="o", label=task)
        ax.axhline(
            scores["majority_accuracy"], color=line.get_color(), ls="--", lw=0.8, label=f"{task}: majority class"
        )
    ax.set_ylabel("dev accuracy (%)")
    ax.set_title("Linear probes of the frozen biLM layers")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format=image_format)
    plt.close(fig)
