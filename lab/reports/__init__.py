"""The lab's reports: the tables and pages of results/, written from the records (`python -m lab.reports.NAME`)."""
