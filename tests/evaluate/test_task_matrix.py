import weakref
import numpy as np
import pytest
from evaluate_toys import (
    NumpyLogisticRegression,
    RunningMeanLearner,
    constant_label_task,
    linear_task,
    stream_of,
)

from nctl.evaluate import (
    ADAPT_STEPS,
    adapted,
    evaluate_task_matrix,
    evaluation_steps,
    prequential,
)


@pytest.fixture
def ones_then_zeros():
    tasks = (constant_label_task("ones", 1, 10, 5), constant_label_task("zeros", 0, 30, 5, seed=1))
    return stream_of(tasks, [(0, 10), (1, 30)])


def test_task_matrix_by_hand(ones_then_zeros):
    learner = RunningMeanLearner()
    result = evaluate_task_matrix(learner, ones_then_zeros)

    assert result.steps.tolist() == [0, 10, 40]
    # frozen: p = 0.5 (predicts 0), then 10/10, then 10/40
    np.testing.assert_array_equal(result.initial("frozen"), [0.0, 1.0])
    np.testing.assert_array_equal(result.matrix["frozen"], [[1.0, 0.0], [0.0, 1.0]])
    # adapt50: 50 examples of the evaluated task tip the running mean to that task's label
    np.testing.assert_array_equal(result.curve["adapt50"], np.ones((3, 2)))
    assert (learner.ones, learner.seen) == (10, 40)  # evaluation never touched the learner
    assert result.segment_tasks.tolist() == [0, 1]
    assert result.n_test.tolist() == [5, 5]


def test_adapted_changes_a_copy_not_the_learner():
    task = linear_task("a", np.array([2.0, -1.0, 0.5]), 200, 100, seed=3)
    X_test, _ = task.test_set()
    learner = NumpyLogisticRegression(3)
    learner.learn_many(*task.train_rows(np.arange(5)))
    before = learner.predict_proba_many(X_test)

    with adapted(learner, task, np.random.default_rng(0)) as snapshot:
        after = snapshot.predict_proba_many(X_test)

    np.testing.assert_array_equal(learner.predict_proba_many(X_test), before)
    assert np.max(np.abs(after - before)) > 0.05


def test_evaluation_leaves_training_identical_to_plain_prequential():
    tasks = (
        linear_task("a", np.array([1.0, 1.0, 0.0]), 80, 30, seed=4),
        linear_task("b", np.array([0.0, -1.0, 1.0]), 80, 30, seed=5),
    )
    stream = stream_of(tasks, [(0, 80), (1, 80)])
    evaluated = NumpyLogisticRegression(3)
    evaluate_task_matrix(evaluated, stream, eval_every=25, chunk_size=16)
    plain = NumpyLogisticRegression(3)
    prequential(plain, stream)
    np.testing.assert_array_equal(evaluated.w, plain.w)
    assert evaluated.b == plain.b


def test_eval_every_curve_and_segment_rows():
    tasks = (
        linear_task("a", np.array([1.0, 0.0, 0.0]), 70, 20, seed=6),
        linear_task("b", np.array([0.0, 1.0, 0.0]), 70, 20, seed=7),
    )
    stream = stream_of(tasks, [(0, 70), (1, 50), (0, 30)])
    assert evaluation_steps(stream, 40).tolist() == [0, 40, 70, 80, 120, 150]
    result = evaluate_task_matrix(
        NumpyLogisticRegression(3), stream, eval_every=40, variants=("frozen",)
    )
    assert result.variants == ("frozen",)
    assert result.curve["frozen"].shape == (6, 2)
    np.testing.assert_array_equal(result.matrix["frozen"], result.curve["frozen"][[2, 4, 5]])
    assert result.segment_tasks.tolist() == [0, 1, 0]


def test_max_test_caps_test_sets_with_a_seeded_subset():
    tasks = (linear_task("a", np.array([1.0, -1.0, 0.0]), 40, 200, seed=8),)
    stream = stream_of(tasks, [(0, 40)])
    first = evaluate_task_matrix(NumpyLogisticRegression(3), stream, max_test=30, seed=5)
    again = evaluate_task_matrix(NumpyLogisticRegression(3), stream, max_test=30, seed=5)
    assert first.n_test.tolist() == [30] and first.max_test == 30
    for variant in first.variants:
        np.testing.assert_array_equal(first.curve[variant], again.curve[variant])
        # accuracies over 30 examples are multiples of 1/30
        np.testing.assert_allclose(first.curve[variant] * 30, np.round(first.curve[variant] * 30))


def test_segment_hook_runs_at_each_segment_end_before_evaluation(ones_then_zeros):
    calls = []

    def hook(learner, stream, segment):
        calls.append((segment, learner.seen))

    evaluate_task_matrix(RunningMeanLearner(), ones_then_zeros, on_segment_end=hook, eval_every=4)
    assert calls == [((0, 0, 10), 10), ((1, 10, 40), 40)]


def test_adapt_uses_fifty_examples():
    assert ADAPT_STEPS == 50
    learner = RunningMeanLearner()
    with adapted(learner, constant_label_task("ones", 1, 10, 5), np.random.default_rng(0)) as snapshot:
        assert snapshot.seen == 50
    assert learner.seen == 0


def test_bad_protocol_arguments_are_value_errors(ones_then_zeros):
    with pytest.raises(ValueError, match="variants"):
        evaluate_task_matrix(RunningMeanLearner(), ones_then_zeros, variants=("adapt10",))
    with pytest.raises(ValueError, match="eval_every"):
        evaluate_task_matrix(RunningMeanLearner(), ones_then_zeros, eval_every=0)
    with pytest.raises(ValueError, match="max_test"):
        evaluate_task_matrix(RunningMeanLearner(), ones_then_zeros, max_test=0)
    never_trained = stream_of((ones_then_zeros.tasks[0], constant_label_task("empty", 0, 0, 5)), [(0, 10)])
    with pytest.raises(ValueError, match=r"adapt50 .*\['empty'\] have none"):
        evaluate_task_matrix(RunningMeanLearner(), never_trained)
    evaluate_task_matrix(RunningMeanLearner(), never_trained, variants=("frozen",))  # nothing to sample


def test_progress_hook_counts_every_trained_step_from_a_resume_point(ones_then_zeros):
    learner, reports = RunningMeanLearner(), []
    evaluate_task_matrix(learner, ones_then_zeros, eval_every=4, chunk_size=3,
                         on_progress=lambda trained, total: reports.append((trained, total, learner.seen)))
    assert [r[0] for r in reports] == [r[2] for r in reports]  # each report is the learner's true count
    assert reports[0][0] == 0 and reports[-1][0] == 40 and {r[1] for r in reports} == {40}
    assert all(a[0] < b[0] for a, b in zip(reports, reports[1:]))

    class SavedAtFirstTaskEnd:
        def load(self):
            resumed = RunningMeanLearner()
            resumed.learn_many(*ones_then_zeros.tasks[0].train_rows(np.arange(10)))
            return resumed, 2, {"frozen": np.zeros((4, 2)), "adapt50": np.zeros((4, 2))}

        def save(self, learner, evaluations, curve):
            pass

    resumed_reports = []
    evaluate_task_matrix(RunningMeanLearner(), ones_then_zeros, eval_every=10, checkpoint=SavedAtFirstTaskEnd(),
                         on_progress=lambda trained, total: resumed_reports.append(trained))
    assert resumed_reports[0] == 10 and resumed_reports[-1] == 40


def test_adapt50_drops_each_copy_before_making_the_next(ones_then_zeros):
    """A copy that a fork learned on may hold as much as the learner: two alive at once would double
    what the evaluation needs. Each copy counts the copies alive when it is made."""
    alive = weakref.WeakSet()
    most = []

    class CountedCopies(RunningMeanLearner):
        def copy(self):
            most.append(len(alive))
            twin = super().copy()
            alive.add(twin)
            return twin

    evaluate_task_matrix(CountedCopies(), ones_then_zeros)
    assert len(most) == 6 and max(most) == 0  # 3 evaluations x 2 tasks, each copy gone before the next
