"""``frozen_record`` and ``mutable_record``: what ``@dataclass(frozen=True)`` and ``@dataclass`` give
a value class, without generating code.

``dataclasses`` writes each method as source text and ``exec``s it (six per frozen class, three
per mutable one: ~0.4 ms per class on the CI machine); with ~110 dataclasses on ``groupd serve``'s
import path that was ~55 ms of a ~200 ms start (issue 26, start-up). Here the class writes its own
``__init__`` (compiled once into the ``.pyc`` and as fast as the generated one: ``object.__setattr__``
per field when frozen, ``self.field = field`` otherwise, ``DEFAULT_FACTORY`` where the field has a
default factory), and equality, hashing, ``repr`` and immutability are closures over the field
names. The class is still a dataclass: ``fields``, ``replace``, ``asdict``, ``is_dataclass`` and
``__match_args__`` work as before, and ``__dataclass_params__`` says what the decorator did. The
``__init__`` is checked against the declared fields and defaults when the class is made. Lowest
floor, so that every layer can use it; it knows nothing of what the classes mean.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T", bound=type)
Getter = Callable[[Any], tuple[Any, ...]]


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


# The default of a field with a default_factory in a hand-written __init__ (as in the generated
# one): ``self.users = {} if users is DEFAULT_FACTORY else users``.
DEFAULT_FACTORY: Any = _Factory()


def frozen_record(cls: T) -> T:
    """Turn ``cls`` (annotated fields and a hand-written ``__init__`` that sets each of them with
    ``object.__setattr__``) into the equivalent of ``@dataclass(frozen=True)``: the same ``__eq__``
    (same class, then the tuple of fields), ``__hash__`` (of that tuple), ``__repr__``
    (``Name(field=value, ...)``) and ``FrozenInstanceError`` on assignment or deletion."""
    if "__init__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: frozen_record needs a hand-written __init__")
    if cls.__doc__ is None:
        cls.__doc__ = _doc(cls)
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    names, values, hashed, shown, shown_values = _views(cls)
    fieldset = frozenset(names)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(shown, shown_values(self), strict=True))
        return f"{self.__class__.__qualname__}({inner})"

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fieldset:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fieldset:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    _install(cls, (__eq__, __hash__, __repr__, __setattr__, __delattr__))
    # what @dataclass(frozen=True) records (a dataclass subclassing this one must be frozen too)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = params.frozen = True
    return cls


def mutable_record(cls: T) -> T:
    """``@dataclass``'s (not frozen) behaviour for a class that writes its own ``__init__``
    (``self.field = field`` each): ``__eq__`` (same class, then the tuple of fields), ``__hash__``
    None as a mutable dataclass has, ``__repr__``. Still a dataclass (``fields``, ``replace``...)."""
    if "__init__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: mutable_record needs a hand-written __init__")
    if cls.__doc__ is None:
        cls.__doc__ = _doc(cls)
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    _names, values, _hashed, shown, shown_values = _views(cls)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(shown, shown_values(self), strict=True))
        return f"{self.__class__.__qualname__}({inner})"

    _install(cls, (__eq__, __repr__))
    if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        cls.__hash__ = None  # type: ignore[assignment]  # what @dataclass(eq=True) does to a mutable class
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = True
    return cls


def _views(cls: type) -> tuple[tuple[str, ...], Getter, Getter, tuple[str, ...], Getter]:
    """The field names (checked against ``__init__``), and getters of the tuples ``__eq__``,
    ``__hash__`` and ``__repr__`` use: as in ``dataclasses``, a field with ``compare=False`` takes no
    part in equality nor (unless ``hash=True``) in the hash, one with ``repr=False`` is not shown."""
    fs = dataclasses.fields(cls)
    names = tuple(f.name for f in fs)
    _check_init(cls, names)
    compared = _values(tuple(f.name for f in fs if f.compare))
    hashed = _values(tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fs if f.repr)
    return names, compared, hashed, shown, _values(shown)


def _values(names: tuple[str, ...]) -> Getter:
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])

        def values(obj: Any) -> tuple[Any, ...]:
            return (one(obj),)

        return values
    return attrgetter(*names)  # type: ignore[return-value]


def _install(cls: type, fns: tuple[Callable[..., Any], ...]) -> None:
    """Set each method unless the class body defines it (as ``dataclasses`` does)."""
    for fn in fns:
        if fn.__name__ in cls.__dict__ and fn.__name__ not in ("__setattr__", "__delattr__"):
            continue
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
        setattr(cls, fn.__name__, fn)


def _doc(cls: type) -> str:
    """The docstring ``dataclasses`` gives a class without one, ``Name(field: 'type' = default, ...)``,
    written from the annotations rather than through ``inspect.signature`` (~70 us a class)."""
    parts = []
    for name, ann in inspect.get_annotations(cls).items():
        if isinstance(ann, str) and ann.startswith(("ClassVar", "typing.ClassVar")):
            continue
        part = f"{name}: {inspect.formatannotation(ann)}"
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            default = default.default if default.default is not dataclasses.MISSING else DEFAULT_FACTORY
        if default is not dataclasses.MISSING:
            part += f" = {default!r}"
        parts.append(part)
    return f"{cls.__name__}({', '.join(parts)})"


def _check_init(cls: type, names: tuple[str, ...]) -> None:
    """The hand-written ``__init__`` takes the fields in order with the declared defaults (a few
    microseconds per class: the two lists cannot drift apart silently)."""
    init = cls.__dict__["__init__"]
    code = init.__code__
    params = code.co_varnames[1 : code.co_argcount]
    declared: list[tuple[bool, Any]] = []  # (from a default_factory, the default or the factory)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            declared.append((False, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            declared.append((True, f.default_factory))
    given = init.__defaults__ or ()
    same = len(declared) == len(given) and all(
        (g is DEFAULT_FACTORY or (d is tuple and g == ())) if factory else g is d or g == d
        for (factory, d), g in zip(declared, given, strict=True)
    )
    if params != names or not same:
        raise TypeError(f"{cls.__qualname__}.__init__ must take the fields {names} with their defaults")
