"""argparse types for the command line's numeric options.

A bad option is argparse's error, like an unknown one: usage and the reason on stderr,
exit 2. Values that are the snapshot's or an adapter's (threshold, nodes) are checked by
the contract instead, so they read the same on the command line as in a file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def number(low: float, *, whole: bool = False, strict: bool = False) -> Callable[[str], float]:
    """A type for an option that must be a (whole) number >= low, or > low if `strict`."""
    allowed = f"{'a whole number' if whole else 'a number'} {'>' if strict else '>='} {low:g}"

    def convert(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {allowed}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"{text!r} is not {allowed}")
        return value

    return convert
