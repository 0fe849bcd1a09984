"""The rows ``learn_one`` keeps back (``RowBuffer``): on the JAX engine a row given to ``learn_one`` waits
here, to be learned in one compiled call with the next prediction (the river path, docs/algorithm.md
§6.9), with the rows after it once ``PENDING_ROWS`` wait, or before anything else reads the learner. The
native engine learns every row at once and keeps none."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nctl import interrupts
from nctl.core import engine

PENDING_ROWS = engine.LEARN_BLOCK  # learn_one keeps back at most this many rows (one compiled call's worth)


class RowBuffer:
    """Rows given to ``learn_one`` and not learned yet, in order: ``(x [d] float32, y)``."""

    def __init__(self) -> None:
        self._rows: list = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Keep the row back; whether ``PENDING_ROWS`` now wait (time to learn them)."""
        self._rows.append((x, y))
        return len(self._rows) >= PENDING_ROWS

    def learned_by(self, learn: Callable[..., tuple[int, Any]], owner: str):
        """``learn(X, y, stop) -> (rows learned, result)`` on the waiting rows, stacked; the rows it did not
        learn (a Ctrl-C noted in ``stop`` ends it after a block of rows) wait again, in order, and the
        Ctrl-C is raised once they do, saying that ``owner`` is whole. Returns ``result``."""
        with interrupts.held() as stop:
            rows, self._rows = self._rows, []
            X, y = np.array([x for x, _ in rows]), np.stack([target for _, target in rows])
            done, result = learn(X, y, stop)
            self._rows = rows[done:] + self._rows
        interrupts.raise_if_asked(stop, f"interrupted: {owner} is whole and usable; {len(self._rows)} rows given "
                                  "to learn_one wait to be learned")
        return result
