"""Placeholder for agentkv.admission, the coordinator's admission clients.

The real module (clients of ``agentkv coordinator``) is developed separately and replaces this
file when both are merged; until then the names exist so that ``import agentkv`` works, and
using them raises NotImplementedError.
"""

__all__ = ["AdmissionClient", "AsyncAdmissionClient"]

_MESSAGE = "agentkv.admission is not part of this build yet"


class AdmissionClient:
    """Blocking client of the admission coordinator (not available in this build)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_MESSAGE)


class AsyncAdmissionClient:
    """asyncio client of the admission coordinator (not available in this build)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_MESSAGE)
