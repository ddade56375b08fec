"""What the command-line tools share: an argument parser whose errors are one line."""
from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument prints one line (``prog: error: ...``) on stderr and
    exits 2, instead of the usage block; ``--help`` still shows the usage."""

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def positive_int(text: str) -> int:
    v = int_arg(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return v


def nonnegative_int(text: str) -> int:
    v = int_arg(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return v


def int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
