"""agentkv.sim: the simulator's replay (``agentkv replay``) from Python.

``agentkv.replay`` is ``agentkv.sim.replay``; ``replay_args`` shows the flags it runs with.

``replay(**options)`` runs the same replay as the command line with the same flags, written as
keyword arguments (``--max-total-tokens 65536`` is ``max_total_tokens=65536``), and returns
the JSON report the command line writes (``agentkv-replay.json``) as Python objects. The flags
are parsed and checked by the command line's own code, so defaults and error messages are the
same. See docs/PYTHON.md (Replay) and docs/REPLAY.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

from . import _agentkv

__all__ = ["replay", "replay_args"]

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[str, float], object]


def _flag_value(value: Any) -> str:
    """A keyword argument's value as the command line writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Iterable):
        return ",".join(_flag_value(item) for item in value)
    return str(value)


def _flag(name: str, value: str) -> list[str]:
    """``--name=value``, or ``--name ""`` for an empty value (CLI11 reads ``--name=`` as none)."""
    flag = f"--{name.replace('_', '-')}"
    return [f"{flag}={value}"] if value else [flag, ""]


def _paths(trace: Union[None, PathLike, Iterable[PathLike]]) -> list[str]:
    if trace is None:
        return []
    if isinstance(trace, (str, os.PathLike)):
        return [os.fspath(trace)]
    return [os.fspath(path) for path in trace]


def replay_args(workload: str = "synthetic",
                trace: Union[None, PathLike, Iterable[PathLike]] = None,
                arms: Union[None, str, Iterable[str]] = None,
                seed: int = 1,
                html: Optional[PathLike] = None,
                **options: Any) -> list[str]:
    """The ``agentkv replay`` flags that ``replay`` with these arguments runs with.

    Each value is given as ``--flag=value``, so that a negative number is read as a value
    (an empty one as ``--flag ""``); ``None`` leaves a flag at its default. The JSON report is not written unless
    ``json=PATH`` asks for it (``replay`` returns it).
    """
    args = [f"--workload={workload}", f"--seed={_flag_value(seed)}"]
    args += [f"--trace={path}" for path in _paths(trace)]
    if arms is not None:
        args.append(f"--arms={arms if isinstance(arms, str) else _flag_value(list(arms))}")
    args += _flag("html", "" if html is None else os.fspath(html))
    if "json" not in options:
        args += _flag("json", "")
    for name, value in options.items():
        if value is not None:
            args += _flag(name, _flag_value(value))
    return args


def replay(workload: str = "synthetic",
           trace: Union[None, PathLike, Iterable[PathLike]] = None,
           arms: Union[None, str, Iterable[str]] = None,
           seed: int = 1,
           progress: Optional[Progress] = None,
           html: Optional[PathLike] = None,
           **options: Any) -> dict[str, Any]:
    """Replays a workload through the simulated fleet under each arm; returns the report.

    Runs what ``agentkv replay`` runs for the same flags and returns its JSON report
    (what ``--json`` writes, ``agentkv-replay.json``) parsed into dicts and lists: equal to
    ``json.load`` of the file the command line writes for the same arguments.

    Args:
        workload: ``synthetic`` (the default, generated from ``seed``), ``weka``,
            ``mooncake``, ``bailian`` or ``rollout`` (``--workload``).
        trace: a trace file or directory, or several (``--trace``; not for ``synthetic``
            and ``rollout``).
        arms: arm names in the grammar of ``--arms``: a list (``["baseline", "all"]``) or
            one comma-separated string; ``None`` runs the default arms.
        seed: the seed of the generators and of WEKA start times (``--seed``).
        progress: called as ``progress(arm, fraction)`` from the thread running the arm, with
            the GIL held: 0 when the arm starts, non-decreasing, 1 when it ends. An exception
            it raises stops the replay and propagates.
        html: also write the self-contained HTML report there (``--html``).
        **options: any other flag of ``agentkv replay`` with ``-`` written ``_``:
            ``num_engines=2``, ``sessions=6``,
            ``max_total_tokens=65536``, ``router="cache_aware"``, ``jobs=1`` (arms run at once,
            each on its own thread as on the command line; default one per hardware thread),
            ``json="out.json"`` to write the JSON file too, and so on. Booleans become
            ``true``/``false``, lists comma-separated; ``None`` keeps the default.

    Raises:
        InvalidArgumentError: a bad flag, value or combination, with the command line's
            message (e.g. ``--num-engines must be in [1, 1024], got 0``), or an unknown arm.
        Error: another failure of the replay (an unreadable trace, an unwritable report).

    The GIL is released while the replay runs, so other Python threads run meanwhile.
    """
    args = replay_args(workload, trace, arms, seed, html, **options)
    return json.loads(_agentkv._replay(args, progress))
