"""Pretraining and fine-tuning ELMo biLMs (the tools that use a trained one are in `spacy_elmo.tools`).

- `vocabulary`: the LM's word vocabulary (vocab.txt) and the unigram perplexity baseline.
- `text`: which files a path names, streamed blocks of lines, line → words.
- `batches`: the streaming sharded corpus → deterministic, resumable global batches.
- `sampled_softmax`: log-uniform sampled softmax (as bilm-tf) for large vocabularies.
- `settings`: the pretraining config's schema (pydantic, validated through confection) and reading it.
- `distributed`: this process's rank and device under torchrun (shared by pretrain and embed).
- `checkpoints`: atomic checkpoints, the `latest` pointer, resume, pruning, metrics.jsonl.
- `pretrain`: the training run (setup, loop, DDP under torchrun, export).

Submodules are imported lazily: `import spacy_elmo.training` stays cheap.
"""

__all__ = ["vocabulary", "text", "batches", "sampled_softmax", "settings", "distributed", "checkpoints", "pretrain"]
