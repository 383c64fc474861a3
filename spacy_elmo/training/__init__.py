"""Pretraining and fine-tuning ELMo biLMs, and the tools around a pretrained model.

- `data`: word vocabulary, streaming sharded corpus, deterministic resumable batching.
- `sampled_softmax`: log-uniform sampled softmax (as bilm-tf) for large vocabularies.
- `pretrain`: the training loop (checkpoints, resume, DDP under torchrun, metrics, export).
- `embed`: all biLM layers per sentence into bilm-tf's hdf5 layout (streaming, shardable).
- `similar`: nearest vocabulary words by cosine over context-independent token vectors.
- `probe`: linear probes of each frozen layer and a learned mix (dev accuracy per layer, paper §5.3).

Submodules are imported lazily: `import spacy_elmo.training` stays cheap.
"""

__all__ = ["data", "sampled_softmax", "pretrain", "embed", "similar", "probe"]
