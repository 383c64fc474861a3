"""The spaCy face: the `elmo` component, the registered `spacy-elmo.*` architectures, their thinc
layers and the data they put on a Doc.

- `component`: the `elmo` factory and component, and the training layer-cache callback.
- `architectures`: the registered architectures (entry points in setup.cfg).
- `layers/`: the biLM as a thinc layer, the listener, the scalar mix, features.
- `doc_data`: `doc._.elmo` and its span/token views.
- `deferred_step`: the component's optimizer step, applied when the listeners' gradient has arrived.
"""
