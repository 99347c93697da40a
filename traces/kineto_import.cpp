#include "traces/kineto_import.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "traces/archive.hpp"
#include "traces/error.hpp"

namespace dtsim {

// ---------------------------------------------------------------------------------------------------------------
// Small helpers (public in dtsim::kineto for tests)
// ---------------------------------------------------------------------------------------------------------------
namespace kineto {

std::optional<std::int64_t> us_text_to_ns(std::string_view t) {
  // value = m * 10^e (us), with at most 19 significant digits kept in m. Digits beyond those are only ever below
  // the unit that decides the rounding (see below), so the first of them is all we keep.
  constexpr int kMaxDigits = 19;
  std::size_t i = 0;
  const std::size_t n = t.size();
  bool negative = false;
  if (i < n && (t[i] == '-' || t[i] == '+')) negative = t[i++] == '-';
  std::uint64_t m = 0;
  int significant = 0;
  long long e = 0;
  int first_dropped = -1;
  bool any_digit = false;
  auto digit = [&](std::size_t k) { return k < n && t[k] >= '0' && t[k] <= '9'; };
  for (; digit(i); ++i) {
    any_digit = true;
    const int d = t[i] - '0';
    if (significant < kMaxDigits) {
      if (m != 0 || d != 0) {
        m = m * 10 + static_cast<std::uint64_t>(d);
        ++significant;
      }
    } else {
      ++e;  // an integer digit that does not fit: the kept digits move up one place
      if (first_dropped < 0) first_dropped = d;
    }
  }
  if (i < n && t[i] == '.') {
    ++i;
    for (; digit(i); ++i) {
      any_digit = true;
      const int d = t[i] - '0';
      if (significant < kMaxDigits) {
        if (m != 0 || d != 0) {
          m = m * 10 + static_cast<std::uint64_t>(d);
          ++significant;
        }
        --e;
      } else if (first_dropped < 0) {
        first_dropped = d;
      }
    }
  }
  if (!any_digit) return std::nullopt;
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (t[i] == '-' || t[i] == '+')) exp_negative = t[i++] == '-';
    if (!digit(i)) return std::nullopt;
    long long x = 0;
    for (; digit(i); ++i)
      if (x < 1000000) x = x * 10 + (t[i] - '0');
    e += exp_negative ? -x : x;
  }
  if (i != n) return std::nullopt;
  e += 3;  // microseconds -> nanoseconds
  std::uint64_t r = 0;
  if (m == 0 || e < -19) {
    r = 0;  // zero, or m < 10^19 <= half of 10^-e
  } else if (e >= 0) {
    r = m;
    for (long long k = 0; k < e; ++k) {
      if (r > std::numeric_limits<std::uint64_t>::max() / 10) return std::nullopt;
      r *= 10;
    }
    // Digits dropped beyond the 19 kept ones sit just below the nanosecond when e == 0 (for e > 0 the value
    // overflows int64 anyway).
    if (e == 0 && first_dropped >= 5) ++r;
  } else {
    std::uint64_t p = 1;
    for (long long k = 0; k < -e; ++k) p *= 10;
    // Round half away from zero. Dropped digits lie below m's last digit, so they cannot lift a remainder below
    // one half to one half: comparing the kept remainder is exact.
    const std::uint64_t q = m / p, rem = m % p;
    r = q + (rem >= p / 2 ? 1 : 0);
  }
  if (r > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  const auto v = static_cast<std::int64_t>(r);
  return negative ? -v : v;
}

namespace {
std::string lower_alnum(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') out.push_back(static_cast<char>(c - 'A' + 'a'));
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) out.push_back(c);
  }
  return out;
}
bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }
}  // namespace

std::string normalize_collective_op(std::string_view name) {
  // Kernel signatures "(ncclDevComm*, unsigned long, ncclWork*)" carry no op: look at the name only.
  const auto paren = name.find('(');
  if (paren != std::string_view::npos) name = name.substr(0, paren);
  const std::string s = lower_alnum(name);
  if (has(s, "allreduce")) return "all-reduce";
  if (has(s, "reducescatter")) return "reduce-scatter";
  if (has(s, "allgather")) return "all-gather";
  if (has(s, "alltoall")) return "all-to-all";
  if (has(s, "broadcast") || has(s, "bcast")) return "broadcast";
  if (has(s, "sendrecv")) return "";  // NCCL's SendRecv kernel runs send, recv and all-to-all alike
  if (has(s, "send")) return "send";
  if (has(s, "recv")) return "recv";
  if (has(s, "reduce")) return "reduce";
  return "";
}

int dtype_size_bytes(std::string_view dtype) {
  const std::string s = lower_alnum(dtype);
  static constexpr std::pair<const char*, int> kSizes[] = {
      {"float", 4},         {"float32", 4},     {"fp32", 4},         {"double", 8},         {"float64", 8},
      {"fp64", 8},          {"half", 2},        {"float16", 2},      {"fp16", 2},           {"bfloat16", 2},
      {"bf16", 2},          {"complexhalf", 4}, {"complexfloat", 8}, {"complexdouble", 16}, {"byte", 1},
      {"uint8", 1},         {"char", 1},        {"int8", 1},         {"short", 2},          {"int16", 2},
      {"int", 4},           {"int32", 4},       {"long", 8},         {"int64", 8},          {"bool", 1},
      {"uint16", 2},        {"uint32", 4},      {"uint64", 8},       {"qint8", 1},          {"quint8", 1},
      {"qint32", 4},        {"quint4x2", 1},    {"float8e5m2", 1},   {"float8e4m3fn", 1},   {"float8e5m2fnuz", 1},
      {"float8e4m3fnuz", 1}};
  for (const auto& [n, size] : kSizes)
    if (s == n) return size;
  return 0;
}

}  // namespace kineto

// ---------------------------------------------------------------------------------------------------------------
// SAX handler: streams the document once and keeps only what ImportedTrace needs.
// ---------------------------------------------------------------------------------------------------------------
namespace {

using json = nlohmann::json;

/// A JSON scalar as delivered by the SAX parser.
struct Scalar {
  enum class Type : std::uint8_t { NUL, BOOL, INT, UINT, FLOAT, STRING } type = Type::NUL;
  bool b = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
  const std::string* text = nullptr;  ///< string value, or the literal of a float

  /// The value as an exact integer when it is one (floats only when integral and in range).
  std::optional<std::int64_t> as_int() const {
    switch (type) {
      case Type::INT: return i;
      case Type::UINT:
        if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          return static_cast<std::int64_t>(u);
        return std::nullopt;
      case Type::FLOAT:
        if (d >= -9.0e18 && d <= 9.0e18 && static_cast<double>(static_cast<std::int64_t>(d)) == d)
          return static_cast<std::int64_t>(d);
        return std::nullopt;
      default: return std::nullopt;
    }
  }
  bool is_number() const { return type == Type::INT || type == Type::UINT || type == Type::FLOAT; }
  /// Text form for metadata.
  std::string to_text() const {
    switch (type) {
      case Type::NUL: return "null";
      case Type::BOOL: return b ? "true" : "false";
      case Type::INT: return std::to_string(i);
      case Type::UINT: return std::to_string(u);
      case Type::FLOAT:
      case Type::STRING: return *text;
    }
    return {};
  }
};

/// pid / tid as recorded: integer, string ("Spans", "stream 7") or something unusable.
struct IdValue {
  enum class Type : std::uint8_t { ABSENT, INT, STRING, OTHER } type = Type::ABSENT;
  std::int64_t i = 0;
  std::string s;
  void set(const Scalar& v) {
    if (auto x = v.as_int()) {
      type = Type::INT;
      i = *x;
    } else if (v.type == Scalar::Type::STRING) {
      type = Type::STRING;
      s = *v.text;
    } else {
      type = Type::OTHER;
    }
  }
};

/// "ts" / "dur" converted to ns at the callback.
struct TimeValue {
  enum class Type : std::uint8_t { ABSENT, OK, NOT_NUMBER, OUT_OF_RANGE } type = Type::ABSENT;
  std::int64_t ns = 0;
  void set(const Scalar& v) {
    constexpr std::int64_t kMaxUs = std::numeric_limits<std::int64_t>::max() / 1000;
    switch (v.type) {
      case Scalar::Type::INT:
        if (v.i > kMaxUs || v.i < -kMaxUs) {
          type = Type::OUT_OF_RANGE;
        } else {
          type = Type::OK;
          ns = v.i * 1000;
        }
        return;
      case Scalar::Type::UINT:
        if (v.u > static_cast<std::uint64_t>(kMaxUs)) {
          type = Type::OUT_OF_RANGE;
        } else {
          type = Type::OK;
          ns = static_cast<std::int64_t>(v.u) * 1000;
        }
        return;
      case Scalar::Type::FLOAT:
        if (auto x = kineto::us_text_to_ns(*v.text)) {
          type = Type::OK;
          ns = *x;
        } else {
          type = Type::OUT_OF_RANGE;
        }
        return;
      default: type = Type::NOT_NUMBER; return;
    }
  }
};

struct OptInt {
  bool has = false;
  std::int64_t v = 0;
  void set(const Scalar& s) {
    if (auto x = s.as_int()) {
      has = true;
      v = *x;
    }
  }
};

/// Everything read from one element of traceEvents; reset (keeping string capacity) for each element.
struct RawEvent {
  bool ph_is_x = false;
  bool cat_is_string = false;
  bool name_bad_type = false;
  std::string cat, name;
  IdValue pid, tid;
  TimeValue ts, dur;
  OptInt correlation, external_id, device, stream, in_nelems, out_nelems, group_size;
  std::string stream_text;  // "stream" given as a string ("0x0")
  bool has_stream_text = false;
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  bool has_collective_name = false;
  std::string collective_name, dtype, pg_name, pg_desc;
  std::vector<std::vector<std::int64_t>> input_dims;  // "Input Dims"
  std::vector<std::string> input_types;               // "Input type"
  bool dims_item_bad = false;  ///< the "Input Dims" entry being read is not a flat list of integers

  void reset() {
    ph_is_x = cat_is_string = name_bad_type = false;
    cat.clear();
    name.clear();
    pid = IdValue{};
    tid = IdValue{};
    ts = TimeValue{};
    dur = TimeValue{};
    correlation = external_id = device = stream = in_nelems = out_nelems = group_size = OptInt{};
    stream_text.clear();
    has_stream_text = false;
    for (int k = 0; k < 3; ++k) grid[k] = block[k] = 0;
    has_collective_name = false;
    collective_name.clear();
    dtype.clear();
    pg_name.clear();
    pg_desc.clear();
    input_dims.clear();
    input_types.clear();
    dims_item_bad = false;
  }
};

/// DIMS: the "Input Dims" array; DIMS_ITEM: one entry of it; TYPES: the "Input type" array.
enum class Ctx : std::uint8_t { TOP_OBJECT, EVENTS, EVENT, ARGS, DIM3, DEVICES, DEVICE, DIST, DIMS, DIMS_ITEM, TYPES };
enum class TopKey : std::uint8_t { OTHER, TRACE_EVENTS, DEVICE_PROPERTIES, DISTRIBUTED_INFO };
enum class EventKey : std::uint8_t { OTHER, PH, CAT, NAME, PID, TID, TS, DUR, ARGS };
enum class ArgKey : std::uint8_t {
  OTHER,
  CORRELATION,
  EXTERNAL_ID,
  DEVICE,
  STREAM,
  GRID,
  BLOCK,
  COLLECTIVE_NAME,
  IN_NELEMS,
  OUT_NELEMS,
  DTYPE,
  GROUP_SIZE,
  PG_NAME,
  PG_DESC,
  INPUT_DIMS,
  INPUT_TYPES
};
enum class DeviceKey : std::uint8_t { OTHER, ID, NAME, MEMORY, SMS, MAJOR, MINOR };

EventKey classify_event_key(const std::string& k) {
  switch (k.size()) {
    case 2:
      if (k == "ph") return EventKey::PH;
      if (k == "ts") return EventKey::TS;
      break;
    case 3:
      if (k == "cat") return EventKey::CAT;
      if (k == "pid") return EventKey::PID;
      if (k == "tid") return EventKey::TID;
      if (k == "dur") return EventKey::DUR;
      break;
    case 4:
      if (k == "name") return EventKey::NAME;
      if (k == "args") return EventKey::ARGS;
      break;
    default: break;
  }
  return EventKey::OTHER;
}

ArgKey classify_arg_key(const std::string& k) {
  if (k == "correlation") return ArgKey::CORRELATION;
  if (k == "External id") return ArgKey::EXTERNAL_ID;
  if (k == "device") return ArgKey::DEVICE;
  if (k == "stream") return ArgKey::STREAM;
  if (k == "grid") return ArgKey::GRID;
  if (k == "block") return ArgKey::BLOCK;
  if (k.size() < 5) return ArgKey::OTHER;
  if (k == "Collective name") return ArgKey::COLLECTIVE_NAME;
  if (k == "In msg nelems") return ArgKey::IN_NELEMS;
  if (k == "Out msg nelems") return ArgKey::OUT_NELEMS;
  if (k == "dtype") return ArgKey::DTYPE;
  if (k == "Group size") return ArgKey::GROUP_SIZE;
  if (k == "Process Group Name") return ArgKey::PG_NAME;
  if (k == "Process Group Description") return ArgKey::PG_DESC;
  if (k == "Input Dims") return ArgKey::INPUT_DIMS;
  if (k == "Input type") return ArgKey::INPUT_TYPES;
  return ArgKey::OTHER;
}

DeviceKey classify_device_key(const std::string& k) {
  if (k == "id") return DeviceKey::ID;
  if (k == "name") return DeviceKey::NAME;
  if (k == "totalGlobalMem") return DeviceKey::MEMORY;
  if (k == "numSms") return DeviceKey::SMS;
  if (k == "computeMajor") return DeviceKey::MAJOR;
  if (k == "computeMinor") return DeviceKey::MINOR;
  return DeviceKey::OTHER;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    char x = a[k], y = b[k];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

bool icontains(std::string_view s, std::string_view needle) {
  if (needle.size() > s.size()) return false;
  for (std::size_t k = 0; k + needle.size() <= s.size(); ++k)
    if (iequals(s.substr(k, needle.size()), needle)) return true;
  return false;
}

/// Kineto category -> kind, over the vocabularies of several PyTorch/Kineto versions (NVIDIA and AMD).
std::optional<TraceEventKind> kind_of_category(std::string_view cat) {
  struct Entry {
    const char* cat;
    TraceEventKind kind;
  };
  static constexpr Entry kMap[] = {
      {"cpu_op", TraceEventKind::CPU_OP},
      {"operator", TraceEventKind::CPU_OP},
      {"user_annotation", TraceEventKind::USER_ANNOTATION},
      {"cuda_runtime", TraceEventKind::RUNTIME},
      {"cuda_driver", TraceEventKind::RUNTIME},
      {"runtime", TraceEventKind::RUNTIME},
      {"hip_runtime", TraceEventKind::RUNTIME},
      {"hip_driver", TraceEventKind::RUNTIME},
      {"kernel", TraceEventKind::KERNEL},
      {"gpu_memcpy", TraceEventKind::MEMCPY},
      {"memcpy", TraceEventKind::MEMCPY},
      {"gpu_memset", TraceEventKind::MEMSET},
      {"memset", TraceEventKind::MEMSET},
      {"gpu_user_annotation", TraceEventKind::GPU_ANNOTATION},
  };
  for (const auto& e : kMap)
    if (iequals(cat, e.cat)) return e.kind;
  return std::nullopt;
}

/// Integer in a string: "7", "0x1f", or a trailing number ("stream 7"). nullopt when there is none.
std::optional<std::int64_t> int_in_string(std::string_view s) {
  auto parse = [](std::string_view t, int base) -> std::optional<std::int64_t> {
    std::int64_t v = 0;
    if (t.empty()) return std::nullopt;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
    if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
    return v;
  };
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return parse(s.substr(2), 16);
  if (auto v = parse(s, 10)) return v;
  std::size_t k = s.size();
  while (k > 0 && s[k - 1] >= '0' && s[k - 1] <= '9') --k;
  if (k == s.size() || k == 0 || s[k - 1] != ' ') return std::nullopt;
  return parse(s.substr(k), 10);
}

std::string shorten(const std::string& s, std::size_t max_chars = 80) {
  if (s.size() <= max_chars) return s;
  return s.substr(0, max_chars) + "...";
}

/// What was learnt while streaming that the finishing pass needs.
struct ParseFacts {
  bool saw_events = false;
  bool saw_hip_runtime = false;   ///< runtime calls named hip*
  bool saw_cuda_runtime = false;  ///< runtime/driver calls named cuda* / cu*
  bool saw_rccl = false;
  bool saw_roctracer = false;  ///< "roctracer" named in top-level metadata
  bool saw_cupti = false;      ///< cupti_version / cuda_runtime_version at top level
};

class KinetoSax {
public:
  KinetoSax(ImportedTrace& out, std::size_t text_size) : out_(out), text_size_(text_size) {
    out_.events.reserve(text_size / 600 + 16);
  }

  const std::string& error() const { return error_; }
  const ParseFacts& facts() const { return facts_; }

  // --- nlohmann SAX interface ---
  bool null() { return value(Scalar{}); }
  bool boolean(bool b) {
    Scalar s;
    s.type = Scalar::Type::BOOL;
    s.b = b;
    return value(s);
  }
  bool number_integer(json::number_integer_t v) {
    Scalar s;
    s.type = Scalar::Type::INT;
    s.i = v;
    return value(s);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    Scalar s;
    s.type = Scalar::Type::UINT;
    s.u = v;
    return value(s);
  }
  bool number_float(json::number_float_t v, const json::string_t& literal) {
    Scalar s;
    s.type = Scalar::Type::FLOAT;
    s.d = v;
    s.text = &literal;
    return value(s);
  }
  bool string(json::string_t& v) {
    Scalar s;
    s.type = Scalar::Type::STRING;
    s.text = &v;
    return value(s);
  }
  bool binary(json::binary_t&) { return true; }  // not produced by the JSON reader

  bool start_object(std::size_t) {
    if (skip_ > 0) return ++skip_, true;
    if (stack_.empty()) {
      stack_.push_back(Ctx::TOP_OBJECT);
      return true;
    }
    switch (stack_.back()) {
      case Ctx::TOP_OBJECT:
        if (top_key_ == TopKey::TRACE_EVENTS) return fail("'traceEvents' is not an array (found an object)");
        if (top_key_ == TopKey::DISTRIBUTED_INFO) {
          stack_.push_back(Ctx::DIST);
          return true;
        }
        break;
      case Ctx::EVENTS:
        ev_.reset();
        event_key_ = EventKey::OTHER;
        stack_.push_back(Ctx::EVENT);
        return true;
      case Ctx::EVENT:
        if (event_key_ == EventKey::ARGS) {
          arg_key_ = ArgKey::OTHER;
          stack_.push_back(Ctx::ARGS);
          return true;
        }
        event_container();
        break;
      case Ctx::DEVICES:
        device_ = TraceDevice{};
        device_key_ = DeviceKey::OTHER;
        stack_.push_back(Ctx::DEVICE);
        return true;
      case Ctx::DIMS: ev_.input_dims.emplace_back(); break;  // an object is no shape: [] (content skipped)
      case Ctx::DIMS_ITEM: ev_.dims_item_bad = true; break;
      case Ctx::TYPES: ev_.input_types.emplace_back(); break;
      default: break;
    }
    skip_ = 1;
    return true;
  }

  bool end_object() {
    if (skip_ > 0) return --skip_, true;
    const Ctx c = stack_.back();
    stack_.pop_back();
    if (c == Ctx::EVENT) return finish_event();
    if (c == Ctx::DEVICE) out_.devices.push_back(device_);
    return true;
  }

  bool start_array(std::size_t) {
    if (skip_ > 0) return ++skip_, true;
    if (stack_.empty()) {  // legacy Chrome format: a bare array of events
      stack_.push_back(Ctx::EVENTS);
      facts_.saw_events = true;
      return true;
    }
    switch (stack_.back()) {
      case Ctx::TOP_OBJECT:
        if (top_key_ == TopKey::TRACE_EVENTS) {
          stack_.push_back(Ctx::EVENTS);
          facts_.saw_events = true;
          return true;
        }
        if (top_key_ == TopKey::DEVICE_PROPERTIES) {
          stack_.push_back(Ctx::DEVICES);
          return true;
        }
        break;
      case Ctx::EVENTS: return fail("traceEvents[" + std::to_string(event_index_) + "] is not an object");
      case Ctx::EVENT: event_container(); break;
      case Ctx::ARGS:
        if (arg_key_ == ArgKey::GRID || arg_key_ == ArgKey::BLOCK) {
          dim_ = arg_key_ == ArgKey::GRID ? ev_.grid : ev_.block;
          dim_index_ = 0;
          stack_.push_back(Ctx::DIM3);
          return true;
        }
        if (arg_key_ == ArgKey::INPUT_DIMS) {
          ev_.input_dims.clear();
          stack_.push_back(Ctx::DIMS);
          return true;
        }
        if (arg_key_ == ArgKey::INPUT_TYPES) {
          ev_.input_types.clear();
          stack_.push_back(Ctx::TYPES);
          return true;
        }
        break;
      case Ctx::DIMS:
        ev_.input_dims.emplace_back();
        ev_.dims_item_bad = false;
        stack_.push_back(Ctx::DIMS_ITEM);
        return true;
      case Ctx::DIMS_ITEM: ev_.dims_item_bad = true; break;  // a TensorList's nested shapes: kept as []
      case Ctx::TYPES: ev_.input_types.emplace_back(); break;
      default: break;
    }
    skip_ = 1;
    return true;
  }

  bool end_array() {
    if (skip_ > 0) return --skip_, true;
    // Events were finished one by one at their end_object; an "Input Dims" entry that was not a flat list of
    // integers is recorded as [].
    if (stack_.back() == Ctx::DIMS_ITEM && ev_.dims_item_bad) ev_.input_dims.back().clear();
    stack_.pop_back();
    return true;
  }

  bool key(json::string_t& k) {
    if (skip_ > 0) return true;
    switch (stack_.back()) {
      case Ctx::TOP_OBJECT:
        top_key_name_ = k;
        top_key_ = k == "traceEvents"        ? TopKey::TRACE_EVENTS
                   : k == "deviceProperties" ? TopKey::DEVICE_PROPERTIES
                   : k == "distributedInfo"  ? TopKey::DISTRIBUTED_INFO
                                             : TopKey::OTHER;
        break;
      case Ctx::EVENT: event_key_ = classify_event_key(k); break;
      case Ctx::ARGS: arg_key_ = classify_arg_key(k); break;
      case Ctx::DEVICE: device_key_ = classify_device_key(k); break;
      case Ctx::DIST: dist_key_ = k; break;
      default: break;
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/, const json::exception& ex) {
    if (!error_.empty()) return false;
    std::string detail = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while parsing ..." -> the
    // part after the location; "[json.exception.out_of_range.406] number overflow ..." -> after the tag.
    if (const auto col = detail.find("column "); col != std::string::npos) {
      if (const auto colon = detail.find(": ", col); colon != std::string::npos) detail = detail.substr(colon + 2);
    } else if (!detail.empty() && detail[0] == '[') {
      if (const auto close = detail.find("] "); close != std::string::npos) detail = detail.substr(close + 2);
    }
    // One printable line: the "last read" excerpt may hold control characters or broken UTF-8 from the input.
    for (char& c : detail) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) c = '?';
    }
    const bool at_end = detail.find("unexpected end of input") != std::string::npos ||
                        (position >= text_size_ && detail.find("missing closing quote") != std::string::npos);
    const std::size_t byte = std::min(position, text_size_);
    if (at_end) error_ = "truncated JSON at byte " + std::to_string(byte) + " (unexpected end of input)";
    else error_ = "invalid JSON at byte " + std::to_string(byte) + ": " + shorten(detail, 160);
    return false;
  }

private:
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  bool value(const Scalar& v) {
    if (skip_ > 0) return true;
    if (stack_.empty()) return fail("not a Kineto trace (the top level is a single value, not an object)");
    switch (stack_.back()) {
      case Ctx::TOP_OBJECT:
        if (top_key_ == TopKey::TRACE_EVENTS) return fail("'traceEvents' is not an array");
        out_.metadata[top_key_name_] = v.to_text();
        if (top_key_name_ == "cupti_version" || top_key_name_ == "cuda_runtime_version") facts_.saw_cupti = true;
        if (icontains(top_key_name_, "roctracer") ||
            (v.type == Scalar::Type::STRING && icontains(*v.text, "roctracer")))
          facts_.saw_roctracer = true;
        return true;
      case Ctx::EVENTS: return fail("traceEvents[" + std::to_string(event_index_) + "] is not an object");
      case Ctx::EVENT: event_value(v); return true;
      case Ctx::ARGS: arg_value(v); return true;
      case Ctx::DIM3:
        if (dim_index_ < 3) {
          if (auto x = v.as_int()) {
            const std::int64_t c = std::clamp<std::int64_t>(*x, 0, std::numeric_limits<int>::max());
            dim_[dim_index_] = static_cast<int>(c);
          }
        }
        ++dim_index_;
        return true;
      case Ctx::DEVICE: device_value(v); return true;
      case Ctx::DIMS: ev_.input_dims.emplace_back(); return true;  // a scalar entry: no shape
      case Ctx::DIMS_ITEM:
        if (auto x = v.as_int()) ev_.input_dims.back().push_back(*x);
        else ev_.dims_item_bad = true;
        return true;
      case Ctx::TYPES: ev_.input_types.push_back(v.type == Scalar::Type::STRING ? *v.text : std::string()); return true;
      case Ctx::DIST:
        if (dist_key_ == "rank" || dist_key_ == "world_size") {
          auto x = v.as_int();
          if (x && *x >= std::numeric_limits<int>::min() && *x <= std::numeric_limits<int>::max()) {
            (dist_key_ == "rank" ? out_.rank : out_.world_size) = static_cast<int>(*x);
            return true;
          }
        }
        out_.metadata["distributedInfo." + dist_key_] = v.to_text();
        return true;
      case Ctx::DEVICES: return true;
    }
    return true;
  }

  void event_value(const Scalar& v) {
    switch (event_key_) {
      case EventKey::PH: ev_.ph_is_x = v.type == Scalar::Type::STRING && *v.text == "X"; break;
      case EventKey::CAT:
        ev_.cat_is_string = v.type == Scalar::Type::STRING;
        if (ev_.cat_is_string) ev_.cat = *v.text;
        break;
      case EventKey::NAME:
        if (v.type == Scalar::Type::STRING) {
          ev_.name = *v.text;
          ev_.name_bad_type = false;
        } else {
          ev_.name_bad_type = true;
        }
        break;
      case EventKey::PID: ev_.pid.set(v); break;
      case EventKey::TID: ev_.tid.set(v); break;
      case EventKey::TS: ev_.ts.set(v); break;
      case EventKey::DUR: ev_.dur.set(v); break;
      case EventKey::ARGS:  // "args" that is not an object: no arguments
      case EventKey::OTHER: break;
    }
  }

  /// An event field whose value is an object or array (skipped): wrong type for every field we read but args.
  void event_container() {
    switch (event_key_) {
      case EventKey::PH: ev_.ph_is_x = false; break;
      case EventKey::CAT: ev_.cat_is_string = false; break;
      case EventKey::NAME: ev_.name_bad_type = true; break;
      case EventKey::PID: ev_.pid.type = IdValue::Type::OTHER; break;
      case EventKey::TID: ev_.tid.type = IdValue::Type::OTHER; break;
      case EventKey::TS: ev_.ts.type = TimeValue::Type::NOT_NUMBER; break;
      case EventKey::DUR: ev_.dur.type = TimeValue::Type::NOT_NUMBER; break;
      case EventKey::ARGS:
      case EventKey::OTHER: break;
    }
  }

  void arg_value(const Scalar& v) {
    auto text = [&](std::string& dst) {
      if (v.type == Scalar::Type::STRING) dst = *v.text;
    };
    switch (arg_key_) {
      case ArgKey::CORRELATION: ev_.correlation.set(v); break;
      case ArgKey::EXTERNAL_ID: ev_.external_id.set(v); break;
      case ArgKey::DEVICE: ev_.device.set(v); break;
      case ArgKey::STREAM:
        ev_.stream.set(v);
        if (!ev_.stream.has && v.type == Scalar::Type::STRING) {
          ev_.has_stream_text = true;
          ev_.stream_text = *v.text;
        }
        break;
      case ArgKey::COLLECTIVE_NAME:
        if (v.type == Scalar::Type::STRING) {
          ev_.has_collective_name = true;
          ev_.collective_name = *v.text;
        }
        break;
      case ArgKey::IN_NELEMS: ev_.in_nelems.set(v); break;
      case ArgKey::OUT_NELEMS: ev_.out_nelems.set(v); break;
      case ArgKey::DTYPE: text(ev_.dtype); break;
      case ArgKey::GROUP_SIZE: ev_.group_size.set(v); break;
      case ArgKey::PG_NAME: text(ev_.pg_name); break;
      case ArgKey::PG_DESC: text(ev_.pg_desc); break;
      case ArgKey::GRID:  // not an array: ignored
      case ArgKey::BLOCK:
      case ArgKey::INPUT_DIMS:
      case ArgKey::INPUT_TYPES:
      case ArgKey::OTHER: break;
    }
  }

  void device_value(const Scalar& v) {
    auto to_int = [&](int& dst) {
      if (auto x = v.as_int(); x && *x >= std::numeric_limits<int>::min() && *x <= std::numeric_limits<int>::max())
        dst = static_cast<int>(*x);
    };
    switch (device_key_) {
      case DeviceKey::ID: to_int(device_.id); break;
      case DeviceKey::NAME:
        if (v.type == Scalar::Type::STRING) device_.name = *v.text;
        break;
      case DeviceKey::MEMORY:
        if (v.is_number())
          device_.total_memory_bytes = v.type == Scalar::Type::INT    ? static_cast<double>(v.i)
                                       : v.type == Scalar::Type::UINT ? static_cast<double>(v.u)
                                                                      : v.d;
        break;
      case DeviceKey::SMS: to_int(device_.sm_count); break;
      case DeviceKey::MAJOR: to_int(device_.compute_major); break;
      case DeviceKey::MINOR: to_int(device_.compute_minor); break;
      case DeviceKey::OTHER: break;
    }
  }

  /// pid/tid of an imported event: integers as recorded, integers inside strings, else a stable negative id per
  /// distinct string (-1, -2, ... in order of first appearance).
  std::int64_t resolve_id(const IdValue& id) {
    if (id.type == IdValue::Type::INT) return id.i;
    if (id.type != IdValue::Type::STRING) return 0;
    if (auto x = int_in_string(id.s)) return *x;
    auto [it, inserted] = string_ids_.try_emplace(id.s, -1 - static_cast<std::int64_t>(string_ids_.size()));
    return it->second;
  }

  bool finish_event() {
    const std::size_t index = event_index_++;
    if (!ev_.ph_is_x || !ev_.cat_is_string) return true;
    const auto kind = kind_of_category(ev_.cat);
    if (!kind) return true;
    auto where = [&] {
      std::string w = "event #" + std::to_string(index);
      if (!ev_.name.empty()) w += " ('" + shorten(ev_.name, 60) + "')";
      return w;
    };
    auto check_time = [&](const TimeValue& t, const char* field) {
      switch (t.type) {
        case TimeValue::Type::OK: return true;
        case TimeValue::Type::ABSENT: return fail(where() + ": missing '" + field + "'");
        case TimeValue::Type::NOT_NUMBER: return fail(where() + ": '" + field + "' is not a number");
        case TimeValue::Type::OUT_OF_RANGE: return fail(where() + ": '" + field + "' is out of range");
      }
      return false;
    };
    if (ev_.name_bad_type) return fail(where() + ": 'name' is not a string");
    if (!check_time(ev_.ts, "ts") || !check_time(ev_.dur, "dur")) return false;
    if (ev_.dur.ns < 0) return fail(where() + ": negative 'dur'");
    if (ev_.ts.ns > std::numeric_limits<std::int64_t>::max() - ev_.dur.ns)
      return fail(where() + ": 'ts' + 'dur' is out of range");
    if (ev_.pid.type == IdValue::Type::OTHER) return fail(where() + ": 'pid' is not an integer or a string");
    if (ev_.tid.type == IdValue::Type::OTHER) return fail(where() + ": 'tid' is not an integer or a string");

    TraceEvent e;
    e.kind = *kind;
    e.name = ev_.name;
    e.start_ns = ev_.ts.ns;  // absolute until the finishing pass
    e.dur_ns = ev_.dur.ns;
    e.pid = resolve_id(ev_.pid);
    e.tid = resolve_id(ev_.tid);
    if (ev_.correlation.has) e.correlation = ev_.correlation.v;
    if (ev_.external_id.has) e.external_id = ev_.external_id.v;
    if (e.is_gpu()) {
      std::int64_t dev = ev_.device.has ? ev_.device.v : e.pid;
      e.device = dev >= 0 && dev <= std::numeric_limits<int>::max() ? static_cast<int>(dev) : -1;
      if (ev_.stream.has) {
        e.tid = ev_.stream.v;
      } else if (ev_.has_stream_text) {
        if (auto x = int_in_string(ev_.stream_text)) e.tid = *x;
      }
    }
    for (int k = 0; k < 3; ++k) {
      e.grid[k] = ev_.grid[k];
      e.block[k] = ev_.block[k];
    }
    if (e.kind == TraceEventKind::CPU_OP) {
      e.input_dims = std::move(ev_.input_dims);
      e.input_types = std::move(ev_.input_types);
    }

    // Collective metadata carried by the event itself.
    if (ev_.has_collective_name) {
      e.collective = true;
      e.comm.op = kineto::normalize_collective_op(ev_.collective_name);
    }
    const int elem_bytes = kineto::dtype_size_bytes(ev_.dtype);
    if (elem_bytes > 0 && (ev_.in_nelems.has || ev_.out_nelems.has)) {
      // Size of the whole buffer (nccl-tests' convention): the input for all-reduce/reduce-scatter/broadcast, the
      // output for all-gather.
      const std::int64_t nelems =
          std::max(ev_.in_nelems.has ? ev_.in_nelems.v : 0, ev_.out_nelems.has ? ev_.out_nelems.v : 0);
      e.comm.bytes = static_cast<double>(nelems) * elem_bytes;
    }
    if (ev_.group_size.has && ev_.group_size.v > 0 && ev_.group_size.v <= std::numeric_limits<int>::max())
      e.comm.group_size = static_cast<int>(ev_.group_size.v);
    e.comm.process_group = !ev_.pg_name.empty() ? ev_.pg_name : ev_.pg_desc;

    switch (e.kind) {
      case TraceEventKind::KERNEL:
        if (icontains(e.name, "nccl") || icontains(e.name, "rccl")) {
          e.collective = true;
          if (e.comm.op.empty()) e.comm.op = kineto::normalize_collective_op(e.name);
          if (icontains(e.name, "rccl")) facts_.saw_rccl = true;
        }
        break;
      case TraceEventKind::RUNTIME:
        if (istarts_with(e.name, "hip")) facts_.saw_hip_runtime = true;
        else if (istarts_with(e.name, "cu")) facts_.saw_cuda_runtime = true;
        break;
      case TraceEventKind::CPU_OP:
      case TraceEventKind::USER_ANNOTATION:
      case TraceEventKind::GPU_ANNOTATION:
        if (e.name == "record_param_comms") {
          e.collective = true;
        } else if (istarts_with(e.name, "nccl:") || istarts_with(e.name, "rccl:")) {
          e.collective = true;
          if (e.comm.op.empty()) e.comm.op = kineto::normalize_collective_op(std::string_view(e.name).substr(5));
        }
        break;
      case TraceEventKind::MEMCPY:
      case TraceEventKind::MEMSET: break;
    }
    if (!e.collective) e.comm = CollectiveInfo{};
    out_.events.push_back(std::move(e));
    return true;
  }

  ImportedTrace& out_;
  std::size_t text_size_;
  std::string error_;
  ParseFacts facts_;
  std::vector<Ctx> stack_;
  int skip_ = 0;  ///< depth inside a container whose content is not needed
  TopKey top_key_ = TopKey::OTHER;
  std::string top_key_name_;
  EventKey event_key_ = EventKey::OTHER;
  ArgKey arg_key_ = ArgKey::OTHER;
  DeviceKey device_key_ = DeviceKey::OTHER;
  std::string dist_key_;
  RawEvent ev_;
  std::size_t event_index_ = 0;
  int* dim_ = nullptr;
  int dim_index_ = 0;
  TraceDevice device_;
  std::map<std::string, std::int64_t> string_ids_;
};

// ---------------------------------------------------------------------------------------------------------------
// Finishing pass
// ---------------------------------------------------------------------------------------------------------------

bool has_info(const CollectiveInfo& c) {
  return !c.op.empty() || c.bytes > 0 || c.group_size > 0 || !c.process_group.empty();
}

/// Fills the fields of `dst` that are unknown from `src`.
void merge_missing(CollectiveInfo& dst, const CollectiveInfo& src) {
  if (dst.op.empty()) dst.op = src.op;
  if (dst.bytes <= 0) dst.bytes = src.bytes;
  if (dst.group_size <= 0) dst.group_size = src.group_size;
  if (dst.process_group.empty()) dst.process_group = src.process_group;
}

bool complete(const CollectiveInfo& c) {
  return !c.op.empty() && c.bytes > 0 && c.group_size > 0 && !c.process_group.empty();
}

/// Gives collective kernels that carry no (or partial) metadata the metadata of the CPU side that launched
/// them: first the CPU ops sharing the launch's "External id" (record_param_comms in recent PyTorch), then the
/// communication ranges ("nccl:all_reduce", record_param_comms) enclosing the launching runtime call on its
/// thread, innermost first. The kernel's own op (from its args or name) wins over the CPU side's.
void propagate_collectives(std::vector<TraceEvent>& events) {
  std::unordered_map<std::int64_t, CollectiveInfo> by_external_id;
  std::unordered_map<std::int64_t, std::size_t> runtime_by_correlation;
  using Thread = std::pair<std::int64_t, std::int64_t>;
  struct Range {
    std::int64_t start, end;
    std::size_t event;
  };
  std::map<Thread, std::vector<Range>> ranges;
  bool any_kernel_needs = false;
  for (std::size_t k = 0; k < events.size(); ++k) {
    const TraceEvent& e = events[k];
    const bool cpu_side = e.kind == TraceEventKind::CPU_OP || e.kind == TraceEventKind::USER_ANNOTATION;
    if (cpu_side && e.collective && has_info(e.comm)) {
      if (e.external_id >= 0) merge_missing(by_external_id[e.external_id], e.comm);
      ranges[{e.pid, e.tid}].push_back({e.start_ns, e.start_ns + e.dur_ns, k});
    } else if (e.kind == TraceEventKind::RUNTIME && e.correlation >= 0) {
      runtime_by_correlation.try_emplace(e.correlation, k);
    } else if (e.kind == TraceEventKind::KERNEL && e.collective && !complete(e.comm)) {
      any_kernel_needs = true;
    }
  }
  if (!any_kernel_needs) return;

  // Kernels to complete, with the launching runtime call they are looked up by.
  struct Query {
    std::int64_t start, end;
    std::size_t kernel;
  };
  std::map<Thread, std::vector<Query>> queries;
  std::vector<CollectiveInfo> from_cpu(events.size());
  std::vector<std::size_t> kernels;
  for (std::size_t k = 0; k < events.size(); ++k) {
    const TraceEvent& e = events[k];
    if (e.kind != TraceEventKind::KERNEL || !e.collective || complete(e.comm)) continue;
    kernels.push_back(k);
    auto rt = e.correlation >= 0 ? runtime_by_correlation.find(e.correlation) : runtime_by_correlation.end();
    if (rt != runtime_by_correlation.end()) {
      const TraceEvent& r = events[rt->second];
      if (r.external_id >= 0)
        if (auto it = by_external_id.find(r.external_id); it != by_external_id.end())
          merge_missing(from_cpu[k], it->second);
      queries[{r.pid, r.tid}].push_back({r.start_ns, r.start_ns + r.dur_ns, k});
    } else if (e.external_id >= 0) {
      if (auto it = by_external_id.find(e.external_id); it != by_external_id.end())
        merge_missing(from_cpu[k], it->second);
    }
  }
  // Sweep each thread: ranges by start (outer first), queries by start; a stack of open ranges.
  for (auto& [thread, qs] : queries) {
    auto rit = ranges.find(thread);
    if (rit == ranges.end()) continue;
    std::vector<Range>& rs = rit->second;
    std::sort(rs.begin(), rs.end(), [](const Range& a, const Range& b) {
      return std::tie(a.start, b.end, a.event) < std::tie(b.start, a.end, b.event);
    });
    std::sort(qs.begin(), qs.end(), [](const Query& a, const Query& b) {
      return std::tie(a.start, a.end, a.kernel) < std::tie(b.start, b.end, b.kernel);
    });
    std::vector<Range> open;
    std::size_t next = 0;
    for (const Query& q : qs) {
      for (; next < rs.size() && rs[next].start <= q.start; ++next) {
        while (!open.empty() && open.back().end < rs[next].start) open.pop_back();
        open.push_back(rs[next]);
      }
      while (!open.empty() && open.back().end < q.start) open.pop_back();
      for (auto it = open.rbegin(); it != open.rend(); ++it)
        if (it->start <= q.start && it->end >= q.end) merge_missing(from_cpu[q.kernel], events[it->event].comm);
    }
  }
  for (std::size_t k : kernels) merge_missing(events[k].comm, from_cpu[k]);
}

/// Vendor from the strongest evidence present: device names, then runtime/kernel names (AMD traces use the
/// "cuda_runtime" category for hip* calls), then the tracer named at the top level.
std::string detect_vendor(const ImportedTrace& t, const ParseFacts& f) {
  bool amd_device = false, nvidia_device = false;
  for (const TraceDevice& d : t.devices) {
    if (icontains(d.name, "AMD") || icontains(d.name, "Radeon") || icontains(d.name, "Instinct")) amd_device = true;
    if (icontains(d.name, "NVIDIA") || icontains(d.name, "Tesla") || icontains(d.name, "GeForce") ||
        icontains(d.name, "Quadro"))
      nvidia_device = true;
  }
  if (amd_device != nvidia_device) return amd_device ? "amd" : "nvidia";
  const bool amd_calls = f.saw_hip_runtime || f.saw_rccl;
  if (amd_calls != f.saw_cuda_runtime) return amd_calls ? "amd" : "nvidia";
  if (f.saw_roctracer != f.saw_cupti) return f.saw_roctracer ? "amd" : "nvidia";
  return "";
}

void finish_trace(ImportedTrace& t, const ParseFacts& f, const std::string& source) {
  t.vendor = detect_vendor(t, f);
  std::vector<TraceEvent>& ev = t.events;
  if (!ev.empty()) {
    std::int64_t origin = std::numeric_limits<std::int64_t>::max();
    std::int64_t last_end = std::numeric_limits<std::int64_t>::min();
    for (const TraceEvent& e : ev) {
      origin = std::min(origin, e.start_ns);
      last_end = std::max(last_end, e.start_ns + e.dur_ns);  // checked not to overflow when read
    }
    if (origin < 0 && last_end > std::numeric_limits<std::int64_t>::max() + origin)
      throw FormatError(source + ": timestamps span more than the int64 nanosecond range");
    t.origin_ns = origin;
    for (TraceEvent& e : ev) e.start_ns -= origin;
    std::stable_sort(ev.begin(), ev.end(), [](const TraceEvent& a, const TraceEvent& b) {
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      if (a.kind != b.kind) return a.kind < b.kind;
      if (a.pid != b.pid) return a.pid < b.pid;
      if (a.tid != b.tid) return a.tid < b.tid;
      return a.name < b.name;
    });
  }
  propagate_collectives(ev);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------------------------

ImportedTrace parse_kineto(const std::string& text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw FormatError(source + ": empty file");
  ImportedTrace t;
  t.source = source;
  t.format = "kineto";
  KinetoSax sax(t, text.size());
  bool ok = false;
  try {
    ok = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    throw FormatError(source + ": invalid JSON (" + shorten(e.what(), 160) + ")");
  }
  if (!sax.error().empty()) throw FormatError(source + ": " + sax.error());
  if (!ok) throw FormatError(source + ": invalid JSON");
  if (!sax.facts().saw_events) throw FormatError(source + ": not a Kineto trace (no 'traceEvents' array)");
  finish_trace(t, sax.facts(), source);
  return t;
}

ImportedTrace import_kineto(const std::string& path) {
  const std::string text = read_maybe_compressed(path);
  // A gzip stream cut inside its 10-byte header is not recognised as compressed and comes back as is.
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    throw FormatError(path + ": truncated or corrupt gzip data");
  return parse_kineto(text, path);
}

std::vector<ImportedTrace> import_kineto_archive(const std::string& path) {
  std::vector<ArchiveMember> members = read_archive_members(path);
  std::vector<const ArchiveMember*> json_members;
  for (const ArchiveMember& m : members)
    if (m.name.size() >= 5 && m.name.compare(m.name.size() - 5, 5, ".json") == 0) json_members.push_back(&m);
  if (json_members.empty()) throw FormatError(path + ": no '.json' member in the archive");
  std::sort(json_members.begin(), json_members.end(),
            [](const ArchiveMember* a, const ArchiveMember* b) { return a->name < b->name; });
  std::vector<ImportedTrace> traces;
  traces.reserve(json_members.size());
  for (const ArchiveMember* m : json_members) traces.push_back(parse_kineto(m->content, path + ":" + m->name));
  return traces;
}

}  // namespace dtsim
