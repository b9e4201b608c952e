"""agentkv for Python: the engine-side KV cache of agentkv's C++ core.

``agentkv.KvCache`` is the same ``KvCacheManager`` the ``agentkv`` command line, the simulator
and the engine emulator run (docs/PYTHON.md, docs/KV_CACHE.md); ``BlockKeyHasher`` computes
the block keys it is addressed by. Failed calls raise ``agentkv.Error`` subclasses, one per
status code of the core. ``AdmissionClient`` and ``AsyncAdmissionClient`` talk to an
``agentkv coordinator`` (agentkv.admission). ``replay`` runs the simulator's replay of
``agentkv replay`` and returns its JSON report (agentkv.sim). ``agentkv.sglang`` (imported on
its own, not by this package) is an SGLang prefix cache over ``KvCache``.
"""

from ._agentkv import (
    AlreadyExistsError,
    BlockKeyHasher,
    CommittedRetentionHandle,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    KvCache,
    KvCacheOptions,
    KvCacheStats,
    KvEvent,
    NotFoundError,
    PrefixMatch,
    ResourceExhaustedError,
    RetentionConfig,
    TierGauges,
    TokenRangeRetention,
    UnavailableError,
    __version__,
)
from . import admission
from .admission import *  # noqa: F401,F403 (the names are admission.__all__)
from . import sim
from .sim import replay

__all__ = [
    "AlreadyExistsError",
    "BlockKeyHasher",
    "CommittedRetentionHandle",
    "DeadlineExceededError",
    "Error",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "KvCache",
    "KvCacheOptions",
    "KvCacheStats",
    "KvEvent",
    "NotFoundError",
    "PrefixMatch",
    "ResourceExhaustedError",
    "RetentionConfig",
    "TierGauges",
    "TokenRangeRetention",
    "UnavailableError",
    "__version__",
    "replay",
    *admission.__all__,
]
