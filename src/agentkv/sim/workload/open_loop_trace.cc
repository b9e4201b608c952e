#include "agentkv/sim/workload/open_loop_trace.h"

#include <utility>

namespace agentkv::sim {

std::vector<OpenLoopRequest> OpenLoopFromMooncake(const std::vector<MooncakeRequest>& trace) {
  std::vector<OpenLoopRequest> requests;
  requests.reserve(trace.size());
  for (const MooncakeRequest& r : trace) {
    OpenLoopRequest request;
    request.arrival = r.timestamp;
    request.hash_ids = r.hash_ids;
    request.prompt_tokens = r.input_length;
    request.output_tokens = r.output_length;
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace agentkv::sim
