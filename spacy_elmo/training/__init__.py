"""Pretraining and fine-tuning ELMo biLMs (the tools that use a trained one are in `spacy_elmo.tools`).

- `vocabulary`: the character lexicon and the unigram perplexity baseline (the word vocabulary,
  vocab.txt, is `spacy_elmo.vocabulary`).
- `text`: a corpus's training sequences, streamed (reading UTF-8 lines is `spacy_elmo.text_input`).
- `batches`: the streaming sharded corpus → deterministic, resumable global batches.
- `sampled_softmax`: log-uniform sampled softmax (as bilm-tf) for large vocabularies.
- `settings`: the pretraining config's schema (pydantic, validated through confection) and reading it.
- `distributed`: kept for pretrain's import; the torchrun/device set-up is `spacy_elmo.devices`.
- `checkpoints`: atomic checkpoints, the `latest` pointer, resume, pruning, metrics.jsonl.
- `pretrain`: the training run (setup, loop, DDP under torchrun, export).

Submodules are imported lazily: `import spacy_elmo.training` stays cheap.
"""

__all__ = ["vocabulary", "text", "batches", "sampled_softmax", "settings", "distributed", "checkpoints", "pretrain"]
