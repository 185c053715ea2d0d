"""The shared argument validators on huge, non-finite and boolean numbers.

Every numeric argument of the public API goes through proctree._validate:
whatever number a caller passes, the answer is the value, a TypeError or a
ValueError, never an OverflowError or a quietly accepted nonsense value.
"""

import math

import pytest

from proctree._validate import PID_MAX, check_pid, check_positive_int, check_seconds

HUGE_INTS = [10**400, -(10**400), 2**1024, -(2**63), 10**5000]


def short(value):
    if isinstance(value, int) and value.bit_length() > 64:
        return f"int of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) < 20 else f"{text[:8]}...({len(text)} chars)"


@pytest.mark.parametrize("value", HUGE_INTS + [float("inf"), float("-inf"), float("nan"), -1, -0.5, -1e-300], ids=short)
def test_seconds_out_of_range_is_a_value_error(value):
    with pytest.raises(ValueError, match="finite number of seconds"):
        check_seconds(value, "grace")


@pytest.mark.parametrize("value", [True, False, None, "1", b"1", 1j, [1]], ids=short)
def test_seconds_wrong_type_is_a_type_error(value):
    with pytest.raises(TypeError):
        check_seconds(value, "grace")


@pytest.mark.parametrize("value,expected", [(0, 0.0), (2, 2.0), (0.25, 0.25), (1e300, 1e300), (10**300, 1e300)])
def test_seconds_in_range(value, expected):
    got = check_seconds(value, "grace")
    assert type(got) is float and got == expected


def test_negative_zero_seconds_is_plain_zero():
    got = check_seconds(-0.0, "grace")
    assert got == 0.0 and math.copysign(1.0, got) == 1.0


@pytest.mark.parametrize("value", HUGE_INTS + [0, -1, PID_MAX + 1], ids=short)
def test_pid_out_of_range_is_a_value_error(value):
    with pytest.raises(ValueError):
        check_pid(value)


@pytest.mark.parametrize("value", [True, False, 1.0, float("inf"), float("nan"), "1"], ids=short)
def test_pid_wrong_type_is_a_type_error(value):
    with pytest.raises(TypeError):
        check_pid(value)


@pytest.mark.parametrize("value", [0, -1, -(10**400)], ids=short)
def test_positive_int_too_small_is_a_value_error(value):
    with pytest.raises(ValueError):
        check_positive_int(value, "max_procs")


@pytest.mark.parametrize("value", [True, False, 1.0, float("inf"), float("nan"), "1"], ids=short)
def test_positive_int_wrong_type_is_a_type_error(value):
    with pytest.raises(TypeError):
        check_positive_int(value, "max_procs")


def test_positive_int_huge_is_accepted_as_no_limit():
    # A limit larger than any table is simply never reached.
    assert check_positive_int(10**400, "max_procs") == 10**400


def test_terminate_tree_with_huge_grace_is_a_value_error():
    import proctree

    with pytest.raises(ValueError):
        proctree.terminate_tree(PID_MAX, grace=10**400)  # refused before the pid is looked at


def test_error_message_for_a_huge_int_is_short():
    with pytest.raises(ValueError) as info:
        check_pid(10**5000)
    assert len(str(info.value)) < 200 and "bits" in str(info.value)
