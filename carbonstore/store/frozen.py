"""``Frozen``: the base of small immutable value objects on hot import paths.

It gives what ``@dataclass(frozen=True, slots=True)`` gives - equality and hash by class and
fields, a ``Name(field=value)`` repr, FrozenInstanceError on assignment, pickling and
copying from the fields - without the code generation ``dataclasses`` runs per class at
import (about 0.5 ms a class; a command that plans a scan created some forty). A subclass
lists its fields in ``__match_args__`` (so ``match`` works as on a dataclass), declares them
in ``__slots__`` and sets them in ``__init__`` with ``object.__setattr__``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any, ClassVar

__all__ = ["Frozen"]


class Frozen:
    """An immutable value: equal to another of its class with equal fields."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined, no-any-return]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), self._values()
