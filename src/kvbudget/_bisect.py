"""One search both the textbook plan and the engine-generic inverse questions use."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable


def largest(ok: Callable[[int], bool], hi: int) -> int:
    """The largest x in [1, hi] with ok(x), for ok true up to some point and false after it; 0 when
    none (not even ok(1))."""
    if hi < 1:
        return 0
    if ok(hi):
        return hi
    if not ok(1):
        return 0
    lo = 1
    while hi - lo > 1:  # ok(lo) and not ok(hi)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
