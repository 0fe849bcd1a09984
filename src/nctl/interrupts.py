"""Ctrl-C that never leaves a learner half-changed.

Learning hands the state's buffers to each compiled call (JAX deletes them there) and takes the new ones
back from it, and the native engine changes the state in place while the learner counts the rows: a
``KeyboardInterrupt`` raised in between would leave a learner holding deleted arrays, or rows learned but
not counted. So a learner learns inside ``held()``: a SIGINT that arrives there is only noted; the
learning loop looks at the note between its blocks of rows, stops after the block it is in, and the
learner then raises ``Interrupted`` saying how many rows it learned.

The first ``held()`` in the main thread (or ``install()``) installs this module's SIGINT handler for the rest of the process
(swapping handlers at every call would cost more than a native row): outside a ``held()`` block it does
what the handler it replaced did (by default, raise ``KeyboardInterrupt``); where the program had a
handler of its own, a signal inside a block does not stop learning, and goes to that handler once the
learner is whole. A handler the program installs after that replaces this one, and learning is then not
protected. Outside the main thread, where Python delivers no signals, nothing is held.

A SIGINT that arrives while a garbage-collector callback or a ``__del__`` runs (JAX's runtime has one),
where Python prints an exception and drops it, is delivered again once that code has returned: the
``KeyboardInterrupt`` it raises would otherwise be lost, and the program would go on.
"""

from __future__ import annotations

import gc
import os
import signal
import threading

REDELIVERY_SECONDS = 0.01  # a SIGINT that came where its exception would be dropped comes again this much later


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during learning, raised once the learner is whole again: usable, savable, its rows counted."""


class Note:
    """What a ``held()`` block saw: ``asked``, a SIGINT that asks the learner to stop; ``deferred``, the
    SIGINTs for a handler of the program's own, given to it when the outermost block ends."""

    asked = False
    deferred = 0


_open: list[Note] = []  # the notes of the held() blocks open in the main thread, outermost first
_replaced = []  # [the handler this module's replaced], once installed


def _on_sigint(signum, frame) -> None:
    """Inside blocks: note the signal, as a request to stop where the program left Ctrl-C to Python, else
    for the program's handler; outside them, what the replaced handler did."""
    if not _open:
        if _where_exceptions_are_dropped(frame):  # the signal again, once that code has returned
            threading.Timer(REDELIVERY_SECONDS, os.kill, (os.getpid(), signal.SIGINT)).start()
        else:
            _as_before(signum, frame)
    elif _replaced[0] in (signal.default_int_handler, None):
        for note in _open:
            note.asked = True
    else:
        _open[0].deferred += 1


def _where_exceptions_are_dropped(frame) -> bool:
    """Whether ``frame`` runs inside a garbage-collector callback or a ``__del__``, whose exceptions Python
    prints and drops."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _as_before(signum, frame) -> None:
    """What the handler this module replaced does with a SIGINT."""
    previous = _replaced[0]
    if previous is None:  # installed outside Python: taken as Python's own
        signal.default_int_handler(signum, frame)
    elif callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:  # the process would have ended: end it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.raise_signal(signal.SIGINT)
    # SIG_IGN: ignored, as before


def install() -> None:
    """Put this module's SIGINT handler in place, once per process, from the main thread (the first
    ``held()`` does; a program that wants a Ctrl-C in a garbage-collector callback not to be lost before its
    first learning calls it first, as ``nctl``'s command line does)."""
    if not _replaced:
        _replaced.append(signal.signal(signal.SIGINT, _on_sigint))


class held:
    """``with held() as note``: inside the block a SIGINT is noted (in this block's note and those of the
    blocks around it) instead of raising; a program's own handler gets its signals when the outermost block
    ends. (A class rather than a generator: it is entered for every native row.)"""

    def __enter__(self) -> Note:
        self.note = Note()
        self.main = threading.get_ident() == threading.main_thread().ident  # (current_thread costs more)
        if self.main:
            install()
            _open.append(self.note)
        return self.note

    def __exit__(self, *exception) -> None:
        if self.main:
            _open.remove(self.note)
            for _ in range(self.note.deferred):
                _as_before(signal.SIGINT, None)


def raise_if_asked(note: Note, what: str) -> None:
    """``Interrupted(what)`` where ``note`` was asked to stop."""
    if note.asked:
        raise Interrupted(what)
