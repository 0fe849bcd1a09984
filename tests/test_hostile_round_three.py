"""Issue 86 ("Reliability, round three"), case by case: what a hostile user tried, and the one clear
error, or the kept work, that must come instead. Numbers in the comments are the issue's items."""

import os
import stat

import numpy as np
import pytest

import nctl
from nctl import atomic, cli


def one_error_line(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("nctl: error: "), error
    return error


# ----------------------------------------------------------------------------- 5: only a regular file is replaced


def not_regular(tmp_path, kind):
    """A FIFO, a folder, or a link to a FIFO, at ``tmp_path / "target"``; and a test that it is unchanged."""
    target = tmp_path / "target"
    if kind == "folder":
        target.mkdir()
        return target, lambda: target.is_dir() and not any(target.iterdir())
    os.mkfifo(tmp_path / "fifo")
    if kind == "link to a FIFO":
        target.symlink_to(tmp_path / "fifo")
    else:
        os.replace(tmp_path / "fifo", target)
    return target, lambda: stat.S_ISFIFO(target.stat().st_mode)


@pytest.mark.parametrize("kind, named", [("FIFO", "a FIFO"), ("folder", "a folder"), ("link to a FIFO", "a FIFO")])
def test_an_atomic_write_refuses_a_target_that_is_not_a_regular_file_before_writing(tmp_path, kind, named):
    target, unchanged = not_regular(tmp_path, kind)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(FileExistsError, match=f"cannot write {target}: it is {named}, not a regular file"):
        atomic.write_bytes(target, b"data")
    assert unchanged() and sorted(tmp_path.iterdir()) == before  # no temporary either


def test_save_onto_a_fifo_is_refused_and_the_fifo_kept(tmp_path):
    target, unchanged = not_regular(tmp_path, "FIFO")
    model = nctl.GLN(layer_sizes=(3, 1), context_bits=1, learning_rate=0.1)
    model.learn_many(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1]))
    with pytest.raises(FileExistsError, match="it is a FIFO"):
        model.save(target)
    assert unchanged() and sorted(p.name for p in tmp_path.iterdir()) == ["target"]


@pytest.mark.parametrize("kind", ["FIFO", "folder"])
def test_report_out_onto_a_fifo_or_a_folder_is_one_error_line(tmp_path, kind, capsys):
    target, unchanged = not_regular(tmp_path, kind)
    results = "docs/results/regression/regression-trump"
    assert cli.main(["report", results, "--out", str(target)]) == 2
    assert f"cannot write {target}: it is a" in one_error_line(capsys)
    assert unchanged()
