#include "profiler/interpret/records.hpp"

#include <iterator>

namespace dtsim::profiler {

void Profile::append(Profile&& o) {
  auto move_all = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  move_all(devices, o.devices);
  move_all(kernels, o.kernels);
  move_all(memcpys, o.memcpys);
  move_all(memsets, o.memsets);
  move_all(api_calls, o.api_calls);
  move_all(markers, o.markers);
  move_all(memory, o.memory);
  move_all(names, o.names);
  move_all(external_correlations, o.external_correlations);
  api_names.merge(o.api_names);
  stats.records += o.stats.records;
  stats.unsupported_records += o.stats.unsupported_records;
  stats.records_without_timestamps += o.stats.records_without_timestamps;
  stats.buffers_requested += o.stats.buffers_requested;
  stats.buffers_completed += o.stats.buffers_completed;
  stats.buffer_bytes += o.stats.buffer_bytes;
  stats.dropped_records += o.stats.dropped_records;
  stats.conversion_ns += o.stats.conversion_ns;
}

bool Profile::empty() const {
  return devices.empty() && kernels.empty() && memcpys.empty() && memsets.empty() && api_calls.empty() &&
         markers.empty() && memory.empty() && names.empty() && external_correlations.empty();
}

}  // namespace dtsim::profiler
