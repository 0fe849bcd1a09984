"""``RowBuffer``: the rows ``learn_one`` keeps back on the JAX engine wait in order, and those a learning call
did not reach wait again, before any added since."""

import numpy as np

from nctl.learners import PENDING_ROWS, RowBuffer


def test_the_buffer_says_when_it_is_full_and_hands_its_rows_over_stacked_in_order():
    rows = RowBuffer()
    full = [rows.add(np.full(2, i, np.float32), np.int32(i % 2)) for i in range(PENDING_ROWS)]
    assert full == [False] * (PENDING_ROWS - 1) + [True] and len(rows) == PENDING_ROWS
    seen = []
    result = rows.learned_by(lambda X, y, stop: (seen.append((X.copy(), y.copy())) or len(X), "done"), "GLN")
    X, y = seen[0]
    assert result == "done" and len(rows) == 0
    assert X.shape == (PENDING_ROWS, 2) and list(X[:3, 0]) == [0, 1, 2] and list(y[:4]) == [0, 1, 0, 1]


def test_rows_a_call_did_not_learn_wait_again_before_the_rows_added_during_it():
    rows = RowBuffer()
    for i in range(5):
        rows.add(np.full(1, i, np.float32), np.int32(0))

    def learn_two_while_a_row_arrives(X, y, stop):
        rows.add(np.full(1, 9, np.float32), np.int32(0))
        return 2, None

    rows.learned_by(learn_two_while_a_row_arrives, "GLN")
    left = rows.learned_by(lambda X, y, stop: (len(X), [float(v) for v in X[:, 0]]), "GLN")
    assert left == [2.0, 3.0, 4.0, 9.0]
