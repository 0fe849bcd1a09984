"""``nctl sweep``'s grid: its syntax, its combinations, and every setting checked before any compute
(a sweep run end to end is in test_ray.py)."""

import pytest

from nctl import cli
from nctl.experiments import configs
from nctl.experiments import run as run_module
from nctl.experiments.sweep import configurations, parse_grid


def test_values_split_at_commas_or_at_semicolons_and_combine_last_key_fastest():
    grid = parse_grid(["nctl.pool_size=2,4", "network.layer_sizes=[10,1];[20, 10,1]"])
    assert grid == {"nctl.pool_size": ["2", "4"], "network.layer_sizes": ["[10,1]", "[20, 10,1]"]}
    exps = configurations(configs.get("demo"), {"max_steps": "64"}, grid)
    assert [(exp.nctl["pool_size"], exp.network["layer_sizes"]) for exp in exps] == [
        (2, (10, 1)), (2, (20, 10, 1)), (4, (10, 1)), (4, (20, 10, 1))]
    assert all(exp.max_steps == 64 and exp.network["context_bits"] == 4 for exp in exps)
    assert exps[0] == configs.get("demo").replace({"max_steps": "64", "nctl.pool_size": "2",
                                                   "network.layer_sizes": "[10,1]"})  # read as --set reads


@pytest.mark.parametrize("specs, message", [
    (["nctl.pool_size"], "--grid expects KEY=VALUE,VALUE,..., got 'nctl.pool_size'"),
    (["nctl.pool_size="], "--grid expects KEY=VALUE,VALUE"),
    (["nctl.pool_size=2,,4"], "--grid nctl.pool_size: an empty value in '2,,4'"),
    (["nctl.pool_size=2,4,2"], "--grid nctl.pool_size: a value is listed twice"),
    (["nctl.pool_size=2", "nctl.pool_size=4"], "--grid nctl.pool_size is given twice"),
])
def test_a_malformed_grid_is_refused(specs, message):
    with pytest.raises(ValueError, match=message):
        parse_grid(specs)


@pytest.mark.parametrize("args, message", [
    (["--grid", "nctl.pool_size=2,-1"], "grid setting nctl.pool_size=-1: nctl.pool_size must be an integer in"),
    (["--grid", "max_steps=64", "--grid", "steps_per_task=5,6"],
     "grid setting max_steps=64 steps_per_task=5: setting 'steps_per_task' does not apply to prequential"),
    (["--grid", "max_steps=64,100", "--set", "max_steps=10"], "max_steps is given in both --set and --grid"),
    (["--grid", "network.layer_sizes=[4,1];[4, 1]"],
     "grid settings network.layer_sizes=[4,1] and network.layer_sizes=[4, 1] make the same configuration"),
    (["--grid", "network.layer_sizes=[4,1]"], "grid setting network.layer_sizes=[4: network.layer_sizes must be"),
])
def test_every_grid_setting_is_checked_before_any_compute(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_module, "run_seed", lambda *args: pytest.fail("a seed ran"))
    assert cli.main(["sweep", "demo", "--quiet", "--out", str(tmp_path), *args]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("nctl: error: ") and message in error
    assert not any(tmp_path.iterdir())
