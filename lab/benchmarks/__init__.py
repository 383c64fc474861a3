"""The lab's benchmarks: speed, error and startup on this machine, into bench/results/
(`python -m lab.benchmarks.NAME`)."""
