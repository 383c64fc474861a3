"""The lab's data steps: assets fetched and checked, and turned into corpora (`python -m lab.data.NAME`)."""
