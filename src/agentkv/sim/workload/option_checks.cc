#include "agentkv/sim/workload/option_checks.h"

#include <cmath>
#include <sstream>

namespace agentkv::sim {

std::string OptionChecks::Num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status OptionChecks::OutOfRange(std::string_view field, std::string_view range,
                                const std::string& value) const {
  return InvalidArgumentError(std::string(options_name_) + "." + std::string(field) +
                              ": must be in " + std::string(range) + ", got " + value);
}

Status OptionChecks::Int(std::string_view field, int64_t v, int64_t lo, int64_t hi) const {
  if (v >= lo && v <= hi) return Status();
  return OutOfRange(field, "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                    std::to_string(v));
}

Status OptionChecks::Probability(std::string_view field, double v) const {
  if (v >= 0.0 && v <= 1.0) return Status();
  return OutOfRange(field, "[0, 1]", Num(v));
}

Status OptionChecks::Distribution(std::string_view field, const LogNormal& d) const {
  if (!(d.median > 0.0 && std::isfinite(d.median))) {
    return OutOfRange(std::string(field) + ".median", "(0, inf)", Num(d.median));
  }
  if (!(d.sigma >= 0.0 && d.sigma <= 10.0)) {
    return OutOfRange(std::string(field) + ".sigma", "[0, 10]", Num(d.sigma));
  }
  return Status();
}

}  // namespace agentkv::sim
