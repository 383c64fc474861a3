"""Pretraining and fine-tuning ELMo biLMs, and the tools around a pretrained model.

- `data`: word vocabulary, streaming sharded corpus, deterministic resumable batching.
- `sampled_softmax`: log-uniform sampled softmax (as bilm-tf) for large vocabularies.
- `settings`: the pretraining config's schema (pydantic, validated through confection) and reading it.
- `distributed`: this process's rank and device under torchrun (shared by pretrain and embed).
- `checkpoints`: atomic checkpoints, the `latest` pointer, resume, pruning, metrics.jsonl.
- `pretrain`: the training run (setup, loop, DDP under torchrun, export).
- `embed`: all biLM layers per sentence into bilm-tf's hdf5 layout (streaming, shardable).
- `similar`: nearest vocabulary words by cosine over context-independent token vectors.
- `probe`: linear probes of each frozen layer and a learned mix (dev accuracy per layer, paper §5.3).

Submodules are imported lazily: `import spacy_elmo.training` stays cheap.
"""

__all__ = ["data", "sampled_softmax", "settings", "distributed", "checkpoints", "pretrain", "embed", "similar", "probe"]
