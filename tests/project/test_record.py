"""_record.record behaves as a frozen dataclass does, for the records that load with proctree.Popen."""

import dataclasses

import pytest

from proctree._record import record, replace


@record
class Rec:
    a: int
    b: str
    c: int | None = None
    d: tuple = ()


@dataclasses.dataclass(frozen=True)
class Ref:
    a: int
    b: str
    c: int | None = None
    d: tuple = ()


CALLS = [
    ((1, "x"), {}),
    ((1,), {"b": "x"}),
    ((), {"a": 1, "b": "x", "d": (2,)}),
    ((1, "x", 3, (4,)), {}),
    ((1, "x"), {"c": None}),
]


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_made_as_a_frozen_dataclass_is(args, kwargs):
    mine, ref = Rec(*args, **kwargs), Ref(*args, **kwargs)
    assert repr(mine).replace("Rec(", "") == repr(ref).replace("Ref(", "")
    assert dataclasses.astuple(ref) == tuple(getattr(mine, f) for f in ("a", "b", "c", "d"))
    assert mine == Rec(*args, **kwargs) and hash(mine) == hash(Rec(*args, **kwargs))


BAD = [
    ((1, "x", 3, (4,), 5), {}),  # too many
    ((1,), {}),  # b missing
    ((1, "x"), {"e": 1}),  # unknown
    ((1, "x"), {"a": 2}),  # twice
]


@pytest.mark.parametrize("args, kwargs", BAD)
def test_bad_calls_raise_type_error_as_a_dataclass_does(args, kwargs):
    with pytest.raises(TypeError):
        Ref(*args, **kwargs)
    with pytest.raises(TypeError):
        Rec(*args, **kwargs)


def test_frozen_equal_by_value_and_class_and_replaced():
    r = Rec(1, "x")
    with pytest.raises(AttributeError):
        r.a = 2
    with pytest.raises(AttributeError):
        del r.b
    assert r != Rec(2, "x") and r != Ref(1, "x") and r != (1, "x", None, ())
    assert replace(r, c=5) == Rec(1, "x", 5) and r.c is None
    with pytest.raises(TypeError):
        replace(r, nope=1)
    assert Rec.__match_args__ == ("a", "b", "c", "d")


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError):

        @record
        class Bad:
            a: int = 0
            b: int
