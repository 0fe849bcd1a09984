"""The Ray executor on a local 2-CPU Ray: the same seeds as one process, failed and killed workers,
and a sweep. Tiny GLN-only demo runs: a configuration compiles once per worker process."""

import json
import os
import signal

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'nctl[ray]'")

from nctl import cli, compilation  # noqa: E402  (after the skip)
from nctl.experiments import configs, executors, runners  # noqa: E402
from nctl.experiments import run as run_module  # noqa: E402
from nctl.experiments.run import SeedsFailed, write_seed, config_folder, config_hash, run  # noqa: E402

TINY = {"max_steps": "64", "network.layer_sizes": "[4,1]", "network.context_bits": "1", "learners": '["gln"]'}
TINY_ARGS = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
MEASURED = {"wall_s", "seconds", "examples_per_s", "peak_rss_bytes"}  # differ between runs


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def without_measurements(data):
    if isinstance(data, dict):
        return {k: without_measurements(v) for k, v in data.items() if k not in MEASURED}
    if isinstance(data, list):
        return [without_measurements(v) for v in data]
    return data


def stored(path):
    return without_measurements(json.loads(path.read_text()))


def test_ray_writes_the_seed_files_results_and_table_of_one_process(tmp_path, capsys):
    folders = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        assert cli.main(["run", "demo", "--seeds", "2", "--out", str(out), "--executor", executor, *TINY_ARGS]) == 0
        printed = capsys.readouterr()
        table = printed.out.split("results:")[0].split("| experiment | seeds |")[0]  # without the measured costs
        folders[executor] = (config_folder(out, configs.get("demo").replace(TINY)), table)
    assert "2/2 [" in printed.err  # the seeds bar of the Ray run
    (local, local_table), (on_ray, ray_table) = folders["local"], folders["ray"]
    seed_files = sorted(path.name for path in (local / "seeds").iterdir())
    assert seed_files == ["seed-0000.json", "seed-0001.json"]
    assert sorted(path.name for path in (on_ray / "seeds").iterdir()) == seed_files
    for name in seed_files:
        assert stored(on_ray / "seeds" / name) == stored(local / "seeds" / name)
    assert stored(on_ray / "results.json") == stored(local / "results.json")
    assert ray_table == local_table and "| demo | GLN | prequential | accuracy |" in ray_table


def test_ray_workers_take_over_the_compilation_cache_of_the_process_that_runs_the_seeds():
    ours = compilation.current()
    assert ours is not None
    assert dict(executors.ray_tasks()(compilation.current, [(), ()])) == {0: ours, 1: ours}


def test_a_failed_task_is_reported_the_others_are_kept_and_a_rerun_runs_only_it(tmp_path, monkeypatch):
    exp, calls, broken = configs.get("demo").replace(TINY), tmp_path / "calls", tmp_path / "broken"

    def logged(exp, seed, *args):
        with open(calls, "a") as log:
            log.write(f"{seed}\n")
        if seed == 1 and broken.exists():
            raise RuntimeError("seed 1 is broken")
        return runners.run_seed(exp, seed, *args)

    monkeypatch.setattr(run_module, "run_seed", logged)
    broken.touch()
    out, folder = tmp_path / "out", config_folder(tmp_path / "out", exp)
    with pytest.raises(SeedsFailed, match=r"^1 of 3 seeds failed \(seed 1: RuntimeError: seed 1 is broken\)") as failed:
        run(exp, [0, 1, 2], out, executor=executors.ray_tasks(), progress=False)
    assert [(seed, str(error)) for _, seed, error in failed.value.failures] == [(1, "seed 1 is broken")]
    assert "in logged" in "".join(failed.value.__cause__.__notes__)  # the worker's traceback
    assert sorted(calls.read_text().split()) == ["0", "1", "2"]  # the others went on
    kept = {path.name: path.read_bytes() for path in (folder / "seeds").iterdir()}
    assert sorted(kept) == ["seed-0000.json", "seed-0002.json"]
    assert [seed["seed"] for seed in json.loads((folder / "results.json").read_text())["seeds"]] == [0, 2]

    calls.unlink()
    broken.unlink()
    results = run(exp, [0, 1, 2], out, executor=executors.ray_tasks(), progress=False)
    assert calls.read_text() == "1\n"  # only the missing seed ran
    assert [seed["seed"] for seed in results["seeds"]] == [0, 1, 2]
    assert {name: (folder / "seeds" / name).read_bytes() for name in kept} == kept


def test_a_seed_whose_worker_is_killed_is_run_again(tmp_path, monkeypatch):
    exp, killed = configs.get("demo").replace(TINY), tmp_path / "killed"

    def first_worker_dies(exp, seed, *args):
        if seed == 1 and not killed.exists():
            killed.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return runners.run_seed(exp, seed, *args)

    monkeypatch.setattr(run_module, "run_seed", first_worker_dies)
    results = run(exp, [0, 1], tmp_path / "out", executor=executors.ray_tasks(), progress=False)
    assert killed.exists() and [seed["seed"] for seed in results["seeds"]] == [0, 1]


def test_a_rerun_with_every_seed_finished_starts_no_ray(tmp_path, monkeypatch):
    exp, finished = configs.get("demo").replace(TINY), {"seed": 0, "steps": 7, "learners": {}}
    write_seed(config_folder(tmp_path, exp), 0, config_hash(exp), finished)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: pytest.fail("Ray was started"))
    assert run(exp, [0], tmp_path, executor=executors.ray_tasks(), progress=False)["seeds"] == [finished]


def test_a_sweep_on_ray_writes_one_row_per_setting_from_its_results(tmp_path, capsys):
    out = tmp_path / "out"
    fixed = [arg for key, value in TINY.items() if key != "max_steps" for arg in ("--set", f"{key}={value}")]
    assert cli.main(["sweep", "demo", "--grid", "max_steps=48,64", "--seeds", "2", "--quiet", "--out", str(out),
                     "--executor", "ray", *fixed]) == 0
    table = (out / "demo" / "sweep.md").read_text()
    assert capsys.readouterr().out.startswith(table)
    lines = table.splitlines()
    assert lines[0] == "| max_steps | GLN prequential accuracy | GLN prequential log_loss | seeds | folder |"
    numbers = json.loads((out / "demo" / "sweep.json").read_text())
    assert len(lines) == 4 and len(numbers["settings"]) == 2
    for steps, entry, line in zip((48, 64), numbers["settings"], lines[2:]):
        results = json.loads((out / "demo" / entry["results"]).read_text())
        assert entry["setting"] == {"max_steps": steps} and results["config"]["max_steps"] == steps
        assert [seed["steps"] for seed in results["seeds"]] == [steps, steps]
        accuracy = results["summary"]["learners"]["gln"]["accuracy"]
        assert {k: entry["metrics"][0][k] for k in accuracy} == accuracy
        low, high = 100 * accuracy["ci_low"], 100 * accuracy["ci_high"]
        assert line.startswith(f"| {steps} | {100 * accuracy['mean']:.2f} [{low:.2f}, {high:.2f}] | ")
        assert line.endswith(f"| 2 | {entry['config_hash']} |")
