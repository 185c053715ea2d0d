"""record: a frozen dataclass's run-time behaviour, for classes that load with proctree.Popen.

dataclasses imports inspect (with ast, dis and tokenize) and compiles code
for every class it decorates: together about 5 ms, which a process's first
proctree.Popen must not pay. Type checkers are told that record makes
frozen dataclasses, so a record is
checked exactly as a frozen dataclass is (PEP 681's dataclass_transform); at run time this makes the same
__init__ (fields in order, class attributes as defaults), __repr__, __eq__,
__hash__ and frozen attributes, without compiling anything.

Only what the records here use: no field(), no default factories, no
__post_init__, no inheritance between records. (protocol.py keeps a record
class of its own: the build's generator loads that file alone, without the
package.)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object):  # type checkers only: at run time, the decorator itself
        return lambda fn: fn


_MISSING = object()


@dataclass_transform(frozen_default=True, eq_default=True)
def record(cls: type[T]) -> type[T]:
    """Give cls (annotated fields, defaults as class attributes) a frozen dataclass's methods."""
    fields = tuple(name for name in cls.__dict__.get("__annotations__", {}))
    defaults = {name: cls.__dict__[name] for name in fields if name in cls.__dict__}
    seen_default = False
    for name in fields:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default field {name!r} follows a default one in {cls.__qualname__}")
    qualname = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(fields):
            raise TypeError(
                f"{qualname}.__init__() takes {len(fields) + 1} positional arguments but {len(args) + 1} were given"
            )
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name not in fields:
                raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
            values[name] = value
        for name in fields:
            value = values.get(name, defaults.get(name, _MISSING))
            if value is _MISSING:
                raise TypeError(f"{qualname}.__init__() missing required argument: {name!r}")
            object.__setattr__(self, name, value)

    def _values(self: Any) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in fields)

    def __repr__(self: Any) -> str:
        return f"{qualname}({', '.join(f'{name}={getattr(self, name)!r}' for name in fields)})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)

    def __hash__(self: Any) -> int:
        return hash(_values(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {qualname}")

    def __delattr__(self: Any, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {qualname}")

    for method in (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__):
        method.__qualname__ = f"{qualname}.{method.__name__}"
        setattr(cls, method.__name__, method)
    setattr(cls, "__match_args__", fields)  # noqa: B010 - mypy takes the class for the dataclass it declares
    cls._record_fields = fields  # type: ignore[attr-defined]
    return cls


def replace(obj: T, **changes: Any) -> T:
    """dataclasses.replace, for a record."""
    fields = obj._record_fields  # type: ignore[attr-defined]
    unknown = set(changes) - set(fields)
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {sorted(unknown)[0]!r}")
    values = {name: getattr(obj, name) for name in fields}
    values.update(changes)
    return type(obj)(**values)
