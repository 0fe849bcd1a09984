"""Task-matrix progress in files, so that a long seed (the full Permuted MNIST protocol runs for hours)
survives an interruption and resumes at its last task end.

A folder holds ``progress.json`` (evaluations done, seconds spent) and the files it names: the
learner (``nctl.learners.load`` format) and the curve rows so far. ``progress.json`` is replaced
last, so a save cut short leaves the previous one intact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from nctl import learners

PROGRESS = "progress.json"


class FileCheckpoint:
    """A :class:`nctl.evaluate.Checkpoint` in ``folder``; ``seconds`` counts the run's time over every
    process that worked on it."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._earlier_seconds = 0.0
        self._started = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self._earlier_seconds + time.perf_counter() - self._started

    def load(self):
        path = self.folder / PROGRESS
        if not path.exists():
            return None
        progress = json.loads(path.read_text())
        learner = learners.load(self.folder / progress["learner"])
        with np.load(self.folder / progress["curve"]) as data:
            curve = {variant: data[variant] for variant in data.files}
        self._earlier_seconds, self._started = progress["seconds"], time.perf_counter()
        return learner, progress["evaluations"], curve

    def save(self, learner, evaluations: int, curve: dict[str, np.ndarray]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        names = {"learner": f"learner-{evaluations:05d}.npz", "curve": f"curve-{evaluations:05d}.npz"}
        learner.save(self.folder / names["learner"])
        np.savez(self.folder / names["curve"], **{v: rows[:evaluations] for v, rows in curve.items()})
        progress = {"evaluations": evaluations, "seconds": self.seconds, **names}
        tmp = self.folder / (PROGRESS + ".tmp")
        tmp.write_text(json.dumps(progress))
        tmp.replace(self.folder / PROGRESS)
        for old in self.folder.glob("*.npz"):
            if old.name not in names.values():
                old.unlink()
