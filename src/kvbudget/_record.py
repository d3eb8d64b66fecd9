"""Frozen records: the part of ``dataclasses.dataclass(frozen=True)`` that kvbudget uses.

Why not the standard library? Importing ``dataclasses`` (it pulls in ``inspect``, ``ast``,
``dis`` ...) and building each class with ``exec`` costs about 17 ms per process on the
reference machine, twice the time of ``python -c pass``: alone it breaks the start-up target
of issue #2 (``kvbudget fit ... --json`` within 5x of an empty Python start). These records keep
the same semantics for what we use — keyword/positional construction with defaults,
immutability, value equality and hashing, a readable repr, ``replace`` and ``asdict`` — and the
type checker sees them as frozen dataclasses (``dataclass_transform``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T")

_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """Raised on any attempt to change a record."""


class _Field:
    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.default_factory = default_factory


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field with a default value or a factory, as ``dataclasses.field``."""
    return _Field(default, default_factory)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")


def _make(cls: type) -> type:
    names: list[str] = []
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name in klass.__dict__.get("__annotations__", {}):  # noqa: RUF063 - inspect is what we avoid
            if name.startswith("__") or (name in names and name not in klass.__dict__):
                continue
            if name not in names:
                names.append(name)
            if name in klass.__dict__:
                value = klass.__dict__[name]
                if isinstance(value, _Field):
                    if value.default_factory is not None:
                        factories[name] = value.default_factory
                    else:
                        defaults[name] = value.default
                else:
                    defaults[name] = value
    for name in names:
        if name in cls.__dict__ and isinstance(cls.__dict__[name], _Field):
            if name in defaults:
                setattr(cls, name, defaults[name])
            else:
                delattr(cls, name)
    required = [n for n in names if n not in defaults and n not in factories]
    seen_default = False
    for name in names:
        if name in defaults or name in factories:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows a field with one")
    fields = tuple(names)
    known = frozenset(names)
    # the field values as a tuple, gathered in C (itemgetter of two or more names returns a tuple)
    gather: Callable[[dict[str, Any]], tuple[Any, ...]] = (
        operator.itemgetter(*fields) if len(fields) > 1 else lambda d: tuple(d[n] for n in fields))

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # dict merges in C rather than a loop over the fields: records are built by the ten thousand in a plan search
        if args:
            if len(args) > len(fields):
                raise TypeError(f"{cls.__name__}() takes {len(fields)} positional arguments but {len(args)} were given")
            values = dict(zip(fields, args))  # noqa: B905 - no more args than fields (above); strict= costs 2x
            if kwargs:
                _check_names(kwargs, values)
                values.update(kwargs)
        else:
            if not known.issuperset(kwargs):
                _check_names(kwargs, {})
            values = kwargs  # a fresh dict per call
        if len(values) < len(fields):
            values = {**defaults, **values}
            for name, factory in factories.items():
                if name not in values:
                    values[name] = factory()
            if len(values) < len(fields):
                missing = [n for n in required if n not in values]
                raise TypeError(f"{cls.__name__}() missing required arguments: {', '.join(missing)}")
        object.__setattr__(self, "__dict__", values)

    def _check_names(kwargs: dict[str, Any], positional: dict[str, Any]) -> None:
        for key in kwargs:
            if key not in known:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {key!r}")
            if key in positional:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {key!r}")

    def __eq__(self: Any, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(__hash__(self) == __hash__(other) and _cached(self) == _cached(other))

    def _cached(self: Any) -> tuple[Any, ...]:
        # frozen: the field values (and their hash, below) are gathered once and kept beside the fields
        d = self.__dict__
        v = d.get(" values")
        if v is None:
            v = d[" values"] = gather(d)
        return v  # type: ignore[no-any-return]

    def __hash__(self: Any) -> int:
        # a memoized function's key hashes its records on every call: the kept hash is read without a method call
        try:
            return self.__dict__[" hash"]  # type: ignore[no-any-return]
        except KeyError:
            h: int = hash(_cached(self))
            self.__dict__[" hash"] = h
            return h

    def _replace(self: Any, changes: dict[str, Any]) -> Any:
        # every field is set already: copy them and apply the changes, without __init__'s defaults and checks
        if not known.issuperset(changes):
            _check_names(changes, {})
        values = self.__dict__.copy()  # the fields, and the values and hash gathered once (_cached), not kept
        values.pop(" values", None)
        values.pop(" hash", None)
        values.update(changes)
        out = object.__new__(self.__class__)
        object.__setattr__(out, "__dict__", values)
        return out

    def __repr__(self: Any) -> str:
        d = self.__dict__
        return f"{cls.__qualname__}({', '.join(f'{n}={d[n]!r}' for n in fields)})"

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__eq__ = __eq__  # type: ignore[method-assign,assignment]
    cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    cls.__repr__ = __repr__  # type: ignore[method-assign,assignment]
    cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign,assignment]
    cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign,assignment]
    cls.__match_args__ = fields  # type: ignore[attr-defined,misc]
    cls.__record_fields__ = fields  # type: ignore[attr-defined]
    cls.__record_replace__ = _replace  # type: ignore[attr-defined]
    return cls


if TYPE_CHECKING:

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def record(cls: type[_T]) -> type[_T]: ...

else:
    record = _make


def fields(obj: object) -> tuple[str, ...]:
    """The field names of a record (or record class), in order."""
    names: tuple[str, ...] = getattr(obj, "__record_fields__")  # noqa: B009 - a dynamic attribute
    return names


def replace(obj: _T, **changes: Any) -> _T:
    """A copy of ``obj`` with some fields changed, as ``dataclasses.replace``."""
    new: _T = getattr(obj, "__record_replace__")(changes)  # noqa: B009 - a dynamic attribute
    return new


def asdict(obj: Any) -> Any:
    """Records, tuples and lists turned into plain dicts and lists, recursively."""
    if hasattr(obj, "__record_fields__") and not isinstance(obj, type):
        return {n: asdict(obj.__dict__[n]) for n in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [asdict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: asdict(v) for k, v in obj.items()}
    if isinstance(obj, frozenset):
        return sorted(obj)
    return obj
