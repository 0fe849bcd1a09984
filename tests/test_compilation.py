"""Compilation: the persistent cache (a second process loads what the first compiled), and no
compilation in the middle of a stream. The NCTL learners here have one layer: which programs are
compiled, stored and loaded does not depend on the network's depth, and every layer adds seconds to
the compilation of each configuration."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nctl
from nctl import compilation
from nctl.pool import Pool

SCRIPT = """
import sys, numpy as np, jax, nctl
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
nctl.enable_compilation_cache(sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # also store programs a fast CPU compiles quickly
X = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
nctl.GLN(layer_sizes=(4, 1), context_bits=1).learn_many(X, (X[:, 0] > 0).astype(int))
print(len(hits))
"""


def run_script(cache) -> int:
    """Run the script in a new process; the number of programs it loaded from the cache."""
    env = {**os.environ, "NCTL_ENGINE": "jax"}  # the JAX engine's programs (the native engine compiles none)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(cache)], check=True, env=env, timeout=300,
                          capture_output=True, text=True)
    return int(done.stdout.split()[-1])


def test_a_second_process_reuses_the_first_ones_programs(tmp_path):
    cache = tmp_path / "cache"
    assert run_script(cache) == 0
    entries = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert entries, "the first process stored no compiled program"
    assert run_script(cache) >= 1, "the second process loaded nothing the first had stored"
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == entries


def test_default_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("NCTL_CACHE_DIR", str(tmp_path / "mine"))
    assert compilation.default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("NCTL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation.default_cache_dir() == tmp_path / "xdg" / "nctl" / "jax"
    monkeypatch.setenv("NCTL_CACHE_DIR", "off")  # "off" turns the default cache off; it is not a folder
    assert compilation.default_cache_dir() == tmp_path / "xdg" / "nctl" / "jax"


@pytest.mark.parametrize("setting", ["off", "OFF", " 0", "False", "no"])
def test_the_cache_is_turned_off_when_asked(monkeypatch, setting):
    monkeypatch.setenv("NCTL_CACHE_DIR", setting)
    assert compilation.cache_off()
    monkeypatch.setenv("NCTL_CACHE_DIR", "folder")
    assert not compilation.cache_off()


def compilations_of(fn, *args) -> int:
    """Programs made for ``fn(*args)`` in this thread (not by an earlier learner's compile-ahead thread)."""
    with compilation.programs_made() as compiles:
        jax.block_until_ready(fn(*args))
    return compiles.count(threading.get_ident())


def test_compiled_programs_are_dropped_only_near_the_map_limit(monkeypatch):
    from nctl import memory

    if memory.map_counts() is None:
        pytest.skip("no /proc: the mapping limit is Linux's")
    double, x = jax.jit(lambda x: 2 * x), np.ones(3)
    assert compilations_of(double, x) == 1
    assert not memory.trim_compiled_programs() and compilations_of(double, x) == 0  # kept
    monkeypatch.setattr(memory, "MAPS_SHARE", 0.0)
    assert memory.trim_compiled_programs() and compilations_of(double, x) == 1  # dropped: compiled again


def test_a_new_learner_drops_compiled_programs_near_the_map_limit_and_still_learns(monkeypatch):
    from nctl import memory

    if memory.map_counts() is None:
        pytest.skip("no /proc: the mapping limit is Linux's")
    double, x = jax.jit(lambda x: 3 * x), np.ones(3)
    assert compilations_of(double, x) == 1
    monkeypatch.setattr(memory, "MAPS_SHARE", 0.0)  # as if this process were at the limit
    monkeypatch.setenv("NCTL_ENGINE", "jax")  # a learner that compiles (the native engine compiles nothing)
    model = nctl.GLN(layer_sizes=(2, 1), context_bits=1)
    p = model.learn_many(np.ones((3, 2), np.float32), np.array([1, 1, 1]))
    assert compilations_of(double, x) == 1 and np.all(np.isfinite(p)) and model.t_ == 3


def test_a_program_loaded_from_the_persistent_cache_counts_once():
    """Whether a program is stored depends on how long it took to compile (``MIN_COMPILE_SECONDS``): on a
    loaded machine a small one is, and the tests that count programs made after ``jax.clear_caches``
    then load it. A load counts once, as a compilation does (it also records a cache hit)."""
    if compilation.current() is None:
        pytest.skip("no persistent compilation cache in this process (tests/conftest.py turns one on)")
    hits = []

    def count_hits(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            hits.append(event)

    previous = jax.config.jax_persistent_cache_min_compile_time_secs
    quintuple, x = jax.jit(lambda x: 5 * x + 1), np.ones(3)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # stored however fast it compiles
    jax.monitoring.register_event_listener(count_hits)
    try:
        assert compilations_of(quintuple, x) == 1 and not hits  # compiled, and stored
        jax.clear_caches()
        assert compilations_of(quintuple, x) == 1 and len(hits) == 1  # loaded
    finally:
        jax.monitoring.unregister_event_listener(count_hits)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", previous)


@pytest.mark.parametrize("engine", ["jax", "native"])
def test_a_stream_learned_one_row_at_a_time_compiles_nothing_after_its_first_row(engine, monkeypatch):
    """§6.8: on JAX the pool-boundary and one-row prediction programs are compiled with the first row's,
    and every program keeps its inputs' kind of array, so the first boundaries (steps 4, 8, ...) and the
    first predictions find their programs ready (a cold process stalled for seconds at the first
    boundary before). The native engine, whose fresh state is made in numpy, compiles nothing at all."""
    monkeypatch.setenv("NCTL_ENGINE", engine)
    X = np.random.default_rng(0).normal(size=(20, 3))
    model = nctl.NCTL(layer_sizes=(1,), context_bits=1, pool=Pool(size=2, min_segment=4), depth=6, seed=11)
    with compilation.programs_made() as compiles:
        model.learn_one(X[0], 1)  # river's order: the first prediction comes after the first learning
        first = len(compiles)
        for x in X[1:]:
            model.predict_proba_one(x)
            model.learn_one(x, int(x[0] > 0))
    assert model.engine_ == engine and len(compiles) == first and model.t_ == 20
    assert first > 0 if engine == "jax" else first == 0


def test_arenas_enlarged_mid_stream_compile_nothing_in_the_stream(monkeypatch):
    """§6.8: the programs of the next block-arena enlargement (§6.2) and of a doubled record arena
    (§6.5) are compiled in the background ahead of need, so the stream itself compiles nothing after
    its first row, across both."""
    from nctl.core import engine

    monkeypatch.setenv("NCTL_ENGINE", "jax")  # the JAX engine's programs (the native engine compiles none)
    monkeypatch.setattr(engine.config, "EAGER_ARENA_BYTES", 0)  # every block arena starts lean
    monkeypatch.setattr(engine.config, "MIN_ARENA_DEPTH", 0)  # and small: enlarged within 30 rows
    monkeypatch.setattr(engine.config, "initial_record_rows", lambda cfg: 6 * cfg.chunk)  # doubled within 100 rows
    # compiled ahead one doubling of the tree before the arenas are outgrown (the default, 2, would also
    # compile the enlargement after next, which 100 rows do not reach)
    monkeypatch.setattr(engine.config, "ENLARGE_AHEAD_DOUBLINGS", 1)
    X = np.random.default_rng(1).normal(size=(100, 3))
    model = nctl.NCTL(layer_sizes=(1,), context_bits=1, pool=Pool(size=2, min_segment=4, reservoir_size=8), seed=12)
    with compilation.programs_made() as compiles:
        model.learn_one(X[0], 1)
        start, first = model.cfg_, compiles.count(threading.get_ident())
        for x in X[1:]:
            model.predict_proba_one(x)
            model.learn_one(x, int(x[0] > 0))
        mine = compiles.count(threading.get_ident())
    assert model.cfg_.arena_depth > start.arena_depth and model.cfg_.record_rows > start.record_rows
    assert first > 0 and mine == first and model.t_ == 100


STORED_SCRIPT = """
import sys, numpy as np, jax, nctl
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, fun_name=None, **kw: traced.append(fun_name)
    if event == "/jax/core/compile/jaxpr_trace_duration" else None)
nctl.enable_compilation_cache(sys.argv[1])
X = np.random.default_rng(0).normal(size=(12, 3)).astype(np.float32)
model = nctl.NCTL(layer_sizes=(1,), context_bits=1, pool=nctl.Pool(size=2, min_segment=4), depth=5, seed=3)
preds = []
for x in X:  # river's order
    preds.append(model.predict_proba_one(x))
    model.learn_one(x, int(x[0] > 0))
preds += list(model.predict_proba_many(X[:3]))
print(" ".join(sorted(set(traced) & {"run_steps", "pool_boundary", "predict_rows", "resize"})) or "-")
print(" ".join(repr(float(p)) for p in preds))
"""


def run_stored(cache) -> tuple[set, list]:
    """Run the stored-programs script in a new process: the engine programs it traced, its predictions."""
    env = {**os.environ, "NCTL_ENGINE": "jax"}  # the JAX engine's programs (the native engine compiles none)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", STORED_SCRIPT, str(cache)], check=True, env=env, timeout=300,
                          capture_output=True, text=True)
    traced, preds = done.stdout.strip().splitlines()[-2:]
    return set(traced.split()) - {"-"}, [float(p) for p in preds.split()]


def test_a_new_process_runs_the_engine_programs_stored_by_an_earlier_one_without_tracing_them(tmp_path):
    """§6.10: the first process exports the step, boundary and prediction programs into the cache folder
    (a fresh state is made in numpy: no program); the second loads them, traces none of them, and predicts
    exactly as the first."""
    first_traced, first = run_stored(tmp_path)
    stored = sorted(p.name.split("-")[0] for p in (tmp_path / "exported").glob("*.jaxexport"))
    assert {"run_steps", "pool_boundary", "predict_rows"} <= set(stored) and "init_state" not in stored
    assert {"run_steps", "pool_boundary"} <= first_traced
    second_traced, second = run_stored(tmp_path)
    assert second_traced == set() and second == first


def test_stored_programs_learn_and_predict_as_jit_does(tmp_path, monkeypatch):
    """The same learner with its programs exported and run from the store, and with plain ``jax.jit``:
    every prediction and every state array equal, across pool boundaries and a resize (the JAX engine's
    programs: its learners run on JAX here)."""
    from nctl.core import programs

    monkeypatch.setenv("NCTL_ENGINE", "jax")

    X = np.random.default_rng(5).normal(size=(40, 3)).astype(np.float32)
    y = (X[:, 1] > 0).astype(int)

    def run():
        model = nctl.NCTL(layer_sizes=(1,), context_bits=2, pool=Pool(size=2, min_segment=4), depth=None, seed=4)
        preds = [model.learn_many(X[:20], y[:20])]
        for x, label in zip(X[20:], y[20:]):
            preds.append([model.predict_proba_one(x)])
            model.learn_one(x, label)
        return np.concatenate([np.ravel(p) for p in preds]), jax.tree.leaves(model.state_)

    before = programs.folder()
    try:
        programs.use_folder(tmp_path)
        stored_preds, stored_state = run()
        assert list(tmp_path.glob("run_steps-*.jaxexport"))
        programs.use_folder(None)
        plain_preds, plain_state = run()
    finally:
        programs.use_folder(before)
    np.testing.assert_array_equal(stored_preds, plain_preds)
    for a, b in zip(stored_state, plain_state, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_unreadable_stored_program_is_made_again(tmp_path):
    """A stored file that does not deserialise is exported and written again, and the program runs."""
    from nctl.core import engine, programs

    state_of = lambda: nctl.NCTL(layer_sizes=(1,), context_bits=1, seed=1)  # noqa: E731
    X = np.ones((2, 3), np.float32)
    before = programs.folder()
    try:
        programs.use_folder(tmp_path)
        expected = state_of().learn_many(X, np.array([1, 0]))
        for path in tmp_path.glob("*.jaxexport"):
            path.write_bytes(b"not a program")
        fresh = programs.jit(engine.compiled.run_steps.__wrapped__, static_argnums=(4, 5), donate_argnums=(0,),
                             compiler_options=engine.compiled.COMPILER_OPTIONS)
        model = state_of()
        model.learn_many(X[:1], np.array([1]))  # the learner's state, made by the stored init (made again)
        block = engine.compiled.learn_block(X[1:], np.array([0]), 0, model.cfg_)
        state, outcome, _ = fresh(model.state_, *block, model.cfg_, None, X[0], False)
        assert engine.compiled.unpack(np.asarray(outcome), model.cfg_)[0][0, 0] == expected[1]
        assert [path.read_bytes()[:13] != b"not a program" for path in tmp_path.glob("run_steps-*.jaxexport")] == [True]
    finally:
        programs.use_folder(before)


def test_without_a_serialiser_nothing_is_stored(monkeypatch, tmp_path):
    """Without ``flatbuffers`` (what ``jax.export`` serialises with) no folder is used and every program
    is plain ``jax.jit`` (the path that test_stored_programs_learn_and_predict_as_jit_does compares with)."""
    from nctl.core import mixing, programs

    before = programs.folder()
    monkeypatch.setattr(programs, "can_serialise", lambda: False)
    try:
        assert programs.use_folder(tmp_path) is None and programs.folder() is None
        likelihood = programs.jit(mixing.prob)
        assert float(likelihood(np.float32(0.25), np.int32(0))) == 0.75
    finally:
        monkeypatch.undo()
        programs.use_folder(before)
    assert not list(tmp_path.iterdir())


def test_only_module_level_functions_of_the_core_are_stored():
    """A stored program is named by its function's module and name, so a lambda or a function from
    elsewhere, which the key could not tell apart, is refused."""
    from nctl.core import programs

    with pytest.raises(ValueError, match="module-level functions of nctl.core"):
        programs.jit(lambda x: 2 * x)
    with pytest.raises(ValueError, match="module-level functions of nctl.core"):
        programs.jit(np.sum)


def test_compiler_options_apply_on_their_own_platform_only_and_unknown_ones_are_left_out(tmp_path):
    """Options named for another platform are ignored; those named for this one reach XLA (here: a folder
    XLA dumps the program into), and one this XLA does not know is left out rather than failing every
    program (XLA drops options between releases), so the engine's options break no platform or jaxlib."""
    from nctl.core import programs, tree

    here = jax.default_backend()
    elsewhere = "tpu" if here != "tpu" else "cpu"
    unknown = {"xla_no_such_option": ""}
    assert int(programs.jit(tree.trailing_zeros, compiler_options={elsewhere: unknown})(jnp.array(8))) == 3
    options = {**unknown, "xla_dump_to": str(tmp_path)}
    assert int(programs.jit(tree.trailing_zeros, compiler_options={here: options})(jnp.array(8))) == 3
    assert any(tmp_path.iterdir())
