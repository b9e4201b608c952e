"""agentkv's Python package.

``agentkv.admission`` is the client of the ``agentkv coordinator`` admission API
(docs/PYTHON.md, "Admission client"); its public names are re-exported here.
"""

from .admission import *  # noqa: F401,F403 (the names are admission.__all__)
from .admission import __all__ as _admission_all

__all__ = list(_admission_all)
