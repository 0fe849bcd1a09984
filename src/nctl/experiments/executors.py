"""Where the seeds of a run are computed: in this process, in local processes, or as Ray tasks.

An executor is a function ``execute(fn, tasks, progress)`` that calls ``fn(*task)`` for every task
and yields ``(index, outcome)`` as each call finishes, in finishing order: ``index`` is the task's
place in ``tasks`` and ``outcome`` is what ``fn`` returned, or the exception it raised. A call that
fails does not stop the others. Only an executor calling ``fn`` in this process passes ``progress``
on, as ``fn``'s last argument (a counter for a progress bar cannot cross processes). Closing the
generator (after Ctrl-C, say) cancels the calls that have not finished.

``nctl.experiments.run`` gives every executor the same tasks, ``run_seed``'s arguments, so a seed's
result does not depend on where it ran. A worker process takes over the compilation cache of the
process that runs the seeds (``nctl.compilation.adopt``): a seed loads the programs that an earlier
seed of the same configuration compiled, wherever that one ran.
"""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
from collections.abc import Callable, Generator, Sequence
from typing import Any

from nctl import memory, compilation

Outcomes = Generator[tuple[int, Any], None, None]  # (index of the task, its result or its exception)
Executor = Callable[[Callable[..., Any], Sequence[tuple], Any], Outcomes]


def in_process(fn: Callable[..., Any], tasks: Sequence[tuple], progress: Any = None) -> Outcomes:
    """Each task in turn, in this process; ``progress`` is passed on."""
    for index, task in enumerate(tasks):
        try:
            outcome = fn(*task, progress)
        except Exception as error:  # reported by the caller; the next task runs
            outcome = error
        memory.trim_compiled_programs()  # many configurations in one process: stay below the map limit
        yield index, outcome


def local(workers: int = 1) -> Executor:
    """Tasks in ``workers`` processes of this machine; in this process when one is asked for or there
    is one task only (no start-up cost, and ``progress`` works)."""

    def execute(fn: Callable[..., Any], tasks: Sequence[tuple], progress: Any = None) -> Outcomes:
        if workers <= 1 or len(tasks) <= 1:
            yield from in_process(fn, tasks, progress)
            return
        context = multiprocessing.get_context("spawn")  # JAX must not be forked after it started
        compilation.default_cache()  # the workers take over this process's cache: the default one unless it has one
        # a process per task: each seed's memory, and its peak, is its own
        pool = futures.ProcessPoolExecutor(workers, mp_context=context, max_tasks_per_child=1,
                                           initializer=compilation.adopt, initargs=(compilation.current(),))
        try:
            jobs = {pool.submit(fn, *task): index for index, task in enumerate(tasks)}
            for job in futures.as_completed(jobs):
                error = job.exception()
                yield jobs[job], job.result() if error is None else error
        finally:
            pool.shutdown(cancel_futures=True)  # drops the calls not started, waits for the running ones

    return execute


def ray_tasks(address: str | None = None, cpus_per_task: float = 1.0, gpus_per_task: float = 0.0) -> Executor:
    """Each task as a Ray task asking for ``cpus_per_task`` CPUs and ``gpus_per_task`` GPUs. The first
    run connects: to the cluster at ``address`` ("auto": the one this machine belongs to), else to a
    new Ray on this machine; a Ray already initialised in this process is used as it is. Ray runs a
    task again when its worker dies (``max_retries``, 3 by default); a task that raises is not run
    again. ValueError if Ray is not installed."""
    try:
        import ray
    except ImportError as error:
        raise ValueError("the Ray executor needs Ray: pip install 'nctl[ray]'") from error

    def execute(fn: Callable[..., Any], tasks: Sequence[tuple], progress: Any = None) -> Outcomes:
        if not tasks:  # every seed was finished already: no Ray to start
            return
        if not ray.is_initialized():
            ray.init(address=address)
        remote = ray.remote(_with_cache).options(num_cpus=cpus_per_task, num_gpus=gpus_per_task)
        compilation.default_cache()  # the workers take over this process's cache: the default one unless it has one
        cache = compilation.current()
        running = {remote.remote(cache, fn, *task): index for index, task in enumerate(tasks)}
        try:
            while running:
                (ref,), _ = ray.wait(list(running), num_returns=1)
                yield running.pop(ref), _outcome(ray, ref)
        finally:
            for ref in running:
                ray.cancel(ref)

    return execute


def _with_cache(cache, fn: Callable[..., Any], *task) -> Any:
    """``fn(*task)`` in a Ray worker that first takes over ``cache`` (``compilation.adopt``)."""
    compilation.adopt(cache)
    return fn(*task)


def _outcome(ray, ref) -> Any:
    """The result of a finished Ray task, or the exception it raised (with the worker's traceback as a
    note), or Ray's error (the worker died, the task was cancelled)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        if not isinstance(error.cause, Exception):  # none that could cross, or one that ends a program
            return error
        error.cause.add_note(str(error))  # where it was raised on the worker
        return error.cause
    except ray.exceptions.RayError as error:
        return error
