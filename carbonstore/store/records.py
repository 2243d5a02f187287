"""Records: small value classes without the ``dataclasses`` module's cost at import.

A record class lists its fields as annotations with optional defaults, as a dataclass does::

    class TableName(Frozen):
        database: str
        table: str

    class LoadEntry(Frozen, kw_only=True):
        load_name: str
        extra: dict[str, Any] = field(default_factory=dict)

``Frozen`` records are immutable (assignment raises :class:`FrozenInstanceError`) and
hashable; ``Record`` ones are mutable and unhashable. Both get what the classes of this
project used of ``@dataclass(slots=True)``: ``__slots__`` (``slots=False`` keeps a
``__dict__``, e.g. for ``functools.cached_property``), an ``__init__`` taking the fields in
order (keyword-only with ``kw_only=True``) that fills defaults and default factories and
then calls ``__post_init__`` if the class has one, equality by class and compared fields,
hash by those fields (frozen only), a ``Name(field=value, ...)`` repr, ``__match_args__``
(every init field), pickling and copying (through ``__init__``, so a pickled record is
checked again where it is loaded, e.g. on a Spark executor), and :func:`replace`.
``field(init=False)`` is a field set by its default factory only, ``compare=False`` /
``repr=False`` leave it out of equality and hash / the repr.

Why not dataclasses: ``@dataclass`` compiles five or six methods per class with ``exec``
and computes an ``inspect.signature`` for the docstring - about a millisecond a class; a
fresh ``prune`` created some 35 of them (a tenth of its run). (The module itself stays
loaded: orjson imports it.) Here a class costs one small ``exec`` of its ``__init__`` (the same code a
dataclass's is, so construction is as fast), run when its first record is made (about
0.1 ms; a command makes records of half the classes it imports), and its ``__eq__`` and
``__hash__`` on their first calls; repr and pickling are shared methods.

A class that declares its own ``__slots__`` is written by hand (its own ``__init__``, with
``object.__setattr__`` when frozen; its fields are its ``__match_args__``) and only inherits
the behaviour: for the hottest values, e.g. expression nodes.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, ClassVar, TypeVar, dataclass_transform

__all__ = ["Frozen", "FrozenInstanceError", "Record", "field", "replace"]

R = TypeVar("R", bound="_Base")


class FrozenInstanceError(AttributeError):
    """Assignment to (or deletion of) a field of a :class:`Frozen` record."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """A field's options, as ``field(...)`` gives them (a class attribute until the class is built)."""

    __slots__ = ("default", "default_factory", "init", "compare", "repr")

    def __init__(self, default: Any, default_factory: Any, init: bool, compare: bool, repr: bool) -> None:
        self.default, self.default_factory = default, default_factory
        self.init, self.compare, self.repr = init, compare, repr


def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
          compare: bool = True, repr: bool = True) -> Any:  # noqa: A002 - dataclasses' name
    """A field with options (as ``dataclasses.field``): a default or a factory called for each
    new record, ``init=False`` (set by the factory only), ``compare`` and ``repr``."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field cannot have both a default and a default_factory")
    return Field(default, default_factory, init, compare, repr)


def _tuple_getter(names: tuple[str, ...]) -> Any:
    """A callable giving ``(getattr(o, n) for n in names)`` as a tuple."""
    if len(names) > 1:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda o: (one(o),)
    return lambda o: ()


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__qualname__", "")
    return text.startswith(("ClassVar", "typing.ClassVar")) or annotation is ClassVar


def _make_init(cls: type, fields: list[tuple[str, Field]], frozen: bool, kw_only: bool) -> None:
    """Give ``cls`` an ``__init__`` from the fields: its source now (a field order that
    cannot be a signature fails the class), compiled when the first record is made."""
    env: dict[str, Any] = {"MISSING": MISSING, "_set": object.__setattr__}
    params: list[str] = []
    body: list[str] = []
    for name, f in fields:
        if f.default_factory is not MISSING:
            env[f"_f_{name}"] = f.default_factory
            value = f"_f_{name}()" if not f.init else f"_f_{name}() if {name} is MISSING else {name}"
            default = "=MISSING"
        elif f.default is not MISSING:
            env[f"_d_{name}"] = f.default
            value, default = name, f"=_d_{name}"
        else:
            value, default = name, ""
        if f.init:
            if not default and not kw_only and any("=" in p for p in params):
                raise TypeError(f"{cls.__qualname__}: field {name} without a default follows one with a default")
            params.append(name + default)
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    star = ["*"] if kw_only and params else []
    src = f"def __init__(self, {', '.join([*star, *params])}) -> None:\n    " + "\n    ".join(body or ["pass"])
    _compile_on_first_call(cls, "__init__", src, env)


def _make_eq_hash(cls: type, compare: tuple[str, ...], frozen: bool) -> None:
    """Give ``cls`` an ``__eq__`` comparing the fields' tuples (and a frozen one a ``__hash__``
    of that tuple), as a dataclass's do - faster than the shared ones over a key getter -
    each compiled on its first call."""
    mine, theirs = (", ".join(f"{who}.{n}" for n in compare) + ("," if compare else "")
                    for who in ("self", "other"))
    src = ("def __eq__(self, other):\n    if other.__class__ is not self.__class__:\n"
           f"        return NotImplemented\n    return ({mine}) == ({theirs})")
    _compile_on_first_call(cls, "__eq__", src, {})
    if frozen:
        _compile_on_first_call(cls, "__hash__", f"def __hash__(self):\n    return hash(({mine}))", {})


def _compile_on_first_call(cls: type, name: str, src: str, env: dict[str, Any]) -> None:
    """Set ``cls.<name>`` to a stub that compiles ``src`` (the method's definition) on its
    first call, installs the result in its place and runs it: a command uses the methods of
    few of the record classes it imports (about 0.1 ms a compile)."""

    def first_call(*args: Any, **kwargs: Any) -> Any:
        exec(src, env)  # noqa: S102 - the source is built from the class's field names only
        method = env[name]
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        method.__module__ = cls.__module__
        setattr(cls, name, method)
        return method(*args, **kwargs)

    first_call.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, first_call)


class RecordType(type):
    """The metaclass of records: turns the annotated fields into slots and an ``__init__``."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], *,
                kw_only: bool = False, slots: bool = True) -> RecordType:
        if "__slots__" in ns or not ns.get("__annotations__"):  # written by hand (or a base)
            cls = super().__new__(mcls, name, bases, ns)
            if "__match_args__" not in ns and hasattr(cls, "_record_key"):
                return cls  # no fields of its own: its base's fields, compared and shown alike
            every = compare = shown = tuple(cls.__match_args__)  # type: ignore[attr-defined]
        else:
            fields = []
            for fname, annotation in ns["__annotations__"].items():
                if _is_classvar(annotation):
                    continue
                got = ns.pop(fname, MISSING)
                fields.append((fname, got if isinstance(got, Field) else Field(got, MISSING, True, True, True)))
            if slots:
                ns["__slots__"] = tuple(n for n, _ in fields)
            ns["__match_args__"] = tuple(n for n, f in fields if f.init)
            cls = super().__new__(mcls, name, bases, ns)
            _make_init(cls, fields, issubclass(cls, Frozen), kw_only)
            every = tuple(n for n, _ in fields)
            compare = tuple(n for n, f in fields if f.compare)
            if "__eq__" not in ns and "__hash__" not in ns:
                _make_eq_hash(cls, compare, issubclass(cls, Frozen))
            shown = tuple(n for n, f in fields if f.repr)
        cls.__record_fields__ = every  # type: ignore[attr-defined]
        cls._record_key = staticmethod(_tuple_getter(compare))  # type: ignore[attr-defined]
        cls._record_shown = shown  # type: ignore[attr-defined]
        return cls


def _rebuild(cls: type[R], values: tuple[Any, ...]) -> R:
    return cls(**dict(zip(cls.__match_args__, values, strict=True)))


class _Base(metaclass=RecordType):
    """What both kinds of record share: equality, repr, pickling."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    __record_fields__: ClassVar[tuple[str, ...]] = ()
    _record_key: ClassVar[Any]
    _record_shown: ClassVar[tuple[str, ...]]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = self._record_key
        return key(self) == key(other)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._record_shown)
        return f"{type(self).__qualname__}({shown})"

    def _values(self) -> tuple[Any, ...]:
        """The init fields' values, in ``__match_args__`` order."""
        return tuple(getattr(self, f) for f in self.__match_args__)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _rebuild, (type(self), self._values())


@dataclass_transform(field_specifiers=(field,))
class Record(_Base):
    """A mutable record (see the module docstring): equal by class and fields, unhashable."""

    __slots__ = ()
    __hash__: ClassVar[None] = None  # type: ignore[assignment]


@dataclass_transform(field_specifiers=(field,), frozen_default=True)
class Frozen(_Base):
    """An immutable record: hashable by its compared fields; assignment raises."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._record_key(self))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def replace(obj: R, /, **changes: Any) -> R:
    """A copy of record ``obj`` with ``changes`` (as ``dataclasses.replace``: built by the
    class's ``__init__``, so its checks run; fields with ``init=False`` are made afresh)."""
    cls = type(obj)
    for name in cls.__match_args__:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return cls(**changes)
