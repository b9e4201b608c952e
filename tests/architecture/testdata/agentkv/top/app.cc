// Allowed: kv. Not allowed: base (not a direct DEP), kv/internal (internal to kv).
#include "agentkv/base/status.h"
#include "agentkv/kv/cache.h"
#include "agentkv/kv/internal/arena.h"
