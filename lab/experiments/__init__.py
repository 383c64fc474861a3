"""The lab's experiments: trainings, test scorings and their ledger, the pretraining wrapper
(`python -m lab.experiments.NAME`)."""
