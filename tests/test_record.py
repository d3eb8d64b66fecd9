"""The frozen records of ``_record.py``: construction, equality and hashing, and ``replace``'s copy, which takes
the fields as they are (no ``__init__``) and must not carry the source's gathered values or hash."""

from __future__ import annotations

import pytest

from kvbudget._record import FrozenInstanceError, field, fields, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)


def test_positional_keyword_and_default_construction_agree() -> None:
    assert Point(1, 2) == Point(x=1, y=2) == Point(1, y=2)
    assert Point(1) == Point(1, 0, ())
    assert fields(Point) == ("x", "y", "tags")


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((1, 2, (), 4), {}, "takes 3 positional arguments but 4 were given"),
    ((1,), {"x": 2}, "multiple values for argument 'x'"),
    ((), {"x": 1, "z": 2}, "unexpected keyword argument 'z'"),
    ((), {"y": 1}, "missing required arguments: x"),
])
def test_construction_refuses_what_a_dataclass_refuses(args: tuple[int, ...], kwargs: dict[str, int],
                                                      message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_replace_changes_one_field_and_leaves_the_source() -> None:
    p = Point(1, 2, ("a",))
    hash(p)  # gathers p's values and hash beside its fields
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags) == (1, 5, ("a",))
    assert (p.x, p.y) == (1, 2)
    assert q == Point(1, 5, ("a",)) and hash(q) == hash(Point(1, 5, ("a",)))
    assert q != p and hash(q) != hash(p)
    assert repr(q) == "Point(x=1, y=5, tags=('a',))"


def test_replace_without_changes_is_an_equal_copy() -> None:
    p = Point(3)
    hash(p)
    q = replace(p)
    assert q == p and q is not p and hash(q) == hash(p)


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        replace(Point(1), z=2)


def test_a_replaced_record_is_frozen() -> None:
    q = replace(Point(1), y=2)
    with pytest.raises(FrozenInstanceError):
        q.x = 3  # type: ignore[misc]


@record
class One:
    n: int


@record
class Empty:
    pass


def test_records_of_one_field_and_of_none_compare_and_hash_by_value() -> None:
    assert One(1) == One(1) and hash(One(1)) == hash(One(1)) and One(1) != One(2)
    assert hash(One(1)) == hash((1,))  # a record hashes as the tuple of its values
    assert hash(Point(1, 2)) == hash((1, 2, ()))
    assert Empty() == Empty() and hash(Empty()) == hash(())
    assert len({One(1), One(1), One(2)}) == 2
