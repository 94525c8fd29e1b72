"""The user-error type and the argparse value parsers shared by the ``llmduel`` sub-commands."""

from __future__ import annotations

import argparse
import math
from typing import Callable


class CLIError(Exception):
    """A user error: printed as one line on stderr, exit code 2."""


def open_unit_interval(option: str) -> Callable[[str], float]:
    """A parser for a number in (0, 1), e.g. ``--delta``; errors name ``option``."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be a number in (0, 1), got {text!r}") from None
        if not 0 < v < 1:
            raise argparse.ArgumentTypeError(f"{option} must be in (0, 1), got {text}")
        return v

    return parse


def whole_number(option: str, allow_zero: bool = False) -> Callable[[str], int]:
    """A parser for an integer >= 1 (or >= 0 with ``allow_zero``); errors name ``option``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be an integer, got {text!r}") from None
        if v < 0 or (v == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"{option} must be {'>= 0' if allow_zero else '>= 1'}, got {v}")
        return v

    return parse


MAX_ID = 2**62  # the largest id the API and the database accept


def record_id(option: str) -> Callable[[str], int]:
    """A parser for a database id (1 to 2**62, as the API's paths); errors name ``option``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be an integer, got {text!r}") from None
        if not 1 <= v <= MAX_ID:
            raise argparse.ArgumentTypeError(f"{option} must be between 1 and 2**62, got {text}")
        return v

    return parse


def number_in(option: str, low: float, high: float) -> Callable[[str], float]:
    """A parser for a finite number in (``low``, ``high``]; errors name ``option``."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be a number, got {text!r}") from None
        if not (math.isfinite(v) and low < v <= high):
            raise argparse.ArgumentTypeError(f"{option} must be a number in ({low:g}, {high:g}], got {text}")
        return v

    return parse


def delta_value(text: str) -> float:
    """``--delta``: an error probability accepted by the algorithms (:func:`algorithms.thresholds.delta_problem`)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--delta must be a number, got {text!r}") from None
    from algorithms.thresholds import delta_problem  # here: importing algorithms loads numba (a second or more)

    problem = delta_problem(v)
    if problem:
        raise argparse.ArgumentTypeError(f"--{problem}")
    return v
