"""The stage clock: wall-clock intervals of named operations (a leaf: standard library only).

One `OpLog` times the loop's stages (``coach``, ``difficulty_filter``, ``player_update``, ...), and each policy keeps
one for its engine-side operations (`cpmobius.engine.timing` names them and turns them into step metrics). A method
or a stage takes its clock from here, not from the engine.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class OpLog:
    """Intervals ``(op, start, end)`` in `time.perf_counter` seconds, in the order they ended.

    Nested intervals are kept as they are (a ``wake`` contains the other policy's ``sleep`` only when
    that sleep was not timed on its own: `Policy.activate` puts the other engine to sleep untimed).
    """

    intervals: list[tuple[str, float, float]] = field(default_factory=list)

    @contextmanager
    def timed(self, op: str) -> Iterator[None]:
        """Record the wall-clock interval of the ``with`` body as ``op``, also when it raises."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.intervals.append((op, start, time.perf_counter()))

    def add(self, op: str, start: float) -> None:
        """Record ``op`` as the interval from ``start`` (a `time.perf_counter` reading) to now."""
        self.intervals.append((op, start, time.perf_counter()))

    def mark(self) -> int:
        """A position to pass to `seconds_since` (the number of intervals so far)."""
        return len(self.intervals)

    def seconds_since(self, mark: int = 0) -> dict[str, float]:
        """Seconds per operation over the intervals recorded after ``mark``; ``{op: seconds}``."""
        totals: dict[str, float] = defaultdict(float)
        for op, start, end in self.intervals[mark:]:
            totals[op] += end - start
        return dict(totals)
