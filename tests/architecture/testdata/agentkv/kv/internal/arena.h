// Allowed: its own module.
#include "agentkv/kv/cache.h"
