"""Argument types the command lines share (``nctl.cli``, ``nctl.inspect.cli``): each parses one value or
raises ``argparse.ArgumentTypeError`` naming what is allowed, which argparse turns into one error line."""

import argparse


def at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    return parse
