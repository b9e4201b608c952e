# A three-module tree for include_rules' own tests: top may use kv, kv may use base.
set(AGENTKV_MODULES "base;kv;top")
set(AGENTKV_MODULE_DIR_base "base")
set(AGENTKV_MODULE_DEPS_base "")
set(AGENTKV_MODULE_DIR_kv "kv")
set(AGENTKV_MODULE_DEPS_kv "base")
set(AGENTKV_MODULE_DIR_top "top")
set(AGENTKV_MODULE_DEPS_top "kv")
