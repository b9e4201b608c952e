// Tests of the open-loop trace shape: a Mooncake trace becomes open-loop requests field by
// field, in file order.
#include "agentkv/sim/workload/open_loop_trace.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentkv::sim {
namespace {

TEST(OpenLoopTraceTest, MooncakeLinesBecomeRequestsInFileOrder) {
  std::vector<MooncakeRequest> trace(2);
  trace[0].timestamp = TimeNs::Millis(7);
  trace[0].input_length = 1000;
  trace[0].output_length = 20;
  trace[0].hash_ids = {4, 5};
  trace[1].timestamp = TimeNs::Millis(3);
  trace[1].input_length = 0;
  trace[1].output_length = 0;
  const std::vector<OpenLoopRequest> requests = OpenLoopFromMooncake(trace);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0], (OpenLoopRequest{TimeNs::Millis(7), {4, 5}, 1000, 20}));
  // Not sorted by time, and zero lengths are kept as read (the fleet's drivers raise them).
  EXPECT_EQ(requests[1], (OpenLoopRequest{TimeNs::Millis(3), {}, 0, 0}));
  EXPECT_TRUE(OpenLoopFromMooncake({}).empty());
}

}  // namespace
}  // namespace agentkv::sim
