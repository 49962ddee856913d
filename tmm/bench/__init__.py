"""Measurement tools shared by the benchmark, check and experiment drivers:
progress (the one progress bar), and, as they move out of scripts/, timing,
memory, provenance and report writing."""
