"""``nctl.Pool``: the pool's settings as one object, checked once, taken by every NCTL learner and adapter;
the flat keywords of earlier releases still work, with a deprecation warning, and earlier saves load."""

import dataclasses
import json
import warnings

import numpy as np
import pytest

import nctl
from nctl.pool import with_pool
from nctl.river import NCTLClassifier as RiverNCTL
from nctl.sequence import FMN
from nctl.sklearn import NCTLClassifier as SklearnNCTL

SMALL = dict(layer_sizes=(2, 1), context_bits=1, depth=8)
DEPRECATED = "is deprecated and will be removed in the next release: pass pool=nctl.Pool"


def rows(n=120, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, 3)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(int)


def test_a_pool_is_immutable_and_gives_the_engine_its_settings():
    pool = nctl.Pool(size=4, min_segment=8, eviction="spacing", trained_members=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pool.size = 5
    config = pool.config()
    assert (config.capacity, config.min_segment, config.eviction, config.lanes, config.bounded) == (4, 8, "spacing",
                                                                                                 2, True)
    assert nctl.Pool(size=4.0).size == 4 and type(nctl.Pool(size=4.0).size) is int


@pytest.mark.parametrize("make, default", [(nctl.NCTL, nctl.Pool()),
                                           (nctl.NCTLRegressor, nctl.Pool(eviction="spacing")),
                                           (FMN, nctl.Pool())])
def test_flat_pool_keywords_warn_and_set_the_same_pool_over_the_learners_default(make, default):
    warned = rf"{make.__name__}\(min_segment=\.\.\., pool_size=\.\.\.\) {DEPRECATED}"
    with pytest.warns(DeprecationWarning, match=warned):
        old = make(pool_size=3, min_segment=64)
    assert old.pool == dataclasses.replace(default, size=3, min_segment=64)
    with pytest.warns(DeprecationWarning):  # onto the pool given, where one is
        assert make(pool=nctl.Pool(size=9), eviction="spacing").pool == nctl.Pool(size=9, eviction="spacing")


def test_flat_pool_keywords_learn_what_the_pool_learns():
    X, y = rows()
    with pytest.warns(DeprecationWarning):
        old = nctl.NCTL(**SMALL, pool_size=2, min_segment=4, reservoir_size=8)
    new = nctl.NCTL(**SMALL, pool=nctl.Pool(size=2, min_segment=4, reservoir_size=8))
    np.testing.assert_array_equal(old.learn_many(X, y), new.learn_many(X, y))


def test_the_adapters_take_flat_pool_keywords_over_their_own_pool():
    tabular = nctl.NCTL.tabular().pool
    with pytest.warns(DeprecationWarning, match=rf"NCTLClassifier\(pool_size=\.\.\.\) {DEPRECATED}"):
        river = RiverNCTL(pool_size=3)
    assert river.pool == river.learner.pool == dataclasses.replace(tabular, size=3)
    with pytest.warns(DeprecationWarning):
        sklearn = SklearnNCTL(pool_size=3)
    assert sklearn.fit(*rows(20)).learner_.pool == dataclasses.replace(tabular, size=3)


def test_an_adapter_pool_of_none_is_its_default_and_a_pool_given_is_taken_whole():
    assert RiverNCTL().pool is None and RiverNCTL().learner.pool == nctl.NCTL.tabular().pool
    assert RiverNCTL(pool=nctl.Pool(size=3)).learner.pool == nctl.Pool(size=3)  # min_segment: Pool's own 32


def test_a_pool_as_a_dict_of_its_fields_is_a_pool_and_unknown_fields_are_named():
    assert nctl.NCTL(pool={"size": 3, "eviction": "spacing"}).pool == nctl.Pool(size=3, eviction="spacing")
    with pytest.raises(ValueError, match="pool has unknown field.s. pool_size; a Pool's: size, min_segment"):
        nctl.NCTL(pool={"pool_size": 3})


def test_with_pool_moves_the_flat_settings_onto_a_pool():
    assert with_pool({"depth": 3}) == {"depth": 3}
    assert with_pool({"depth": 3, "pool_size": 2, "eviction": "spacing"}) == {
        "depth": 3, "pool": nctl.Pool(size=2, eviction="spacing")}
    assert with_pool({"min_segment": 8}, nctl.Pool(size=5))["pool"] == nctl.Pool(size=5, min_segment=8)


@pytest.mark.parametrize("make", [nctl.NCTL, nctl.NCTLRegressor])
def test_a_save_whose_parameters_hold_the_flat_pool_settings_loads_with_that_pool(make, tmp_path):
    """Saves before format 8 held the pool's settings as parameters of their own."""
    X, y = rows()
    model = make(**SMALL, pool=nctl.Pool(size=2, min_segment=4, reservoir_size=8, eviction="spacing"))
    model.learn_many(X[:100], y[:100].astype(float) if make is nctl.NCTLRegressor else y[:100])
    path, old = tmp_path / "new.npz", tmp_path / "old.npz"
    model.save(path)
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        arrays = {name: data[name] for name in data.files if name != "meta"}
    assert meta["format"] == 8 and meta["params"]["pool"]["size"] == 2
    pool = meta["params"].pop("pool")
    meta["params"].update({"pool_size" if k == "size" else k: v for k, v in pool.items()})
    meta["format"] = 7
    np.savez(old, meta=np.array(json.dumps(meta)), **arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # loading an old save is not a deprecated use
        loaded = nctl.load(old)
    assert loaded.pool == model.pool and loaded.params() == model.params()
    predict = "predict_many" if make is nctl.NCTLRegressor else "predict_proba_many"
    np.testing.assert_array_equal(getattr(loaded, predict)(X[100:]), getattr(model, predict)(X[100:]))
