"""bench/her_failures.py: a failed episode's kind from where the object ended."""
import numpy as np
import pytest

from bench.her_failures import failure_kind

START = np.array([1.3, 0.7, 0.425])


@pytest.mark.parametrize("end, goal, kind", [
    ((1.3, 0.2, 0.025), (1.3, 0.9, 0.425), "off the table"),
    ((1.3, 0.8, 0.425), (1.3, 0.9, 0.425), "near the goal"),
    ((1.3, 0.7, 0.425), (1.3, 0.95, 0.425), "never moved"),
    ((1.5, 0.7, 0.425), (1.3, 0.95, 0.425), "elsewhere"),
])
def test_a_failed_episode_is_sorted_by_where_the_object_ended(end, goal, kind):
    assert failure_kind(START, np.array(end), np.array(goal)) == kind
