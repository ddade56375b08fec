"""Execution backends: cuda (CuPy), hip (hip-python), numpy (the tile-by-tile reference).
Pick one with ``base.get_backend``."""
