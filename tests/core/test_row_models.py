"""The row-model protocol (``nctl.core.rows.RowModel``): every row model the engine runs has each of its
members, and a class that lacks one is not a row model."""

from typing import NamedTuple

import pytest

import nctl
from nctl.core.gaussian import GaussianRows
from nctl.core.rows import GGMRows, KTRows, RowModel


@pytest.mark.parametrize("rows", [GGMRows(), KTRows(), GaussianRows(), nctl.NCTL().rows, nctl.NCTLRegressor().rows])
def test_every_row_model_the_engine_runs_has_the_protocols_members(rows):
    assert isinstance(rows, RowModel)
    hash(rows)  # the engine's configuration, a static argument of its programs, holds it


def test_a_class_that_lacks_a_member_is_not_a_row_model():
    class NoMixture(NamedTuple):
        learning_rate: float = 0.1

    for name in RowModel.__annotations__.keys() | {n for n in vars(RowModel) if not n.startswith("_")}:
        if name != "mix":
            setattr(NoMixture, name, getattr(GGMRows, name))
    assert not isinstance(NoMixture(), RowModel)
    NoMixture.mix = GGMRows.mix
    assert isinstance(NoMixture(), RowModel)
