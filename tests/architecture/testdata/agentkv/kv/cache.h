// Allowed: its own internals and its DEPS.
#include "agentkv/base/status.h"
#include "agentkv/kv/internal/arena.h"
