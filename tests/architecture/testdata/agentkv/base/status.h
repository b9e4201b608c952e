// Points up: base may use nothing.
#include "agentkv/kv/cache.h"
