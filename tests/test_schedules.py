import pytest

from common.schedules import (
    LinearSchedule,
    PiecewiseSchedule,
    ScheduleError,
    make_schedule,
    schedule_spec,
)


def test_float_and_string_schedules():
    assert make_schedule(3e-4)(0.3) == pytest.approx(3e-4)
    lin = make_schedule("lin_2.5e-4")
    assert lin(1.0) == pytest.approx(2.5e-4)
    assert lin(0.5) == pytest.approx(1.25e-4)
    assert lin(0.0) == 0.0
    lin2 = make_schedule("lin_1e-3_1e-4")
    assert lin2(0.0) == pytest.approx(1e-4) and lin2(1.0) == pytest.approx(1e-3)
    assert make_schedule("const_0.1")(0.0) == pytest.approx(0.1)
    assert make_schedule("0.2")(0.7) == pytest.approx(0.2)
    assert schedule_spec(lin) == "lin_0.00025"


def test_callable_passes_through():
    def f(frac):
        return frac * 2

    assert make_schedule(f) is f


@pytest.mark.parametrize("bad", ["lin_", "cos_1e-3", "lin_a", True, None, [1]])
def test_bad_schedules_raise_clear_errors(bad):
    with pytest.raises(ScheduleError, match="schedule"):
        make_schedule(bad)


def test_timestep_schedules():
    s = LinearSchedule(100, final_p=0.1, initial_p=1.0)
    assert s.value(0) == 1.0 and s.value(50) == pytest.approx(0.55) and s.value(1000) == pytest.approx(0.1)
    p = PiecewiseSchedule([(0, 1.0), (10, 0.0)], outside_value=0.0)
    assert p.value(5) == pytest.approx(0.5) and p.value(20) == 0.0
    with pytest.raises(ScheduleError):
        PiecewiseSchedule([(0, 1.0), (10, 0.0)]).value(11)
