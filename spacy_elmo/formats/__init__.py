"""Ways to name and read a biLM besides a model directory.

- `references`: a model reference (HF folder, hub id, legacy pair, ELMoForManyLangs folder, URL)
  parsed once into a typed value that checks and loads itself.
- `legacy`: AllenNLP / bilm-tf `options.json` + `lm_weights.hdf5`, read and written exactly.
- `efml`, `efml_config`: ELMoForManyLangs folders, read without that package (no unpickling).
- `download`: URLs → local files in the cache (checked, extracted once, under a lock).
"""
