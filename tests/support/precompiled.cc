// The one source of agentkv_test_pch, the target that builds tests/support/precompiled.h's
// precompiled header for every test program to reuse.
