"""The model catalog: which models exist, their limits, prices, voices and shutdown dates, and a
session's choice among them checked against it."""
