"""Pretraining and fine-tuning ELMo biLMs (the tools that use a trained one are in `spacy_elmo.tools`).

- `vocabulary`: the character lexicon and the unigram perplexity baseline (the word vocabulary,
  vocab.txt, is `spacy_elmo.training.vocabulary`).
- `text`: a corpus's training sequences, streamed (reading UTF-8 lines is `spacy_elmo.text_input`).
- `batches`: the streaming sharded corpus → deterministic, resumable global batches.
- `sampled_softmax`: log-uniform sampled softmax (as bilm-tf) for large vocabularies.
- `settings`: the pretraining config's schema (pydantic, validated through confection) and reading it
  into typed settings (`read_settings`).
- `checkpoints`: atomic checkpoints, the `latest` pointer, resume, pruning, metrics.jsonl.
- `start`: where a run starts (fresh, resume, or a pretrained model), one typed choice.
- `run`: `build_run(settings, output)` → a `Run`, the run's collaborators (model, optimizer, softmax,
  batches, state; DDP under torchrun).
- `steps`: `train_steps(run)`, one `StepInfo` per optimizer step; `train_step`, `evaluate`.
- `pretrain`: the loop consuming the steps (log records, checkpoints, evaluation, stop), export; `pretrain()`.

Submodules are imported lazily: `import spacy_elmo.training` stays cheap.
"""

__all__ = [
    "vocabulary",
    "text",
    "batches",
    "sampled_softmax",
    "settings",
    "checkpoints",
    "start",
    "run",
    "steps",
    "pretrain",
]
