"""Argument checks shared by the public entry points, run before any work.

Each raises a ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, outside its
range) whose message names the argument, the value and what to pass instead. Booleans are
not integers and integers are not floats where a count or a seed is meant (``seed=1.5`` would
otherwise become seed 1 under another cache key).
"""

from __future__ import annotations

import difflib
import errno
import math
import os
import stat
from collections.abc import Iterable
from numbers import Integral, Real
from pathlib import Path
from typing import Any


def integer(value: Any, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int: a Python or NumPy integer (not a bool, not a float) in
    ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    _within(value, name, low, high)
    return value


def number(value: Any, name: str, low: float | None = None, high: float | None = None, *,
           open_low: bool = False, open_high: bool = False) -> float:
    """``value`` as a finite float (an int or float, not a bool) in the interval between
    ``low`` and ``high`` (closed unless ``open_low`` / ``open_high``)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if (low is not None and (value < low or (open_low and value == low))) or (
            high is not None and (value > high or (open_high and value == high))):
        left = "(" if open_low else "["
        right = ")" if open_high else "]"
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ValueError(f"{name} must lie in {span}, got {value}")
    return value


def boolean(value: Any, name: str) -> bool:
    """``value`` if it is True or False (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def did_you_mean(value: Any, options: Iterable[Any]) -> str:
    """``" (did you mean 'x'?)"``, with the option closest to ``value`` in spelling, or
    ``""`` where none is close: the hint every error about an unknown name carries."""
    close = difflib.get_close_matches(str(value), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def choice(value: Any, name: str, options: Iterable[str]) -> str:
    """``value`` if it is one of ``options``; else an error suggesting the closest one."""
    options = list(options)
    if value in options:
        return value
    raise ValueError(f"unknown {name} {value!r}{did_you_mean(value, options)}; valid: "
                     f"{', '.join(map(str, options))}")


def _within(value: int, name: str, low: int | None, high: int | None) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            raise ValueError(f"{name} must be at least {low}, got {value}")
        if low is None:
            raise ValueError(f"{name} must be at most {high}, got {value}")
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value}")


def existing_file(path: Any, what: str, fix: str) -> Path:
    """``path`` as a Path if it names a regular file (or a link to one); else an error that
    says what is there instead and ``fix``: a folder, a named pipe, a device or a socket (not
    something to read whole), a link that loops or points nowhere, or nothing."""
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OSError(f"{what} {path} is a symbolic link that loops back on itself; "
                          f"{fix}") from error
        if path.is_symlink():
            raise FileNotFoundError(f"{what} {path} is a symbolic link to "
                                    f"{os.readlink(path)!r}, which does not exist; {fix}"
                                    ) from error
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileNotFoundError(f"{what} {path} does not exist; {fix}") from error
        raise OSError(f"{what} {path} cannot be read ({error.strerror}); {fix}") from error
    if stat.S_ISREG(mode):
        return path
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{what} {path} is a folder, not a file; {fix}")
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise ValueError(f"{what} {path} is {kind}, not a regular file; {fix}")
