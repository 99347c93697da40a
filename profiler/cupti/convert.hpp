// CUPTI activity records -> the interpretation layer's plain records (profiler/interpret/records.hpp).
// The only file that reads CUPTI record structs.
#pragma once
#include <cupti.h>

#include "profiler/interpret/records.hpp"

namespace dtsim::profiler::cupti {

/// The activity kinds convert_record understands (and the injection library enables).
enum class Converted { YES, UNSUPPORTED_KIND, UNTIMED };

/// Appends the interpretation-layer form of `record` to `out`. API-call names are resolved once per callback id
/// (cuptiGetCallbackName) into out.api_names. Strings are copied: CUPTI's own may not outlive the buffer.
/// UNTIMED: a GPU record CUPTI could not time (start = end = 0); it is dropped.
Converted convert_record(const CUpti_Activity& record, Profile& out);

}  // namespace dtsim::profiler::cupti
