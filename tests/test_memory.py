"""CacheTrim: Jittor's cached blocks are handed back once they pile up, and only then."""
import jittor as jt
import pytest

from conftest import run_python

from tensorf_jt.runtime.memory import CacheTrim, held_bytes


def test_trims_when_what_is_held_has_grown_past_the_factor_then_measures_again():
    readings = iter([100, 150, 200, 201, 50, 60, 130])
    released = []
    trim = CacheTrim(2.0, held=lambda: next(readings), release=lambda: released.append(True))
    assert [trim.check() for _ in range(4)] == [False, False, False, True]  # baseline 100; 201 > 200
    assert trim.trims == 1 and len(released) == 1 and trim.baseline is None
    assert [trim.check() for _ in range(3)] == [False, False, True]  # new baseline 50; 130 > 100
    assert trim.trims == 2


def test_off_reads_nothing_and_bad_factors_are_refused():
    trim = CacheTrim(0, held=lambda: pytest.fail("read"), release=lambda: pytest.fail("released"))
    assert not any(trim.check() for _ in range(3))
    for growth in (1.0, 0.5, -2):
        with pytest.raises(ValueError, match="0 \\(off\\) or above 1"):
            CacheTrim(growth)


def _growing_steps(trim: CacheTrim, steps: int = 12) -> int:
    """Steps whose temporaries are a little larger each time (as while densities appear);
    returns the most Jittor held after a step beyond what live Vars of earlier tests hold."""
    jt.gc()
    before = held_bytes()
    most = 0
    for step in range(steps):
        n = (2_000_000 + 400_000 * step)  # 8 MB and up, past the allocator's 5 MB chunks
        a = (jt.ones(n) * 2.0).sync()  # materialised, as a step's saved activations are
        b = (a + 1.0).sqrt().sync()
        c = (a * b).sync()
        c.sum().sync()
        del a, b, c
        trim.check()
        most = max(most, held_bytes() - before)
    return most


def check_growing_steps() -> None:
    untrimmed = _growing_steps(CacheTrim(0))
    trimmed_once = CacheTrim(2.0)
    trimmed = _growing_steps(trimmed_once)
    largest_step = 3 * 4 * (2_000_000 + 400_000 * 11)  # three arrays of the last step's size, float32
    assert untrimmed > 3 * largest_step, untrimmed
    assert trimmed < 2.5 * largest_step and trimmed_once.trims >= 1, (trimmed, trimmed_once.trims)


def test_growing_steps_keep_piling_up_without_it_and_not_with_it():
    """In a process of its own: what earlier tests left in Jittor's allocator would count too."""
    result = run_python(["-c", "import sys; sys.path.insert(0, 'tests'); import tensorf_jt; "
                               "from test_memory import check_growing_steps; check_growing_steps()"])
    assert result.returncode == 0, result.stderr[-3000:]
