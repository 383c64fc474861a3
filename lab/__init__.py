"""The lab: the project's workflow steps, reports and benchmarks, each run as `python -m lab.NAME`.

The library (spacy_elmo/) never imports it, and the wheel does not ship it."""
