"""The lab: the project's workflow steps, reports and benchmarks, in folders by job, each run as
`python -m lab.FOLDER.NAME` (the GPU harness as `python -m lab.gpu`):

- `lab/data/`: the assets fetched and checked, and turned into corpora (`.spacy`, the LM's text);
- `lab/experiments/`: the trainings, test scorings and their ledger, the pretraining wrapper, records;
- `lab/reports/`: the tables and pages written from the records (results/);
- `lab/benchmarks/`: speed, error and startup measured on this machine (bench/results/);
- `lab/gpu/`: the GPU harness: what travels to the device machine, the run there, its record here.

The library (spacy_elmo/) never imports it, and the wheel does not ship it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout the lab runs in
