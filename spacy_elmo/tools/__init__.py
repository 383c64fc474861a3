"""What the `spacy-elmo` command does with a trained biLM besides training it.

- `convert`: any model reference → a model directory (weights, config, tokenizer, card).
- `embed`: all biLM layers per sentence into bilm-tf's hdf5 layout (streaming, shardable).
- `similar`: nearest vocabulary words by cosine over context-independent token vectors, or over
  contextual vectors averaged in a text.
- `probe`: linear probes of each frozen layer and a learned mix (dev accuracy per layer, paper §5.3).

Submodules are imported lazily: `import spacy_elmo.tools` stays cheap.
"""

__all__ = ["convert", "embed", "similar", "probe"]
