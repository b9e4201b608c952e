// The headers that nearly every test source includes, precompiled once per build and reused by
// every test program (cmake/AgentkvModule.cmake, agentkv_test): GoogleTest and GoogleMock take
// about a second of each test source's compile under the sanitizers, the rest is the standard
// library the tests use most. Only third-party and standard headers belong here: a project
// header in it would make every test rebuild on each change to that header.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
