"""A dict of decoded sections and arrays that keeps the bytes its values hold.

An index snapshot counts what it holds in the driver cache's budget every time a plan reads
a section or decodes an array (cache.py). Summing every held value again each time was
quadratic in what a plan reads (2,000 chunk arrays of a 100,000-segment scan: 4 million
sizes); this dict adds and subtracts each value's size once, as it comes and goes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["HeldBytes", "held_bytes"]


def held_bytes(value: Any) -> int:
    """Bytes a section (a table) or a decoded array holds (object arrays of big integers
    counted at 32 bytes a value)."""
    if isinstance(value, pa.Table):
        return int(value.get_total_buffer_size())
    if isinstance(value, np.ndarray):
        return int(value.nbytes) if value.dtype != object else 32 * len(value)
    raise TypeError(f"cannot size a {type(value).__name__}")


class HeldBytes(dict):  # type: ignore[type-arg]
    """A dict whose ``held`` is the sum of ``held_bytes`` of its values, kept as they are
    set, deleted or popped (the only changes a snapshot makes)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        if key in self:
            self.held -= held_bytes(dict.__getitem__(self, key))
        dict.__setitem__(self, key, value)
        self.held += held_bytes(value)

    def __delitem__(self, key: Any) -> None:
        self.held -= held_bytes(dict.__getitem__(self, key))
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            value = dict.pop(self, key)
            self.held -= held_bytes(value)
            return value
        return dict.pop(self, key, *default)

    def clear(self) -> None:
        dict.clear(self)
        self.held = 0

    def setdefault(self, *args: Any) -> Any:
        raise NotImplementedError("HeldBytes counts values set with []")

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("HeldBytes counts values set with []")

    def popitem(self) -> Any:
        raise NotImplementedError("HeldBytes counts values removed with pop or del")
