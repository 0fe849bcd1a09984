"""Task-matrix progress in files, so that a long seed (the full Permuted MNIST protocol runs for hours)
survives an interruption and resumes at its last task end.

A folder holds ``progress.json`` (evaluations done, seconds spent) and the files it names: the
learner (``nctl.learners.load`` format) and the curve rows so far. Each file is written whole or not
at all and ``progress.json`` is replaced last, so a save cut short leaves the previous one intact.
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import numpy as np

from nctl import atomic, learners
from nctl.experiments import schema

PROGRESS = "progress.json"


class FileCheckpoint:
    """A :class:`nctl.evaluate.Checkpoint` in ``folder``; ``seconds`` counts the run's time over every
    process that worked on it. ``learner``: the learner last loaded or saved (None before either); on a
    resume it is the restored learner that the run goes on with, not the one the run was given."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.learner = None
        self.earlier_seconds = 0.0  # spent by the processes before the last load
        self._started = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self.earlier_seconds + time.perf_counter() - self._started

    def load(self):
        """(learner, evaluations, curve) of the last save, or None without one; ValueError naming the
        damaged file and what to do."""
        path = self.folder / PROGRESS
        if not path.exists():
            return None
        try:
            progress = schema.read_json(path)
            path = self.folder / progress["learner"]
            learner = learners.load(path)
            path = self.folder / progress["curve"]
            with np.load(path, allow_pickle=False) as data:
                curve = {variant: data[variant] for variant in data.files}
            seconds, evaluations = float(progress["seconds"]), int(progress["evaluations"])
        except (ValueError, KeyError, TypeError, EOFError, OSError, zipfile.BadZipFile) as error:
            raise ValueError(f"checkpoint file {path} is unreadable ({type(error).__name__}: {error}); delete "
                             f"{self.folder} to start this seed again from its beginning") from error
        self.earlier_seconds, self._started = seconds, time.perf_counter()
        self.learner = learner
        return learner, evaluations, curve

    def save(self, learner, evaluations: int, curve: dict[str, np.ndarray]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.learner = learner
        names = {"learner": f"learner-{evaluations:05d}.npz", "curve": f"curve-{evaluations:05d}.npz"}
        learner.save(self.folder / names["learner"])
        rows = {v: rows[:evaluations] for v, rows in curve.items()}
        atomic.write_atomic(self.folder / names["curve"], lambda f: np.savez(f, **rows))
        progress = {"evaluations": evaluations, "seconds": self.seconds, **names}
        atomic.write_text(self.folder / PROGRESS, json.dumps(progress))
        for old in self.folder.iterdir():  # earlier saves, and the temporary files of any cut short
            if old.name not in (PROGRESS, *names.values()):
                old.unlink()
