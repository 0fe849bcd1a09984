"""benchmarks/river_suite.py: its numbers and ranks on tiny streams, its results files (never replaced), and
the page it writes, which must be the committed page of the committed results file."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("river_suite", REPO / "benchmarks" / "river_suite.py")
river_suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(river_suite)

# two binary streams of 9 features each, so NCTL compiles its programs once
PLAN = {"classification": (["Phishing", "Agrawal"], ["NCTL", "Logistic regression", "Naive Bayes"]),
        "regression": (["ChickWeights"], ["GLN", "Linear regression", "k-Nearest Neighbors"])}


@pytest.fixture(scope="module")
def results():
    return river_suite.suite(PLAN, rows=200, seed=1, data_dir=None, limit=200, log=lambda line: None,
                             command="python benchmarks/river_suite.py --rows 200", arguments={"rows": 200})


def test_every_model_has_its_numbers_on_every_stream(results):
    assert results["format"] == river_suite.FORMAT
    assert set(results["run"]) >= {"command", "machine", "versions", "loadavg_start", "loadavg_end", "seconds"}
    assert set(results["run"]["versions"]) == {"python", "river", "nctl", "jax"}
    for task, (streams, models) in PLAN.items():
        part = results["tasks"][task]
        assert list(part["streams"]) == streams and list(part["models"]) == models
        metrics = ("accuracy", "log_loss") if task == "classification" else ("mae", "rmse")
        for stream in streams:
            assert part["streams"][stream]["rows"] == 200
            for model in models:
                numbers = part["results"][stream][model]
                assert all(numbers[m] > 0 for m in metrics + ("rows_per_s", "memory_bytes", "first_row_s"))
                assert 190 <= numbers["scored_rows"] <= 200
    accuracy = results["tasks"]["classification"]["results"]["Phishing"]
    assert all(0 < accuracy[m]["accuracy"] <= 1 for m in accuracy)
    assert accuracy["NCTL"]["accuracy"] > 0.6  # better than chance: the adapter learns


def test_ranks_follow_the_scores_and_average_over_streams(results):
    for part in results["tasks"].values():
        metric, sign = part["metric"], 1 if part["bigger_is_better"] else -1
        keys = [(metric, sign)] + ([("log_loss", -1)] if metric == "accuracy" else [])
        for key, key_sign in keys:
            for numbers in part["results"].values():
                for a in numbers:
                    better = sum(key_sign * numbers[b][key] > key_sign * numbers[a][key] for b in numbers)
                    tied = sum(numbers[b][key] == numbers[a][key] for b in numbers)
                    assert numbers[a][f"{key}_rank"] == better + (tied + 1) / 2
            for model in part["models"]:
                mean = sum(n[model][f"{key}_rank"] for n in part["results"].values()) / len(part["results"])
                assert part["mean_ranks"][f"{key}_rank"][model] == pytest.approx(mean, abs=1e-3)


def test_ranks_share_ties():
    assert river_suite.ranks({"a": 0.9, "b": 0.8, "c": 0.9}, True) == {"a": 1.5, "b": 3, "c": 1.5}
    assert river_suite.ranks({"a": 2.0, "b": 1.0}, False) == {"a": 2, "b": 1}


def test_the_page_shows_the_numbers_of_its_results_file(results, tmp_path):
    path = tmp_path / "results" / "river-suite-1.json"
    river_suite.write_new(path, json.dumps(results))
    page = tmp_path / "page.md"
    river_suite.write_page(path, page)
    text = page.read_text()
    assert "[river-suite-1.json](results/river-suite-1.json)" in text
    for stream, numbers in results["tasks"]["classification"]["results"].items():
        for model, n in numbers.items():
            assert f"| {model} | {100 * n['accuracy']:.2f} | {n['log_loss']:.3f} |" in text
    for model, n in results["tasks"]["regression"]["results"]["ChickWeights"].items():
        assert f"| {model} | {n['mae']:.3f} | {n['rmse']:.3f} |" in text
    assert results["run"]["command"] in text and results["run"]["machine"]["cpu"] in text


def test_a_results_file_is_never_replaced(tmp_path):
    path = tmp_path / "river-suite-1.json"
    river_suite.write_new(path, "first")
    with pytest.raises(FileExistsError):
        river_suite.write_new(path, "second")
    assert path.read_text() == "first" and [p.name for p in tmp_path.iterdir()] == [path.name]
    assert river_suite.first_free(tmp_path).name == "river-suite-2.json"


def test_the_committed_page_is_the_one_its_results_file_makes():
    text = river_suite.PAGE.read_text()
    link = re.search(r"\]\((results/river-suite/[^)]+\.json)\)", text).group(1)
    results = json.loads((river_suite.PAGE.parent / link).read_text())
    assert text == river_suite.page(results, link), "rerun: python benchmarks/river_suite.py --page docs/" + link
