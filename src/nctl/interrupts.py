"""Ctrl-C that never leaves a learner half-changed.

Learning hands the state's buffers to each compiled call (JAX deletes them there) and takes the new ones
back from it: a ``KeyboardInterrupt`` raised between the two would leave a learner holding deleted arrays.
So a learner learns inside ``held()``: a SIGINT that arrives there is only noted; the learning loop looks
at the note between its blocks of rows, stops after the block it is in, and the learner then raises
``Interrupted`` saying how many rows it learned. Outside the main thread, where Python delivers no
signals, nothing is held.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during learning, raised once the learner is whole again: usable, savable, its rows counted."""


class Note:
    """Whether a SIGINT arrived inside ``held()`` (``asked``)."""

    asked = False


@contextmanager
def held() -> Iterator[Note]:
    """Inside the block a SIGINT sets ``note.asked`` instead of raising. Nested blocks pass their note
    on to the enclosing one, so the outermost caller always learns of it. Where the process had its own
    handling of SIGINT (ignored, or a handler of the program's), the signal is given back to it on leaving
    the block instead."""
    note = Note()
    if threading.current_thread() is not threading.main_thread():
        yield note
        return

    def noted(signum, frame) -> None:
        note.asked = True

    noted.note = note
    previous = signal.signal(signal.SIGINT, noted)
    try:
        yield note
    finally:
        signal.signal(signal.SIGINT, previous)
        if note.asked:
            outer = getattr(previous, "note", None)
            if outer is not None:
                outer.asked = True
            elif previous is not signal.default_int_handler:  # the program's own handling decides
                note.asked = False
                signal.raise_signal(signal.SIGINT)


def raise_if_asked(note: Note, what: str) -> None:
    """``Interrupted(what)`` where ``note`` saw a SIGINT."""
    if note.asked:
        raise Interrupted(what)
