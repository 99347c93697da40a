#include "traces/exec_graph.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>

#include "chakra_et.pb.h"
#include "traces/archive.hpp"
#include "traces/error.hpp"

namespace dtsim {

const char* to_string(ExecNodeKind kind) {
  switch (kind) {
    case ExecNodeKind::COMPUTE: return "compute";
    case ExecNodeKind::COMMUNICATION: return "communication";
    case ExecNodeKind::MEMORY: return "memory";
    case ExecNodeKind::OTHER: return "other";
  }
  return "unknown";
}

namespace {

using nlohmann::json;
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

/// `s` made safe for a one-line message: control and non-ASCII bytes become '?', long strings are cut.
std::string printable(std::string_view s, std::size_t max_chars = 120) {
  std::string out;
  for (char c : s.substr(0, max_chars)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// An integer JSON value (signed, unsigned within int64, or a decimal string as protobuf-JSON writes 64-bit
/// integers); nullopt for anything else.
std::optional<std::int64_t> as_int64(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const bool negative = !s.empty() && s[0] == '-';
    const std::size_t begin = negative ? 1 : 0;
    if (s.size() == begin || s.size() - begin > 19) return std::nullopt;
    std::uint64_t r = 0;  // at most 19 digits: cannot overflow 64 unsigned bits
    for (std::size_t i = begin; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      r = r * 10 + static_cast<std::uint64_t>(s[i] - '0');
    }
    if (r > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return negative ? -static_cast<std::int64_t>(r) : static_cast<std::int64_t>(r);
  }
  return std::nullopt;
}

/// Pointer to member `key` of object `obj`, or nullptr.
const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

/// Bytes per element of a PyTorch dtype name as record_param_comms writes it ("Float", "Long", ...); 0 if unknown.
double dtype_bytes(std::string_view dtype) {
  // clang-format off
  static constexpr std::pair<std::string_view, double> kTable[] = {
      {"Float", 4},        {"Double", 8},        {"Half", 2},          {"BFloat16", 2},      {"Long", 8},
      {"Int", 4},          {"Short", 2},         {"Char", 1},          {"Byte", 1},          {"Bool", 1},
      {"ComplexHalf", 4},  {"ComplexFloat", 8},  {"ComplexDouble", 16}, {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
      {"Float8_e4m3fnuz", 1}, {"Float8_e5m2fnuz", 1}, {"UInt16", 2},    {"UInt32", 4},        {"UInt64", 8}};
  // clang-format on
  for (const auto& [name, bytes] : kTable)
    if (name == dtype) return bytes;
  return 0;
}

/// Normalised collective op from any name: "c10d::allreduce_", "nccl:all_to_all", "all_to_allv",
/// "ncclKernel_AllReduce_RING_LL_Sum_float(...)", "c10d::broadcast_(0)"; "" when it names none ("wait", NCCL's
/// SendRecv kernels, which serve several ops). Same vocabulary as the Kineto importer, plus "barrier".
std::string normalize_collective(std::string_view name) {
  // A kernel signature "(ncclDevComm*, unsigned long, ncclWork*)" names no op: look at the name before it.
  if (const auto paren = name.find('('); paren != std::string_view::npos) name = name.substr(0, paren);
  std::string k;
  k.reserve(name.size());
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      k.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // clang-format off
  static constexpr std::pair<std::string_view, std::string_view> kPatterns[] = {
      {"reducescatter", "reduce-scatter"}, {"allreduce", "all-reduce"}, {"allgather", "all-gather"},
      {"alltoall", "all-to-all"},          {"broadcast", "broadcast"},  {"bcast", "broadcast"},
      {"barrier", "barrier"},
      {"sendrecv", ""},                    {"send", "send"},            {"recv", "recv"},
      {"reduce", "reduce"}};
  // clang-format on
  for (const auto& [pattern, op] : kPatterns)
    if (k.find(pattern) != std::string::npos) return std::string(op);
  return "";
}

/// Rank from the Chakra file-name convention "<prefix>.<rank>.json" / ".et" (optionally .gz); -1 if absent.
int rank_from_file_name(const std::string& name) {
  std::string base = std::filesystem::path(name).filename().string();
  for (std::string_view ext : {".gz", ".json", ".et"})
    if (ends_with(base, ext)) base.resize(base.size() - ext.size());
  const auto dot = base.rfind('.');
  if (dot == std::string::npos || dot + 1 == base.size() || base.size() - dot - 1 > 9) return -1;
  int r = 0;
  for (std::size_t i = dot + 1; i < base.size(); ++i) {
    if (base[i] < '0' || base[i] > '9') return -1;
    r = r * 10 + (base[i] - '0');
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// JSON text -> DOM

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

/// True when `text` starts like a length-delimited protobuf stream whose first message has a length-delimited
/// field 1 or 2 (Chakra's GlobalMetadata: version / attr), i.e. a binary Chakra .et trace.
bool looks_like_protobuf(std::string_view text) {
  std::uint64_t len = 0;
  std::size_t i = 0;
  for (; i < text.size() && i < 5; ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    len |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) break;
  }
  if (i >= text.size() || i == 5 || len == 0) return false;
  const std::size_t body = i + 1;
  if (body >= text.size() || len > text.size() - body) return false;
  const auto tag = static_cast<unsigned char>(text[body]);
  return (tag & 7) == 2 && ((tag >> 3) == 1 || (tag >> 3) == 2);
}

/// A binary Chakra trace rather than JSON: not starting with '{' or '[' (after blanks) and looking like a
/// length-delimited protobuf stream.
bool is_protobuf_text(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) return false;
  return looks_like_protobuf(text);
}

/// The reason part of an nlohmann parse error, on one printable line.
std::string parse_reason(const json::exception& e) {
  std::string_view what = e.what();
  const auto pos = what.find("syntax error while parsing ");
  if (pos != std::string_view::npos) what.remove_prefix(pos);
  else if (const auto br = what.find("] "); br != std::string_view::npos) what.remove_prefix(br + 2);
  return printable(what, 160);
}

/// Checks that `text` can be JSON at all; refuses empty input with a clear message.
void check_json_text(const std::string& text, const std::string& source) {
  if (blank(text)) throw FormatError(source + ": empty file (no JSON document)");
}

/// Every top-level JSON value of `text`: one for a normal document, several for a stream of concatenated objects
/// (chakra_jsonizer output).
std::vector<json> parse_json_values(const std::string& text, const std::string& source) {
  check_json_text(text, source);
  std::vector<json> values;
  try {
    values.push_back(json::parse(text));
    return values;
  } catch (const json::parse_error& e) {
    // Only "a complete value followed by more text" continues as a stream ("...; expected end of input").
    if (std::string_view(e.what()).find("; expected end of input") == std::string_view::npos)
      throw FormatError(source + ": invalid JSON at byte " + std::to_string(e.byte) + " (" + parse_reason(e) + ")");
  } catch (const json::exception& e) {
    throw FormatError(source + ": invalid JSON (" + parse_reason(e) + ")");
  }
  // Several concatenated values.
  std::istringstream in(text);
  for (;;) {
    in >> std::ws;
    if (in.peek() == std::char_traits<char>::eof()) break;
    const auto offset = static_cast<std::int64_t>(in.tellg());
    try {
      json v;
      in >> v;
      values.push_back(std::move(v));
    } catch (const json::parse_error& e) {
      throw FormatError(source + ": invalid JSON in value " + std::to_string(values.size() + 1) + " at byte " +
                        std::to_string(offset + static_cast<std::int64_t>(e.byte)) + " (" + parse_reason(e) + ")");
    } catch (const json::exception& e) {
      throw FormatError(source + ": invalid JSON (" + parse_reason(e) + ")");
    }
  }
  return values;
}

enum class DocKind { PYTORCH_ET, CHAKRA_FEEDER, CHAKRA_JSONIZER };

/// Which format a parsed document is; refuses what is neither with a message saying what it looks like.
DocKind detect(const std::vector<json>& values, const std::string& source) {
  if (values.size() > 1) {
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!values[i].is_object())
        throw FormatError(source + ": value " + std::to_string(i + 1) +
                          " of a JSON stream is not an object (expected chakra_jsonizer output)");
    return DocKind::CHAKRA_JSONIZER;
  }
  const json& doc = values.front();
  if (!doc.is_object())
    throw FormatError(source + ": expected a JSON object at top level, found " + std::string(doc.type_name()));
  if (doc.contains("nodes")) return DocKind::PYTORCH_ET;
  if (doc.contains("workload_graph")) return DocKind::CHAKRA_FEEDER;
  if (doc.contains("traceEvents"))
    throw FormatError(source + ": is a Kineto/Chrome trace (traceEvents), not an execution trace");
  if (doc.contains("version") || (doc.contains("name") && (doc.contains("type") || doc.contains("id"))))
    return DocKind::CHAKRA_JSONIZER;
  throw FormatError(source +
                    ": neither a PyTorch execution trace (no 'nodes') nor a Chakra JSON trace (no 'workload_graph')");
}

// ---------------------------------------------------------------------------------------------------------------
// Shared graph assembly

/// Refuses duplicate ids in nodes sorted by id.
void check_unique_ids(const std::vector<ExecNode>& nodes, const std::string& source) {
  for (std::size_t i = 1; i < nodes.size(); ++i)
    if (nodes[i].id == nodes[i - 1].id)
      throw FormatError(source + ": duplicate node id " + std::to_string(nodes[i].id) + " ('" +
                        printable(nodes[i - 1].name, 60) + "' and '" + printable(nodes[i].name, 60) + "')");
}

std::string node_ctx(const std::string& source, std::size_t index, std::optional<std::int64_t> id) {
  return source + ": node " + (id ? std::to_string(*id) : "#" + std::to_string(index + 1) + " (no id yet)");
}

// ---------------------------------------------------------------------------------------------------------------
// PyTorch ET

struct TensorRef {
  std::int64_t id = 0;
  double bytes = 0;  // numel x elem_bytes
  double elem_bytes = 0;
  std::string device;
};

/// What the parser needs of one ET node besides the ExecNode itself (pointers into the DOM).
struct EtAux {
  const json* in_values = nullptr;
  const json* in_shapes = nullptr;
  const json* in_types = nullptr;
  const json* out_shapes = nullptr;
  std::vector<TensorRef> in_tensors, out_tensors;
  bool is_op = false;
  bool is_record = false;  // record_param_comms
  // record_param_comms attributes (schemas >= 1.0.3), nullptr when absent
  const json* collective_name = nullptr;
  const json* dtype = nullptr;
  const json* in_msg_nelems = nullptr;
  const json* out_msg_nelems = nullptr;
  const json* pg_size = nullptr;
  const json* pg_name = nullptr;
  const json* pg_desc = nullptr;
};

bool is_comm_name(std::string_view name) {
  return starts_with(name, "c10d::") || starts_with(name, "nccl:") || starts_with(name, "gloo:") ||
         name == "record_param_comms";
}

/// Appends the tensors found in `v` ([id, storage, offset, numel, elem_bytes, device] tuples, possibly nested in
/// lists). Tuples without a device (undefined tensors) are skipped. Depth-limited against hostile nesting.
void collect_tensors(const json& v, int depth, std::vector<TensorRef>& out) {
  if (!v.is_array() || depth > 16) return;
  if (v.size() == 6 && v[5].is_string() && v[0].is_number_integer() && v[1].is_number_integer() &&
      v[2].is_number_integer() && v[3].is_number_integer() && v[4].is_number_integer()) {
    const auto id = as_int64(v[0]);
    const auto numel = as_int64(v[3]);
    const auto elem = as_int64(v[4]);
    const auto& device = v[5].get_ref<const std::string&>();
    if (!id || device.empty()) return;
    TensorRef t;
    t.id = *id;
    t.elem_bytes = elem && *elem > 0 ? static_cast<double>(*elem) : 0;
    t.bytes = numel && *numel > 0 ? static_cast<double>(*numel) * t.elem_bytes : 0;
    t.device = device;
    out.push_back(std::move(t));
    return;
  }
  for (const auto& x : v) collect_tensors(x, depth + 1, out);
}

/// Tensors of argument k, when its type mentions "Tensor" (and is not an undefined "Tensor(nullptr ...)").
void tensors_of_arg(const json& values, const json& types, std::size_t k, std::vector<TensorRef>& out) {
  if (k >= values.size() || k >= types.size() || !types[k].is_string()) return;
  const auto& ts = types[k].get_ref<const std::string&>();
  if (ts.find("Tensor") == std::string::npos || ts.find("nullptr") != std::string::npos) return;
  collect_tensors(values[k], 0, out);
}

/// Tensors of one argument list, using the parallel type list to pick the tensor-typed arguments.
std::vector<TensorRef> tensors_of(const json* values, const json* types) {
  std::vector<TensorRef> out;
  if (!values || !types || !values->is_array() || !types->is_array()) return out;
  const std::size_t n = std::min(values->size(), types->size());
  for (std::size_t k = 0; k < n; ++k) tensors_of_arg(*values, *types, k, out);
  return out;
}

/// Dimensions of a shape entry ([d0, d1, ...] of non-negative integers), nullopt otherwise.
std::optional<std::vector<double>> dims_of(const json* shapes, std::size_t k) {
  if (!shapes || !shapes->is_array() || k >= shapes->size()) return std::nullopt;
  const json& s = (*shapes)[k];
  if (!s.is_array()) return std::nullopt;
  std::vector<double> d;
  d.reserve(s.size());
  for (const auto& x : s) {
    const auto v = x.is_number_integer() ? as_int64(x) : std::nullopt;
    if (!v || *v < 0) return std::nullopt;
    d.push_back(static_cast<double>(*v));
  }
  return d;
}

double product(const std::vector<double>& d, std::size_t from = 0) {
  double p = 1;
  for (std::size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

/// Boolean argument k, nullopt when absent or not a bool.
std::optional<bool> bool_arg(const json* values, std::size_t k) {
  if (!values || !values->is_array() || k >= values->size() || !(*values)[k].is_boolean()) return std::nullopt;
  return (*values)[k].get<bool>();
}

/// FLOPs of a GEMM / convolution operator from its argument shapes; 0 when not one or not derivable.
double own_flops(const std::string& name, const EtAux& a) {
  if (!starts_with(name, "aten::")) return 0;
  const std::string_view op = std::string_view(name).substr(6);
  const json* sh = a.in_shapes;
  auto mm = [](const std::optional<std::vector<double>>& x, const std::optional<std::vector<double>>& y) -> double {
    if (!x || !y || x->size() != 2 || y->size() != 2 || (*x)[1] != (*y)[0]) return 0;
    return 2 * (*x)[0] * (*x)[1] * (*y)[1];
  };
  auto bmm = [](const std::optional<std::vector<double>>& x, const std::optional<std::vector<double>>& y) -> double {
    if (!x || !y || x->size() != 3 || y->size() != 3 || (*x)[0] != (*y)[0] || (*x)[2] != (*y)[1]) return 0;
    return 2 * (*x)[0] * (*x)[1] * (*x)[2] * (*y)[2];
  };
  if (op == "mm") return mm(dims_of(sh, 0), dims_of(sh, 1));
  if (op == "addmm") return mm(dims_of(sh, 1), dims_of(sh, 2));
  if (op == "bmm") return bmm(dims_of(sh, 0), dims_of(sh, 1));
  if (op == "baddbmm") return bmm(dims_of(sh, 1), dims_of(sh, 2));
  if (op == "linear") {
    const auto x = dims_of(sh, 0), w = dims_of(sh, 1);
    if (!x || !w || x->empty() || w->size() != 2 || x->back() != (*w)[1]) return 0;
    const double rows = product(std::vector<double>(x->begin(), x->end() - 1));
    return 2 * rows * (*w)[0] * (*w)[1];
  }
  if (op == "matmul") {
    auto x = dims_of(sh, 0), y = dims_of(sh, 1);
    if (!x || !y || x->empty() || y->empty()) return 0;
    if (x->size() == 1) x->insert(x->begin(), 1.0);
    if (y->size() == 1) y->push_back(1.0);
    const std::size_t nx = x->size(), ny = y->size();
    if ((*x)[nx - 1] != (*y)[ny - 2]) return 0;
    double batch = 1;
    const std::size_t bx = nx - 2, by = ny - 2, nb = std::max(bx, by);
    for (std::size_t i = 0; i < nb; ++i) {
      const double dx = i + bx >= nb ? (*x)[i + bx - nb] : 1.0;
      const double dy = i + by >= nb ? (*y)[i + by - nb] : 1.0;
      if (dx != dy && dx != 1 && dy != 1) return 0;
      batch *= std::max(dx, dy);
    }
    return 2 * batch * (*x)[nx - 2] * (*x)[nx - 1] * (*y)[ny - 1];
  }
  const bool conv_fwd = op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "convolution" ||
                        op == "_convolution" || op == "cudnn_convolution" || op == "cudnn_convolution_transpose";
  if (conv_fwd) {
    bool transposed = op == "cudnn_convolution_transpose";
    if (op == "convolution" || op == "_convolution") transposed = bool_arg(a.in_values, 6).value_or(false);
    const auto in = dims_of(sh, 0), w = dims_of(sh, 1), out = dims_of(a.out_shapes, 0);
    const auto& ref = transposed ? in : out;
    if (!w || w->size() < 3 || !ref || ref->size() < 3) return 0;
    return 2 * product(*ref) * product(*w, 1);
  }
  if (op == "convolution_backward") {
    const auto grad_out = dims_of(sh, 0), in = dims_of(sh, 1), w = dims_of(sh, 2);
    const bool transposed = bool_arg(a.in_values, 7).value_or(false);
    const auto& ref = transposed ? in : grad_out;
    if (!w || w->size() < 3 || !ref || ref->size() < 3) return 0;
    double gradients = 2;  // grad_input and grad_weight unless the mask says otherwise
    if (a.in_values && a.in_values->size() > 10 && (*a.in_values)[10].is_array() && (*a.in_values)[10].size() >= 2) {
      const json& mask = (*a.in_values)[10];
      if (mask[0].is_boolean() && mask[1].is_boolean())
        gradients = (mask[0].get<bool>() ? 1 : 0) + (mask[1].get<bool>() ? 1 : 0);
    }
    return gradients * 2 * product(*ref) * product(*w, 1);
  }
  return 0;
}

/// Reads the values / shapes / types of "inputs" or "outputs" in either schema.
void io_lists(const json& n, const std::string& ctx, bool outputs, const json*& values, const json*& shapes,
              const json*& types) {
  const char* key = outputs ? "outputs" : "inputs";
  values = shapes = types = nullptr;
  const json* io = member(n, key);
  if (!io || io->is_null()) return;
  auto check_array = [&](const json* p, const std::string& what) {
    if (p && !p->is_array())
      throw FormatError(ctx + ": field '" + what + "' has the wrong type (" + p->type_name() + ", expected array)");
  };
  if (io->is_object()) {  // schema >= 1.0.3: {"values": [...], "shapes": [...], "types": [...]}
    values = member(*io, "values");
    shapes = member(*io, "shapes");
    types = member(*io, "types");
    check_array(values, std::string(key) + ".values");
    check_array(shapes, std::string(key) + ".shapes");
    check_array(types, std::string(key) + ".types");
  } else if (io->is_array()) {  // schema 1.0.1: "inputs" / "input_shapes" / "input_types"
    values = io;
    shapes = member(n, outputs ? "output_shapes" : "input_shapes");
    types = member(n, outputs ? "output_types" : "input_types");
    check_array(shapes, outputs ? "output_shapes" : "input_shapes");
    check_array(types, outputs ? "output_types" : "input_types");
  } else {
    throw FormatError(ctx + ": field '" + key + "' has the wrong type (" + io->type_name() + ")");
  }
}

/// Parses one ET node (structure strictly, metadata leniently).
void parse_et_node(const json& n, std::size_t index, const std::string& source, ExecNode& node, EtAux& aux) {
  if (!n.is_object())
    throw FormatError(node_ctx(source, index, std::nullopt) + ": expected a JSON object, found " + n.type_name());
  const json* id = member(n, "id");
  if (!id) throw FormatError(node_ctx(source, index, std::nullopt) + ": missing field 'id'");
  const auto idv = as_int64(*id);
  if (!idv || id->is_string())
    throw FormatError(node_ctx(source, index, std::nullopt) + ": field 'id' is not an integer (" + id->type_name() +
                      ")");
  if (*idv < 0) throw FormatError(node_ctx(source, index, std::nullopt) + ": negative id " + std::to_string(*idv));
  node.id = *idv;
  const std::string ctx = node_ctx(source, index, node.id);
  const json* name = member(n, "name");
  if (!name) throw FormatError(ctx + ": missing field 'name'");
  if (!name->is_string()) throw FormatError(ctx + ": field 'name' is not a string (" + name->type_name() + ")");
  node.name = name->get<std::string>();

  const char* parent_key = n.contains("ctrl_deps") ? "ctrl_deps" : "parent";
  if (const json* p = member(n, parent_key); p && !p->is_null()) {
    const auto pv = p->is_string() ? std::nullopt : as_int64(*p);
    if (!pv) throw FormatError(ctx + ": field '" + parent_key + "' is not an integer (" + p->type_name() + ")");
    node.parent = (*pv < 0 || *pv == node.id) ? -1 : *pv;  // the process root is its own parent
  }

  // Attributes: schema >= 1.0.3 keeps them in "attrs": [{"name", "type", "value"}], 1.0.1 as node fields.
  const json* op_schema = nullptr;
  const json* rf_id = nullptr;
  const json* tid = nullptr;
  auto take = [&](std::string_view key, const json* value) {
    if (key == "op_schema") op_schema = value;
    else if (key == "rf_id") rf_id = value;
    else if (key == "tid") tid = value;
    else if (key == "collective_name") aux.collective_name = value;
    else if (key == "dtype") aux.dtype = value;
    else if (key == "in_msg_nelems") aux.in_msg_nelems = value;
    else if (key == "pg_size") aux.pg_size = value;
    else if (key == "pg_name") aux.pg_name = value;
    else if (key == "out_msg_nelems") aux.out_msg_nelems = value;
    else if (key == "pg_desc") aux.pg_desc = value;
  };
  if (const json* attrs = member(n, "attrs"); attrs && !attrs->is_null()) {
    if (!attrs->is_array()) throw FormatError(ctx + ": field 'attrs' has the wrong type (" + attrs->type_name() + ")");
    for (const auto& a : *attrs) {
      if (!a.is_object()) continue;
      const json* an = member(a, "name");
      const json* av = member(a, "value");
      if (an && av && an->is_string()) take(an->get_ref<const std::string&>(), av);
    }
  } else {
    for (const char* key : {"op_schema", "rf_id", "tid", "collective_name", "dtype", "in_msg_nelems", "out_msg_nelems",
                            "pg_size", "pg_name", "pg_desc"})
      if (const json* v = member(n, key)) take(key, v);
  }
  if (rf_id)
    if (const auto v = rf_id->is_string() ? std::nullopt : as_int64(*rf_id)) node.rf_id = *v;
  if (tid)
    if (const auto v = tid->is_string() ? std::nullopt : as_int64(*tid)) node.thread = *v;

  const json* out_values = nullptr;
  const json* out_types = nullptr;
  io_lists(n, ctx, false, aux.in_values, aux.in_shapes, aux.in_types);
  io_lists(n, ctx, true, out_values, aux.out_shapes, out_types);
  aux.in_tensors = tensors_of(aux.in_values, aux.in_types);
  aux.out_tensors = tensors_of(out_values, out_types);

  const bool comm = is_comm_name(node.name);
  const bool has_schema = op_schema && op_schema->is_string() && !op_schema->get_ref<const std::string&>().empty();
  aux.is_op = comm || has_schema || (!op_schema && starts_with(node.name, "aten::"));
  aux.is_record = node.name == "record_param_comms";

  // Distinct tensors by id (an out= argument may be listed empty as input and resized as output: take the largest
  // size seen), whether any lives off the CPU, whether they span several devices.
  std::vector<std::pair<std::int64_t, double>> sizes;
  const std::string* first_device = nullptr;
  bool several_devices = false;
  for (const auto* list : {&aux.in_tensors, &aux.out_tensors})
    for (const auto& t : *list) {
      sizes.emplace_back(t.id, t.bytes);
      if (!starts_with(t.device, "cpu")) node.gpu = true;
      if (!first_device) first_device = &t.device;
      else if (*first_device != t.device) several_devices = true;
    }
  std::sort(sizes.begin(), sizes.end());
  node.tensor_bytes = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    if (k + 1 == sizes.size() || sizes[k + 1].first != sizes[k].first) node.tensor_bytes += sizes[k].second;  // max

  if (!aux.is_op) {
    node.kind = ExecNodeKind::OTHER;
  } else if (comm) {
    node.kind = ExecNodeKind::COMMUNICATION;
  } else {
    static constexpr std::string_view kCopies[] = {"aten::copy_", "aten::_to_copy", "aten::to", "aten::_copy_from",
                                                   "aten::_copy_from_and_resize"};
    const bool copy = std::find(std::begin(kCopies), std::end(kCopies), node.name) != std::end(kCopies);
    node.kind = copy && several_devices ? ExecNodeKind::MEMORY : ExecNodeKind::COMPUTE;
  }
}

/// Collective metadata of a record_param_comms node; `rank` receives its rank argument when present.
CollectiveInfo record_comm_info(const EtAux& a, std::optional<std::int64_t>& rank) {
  CollectiveInfo c;
  std::string collective;
  // Inputs: [tensors, seq, pg, rank, "collective name", in_splits, out_splits, ...]: the first String argument is
  // the collective name and the argument before it the rank (root rank for rooted collectives).
  std::size_t name_at = kNone;
  if (a.in_values && a.in_types) {
    const std::size_t n = std::min(a.in_values->size(), a.in_types->size());
    for (std::size_t k = 0; k < n; ++k)
      if ((*a.in_types)[k] == "String" && (*a.in_values)[k].is_string()) {
        name_at = k;
        break;
      }
  }
  if (name_at != kNone) {
    collective = (*a.in_values)[name_at].get<std::string>();
    if (name_at > 0 && (*a.in_values)[name_at - 1].is_number_integer()) rank = as_int64((*a.in_values)[name_at - 1]);
  }
  if (a.collective_name && a.collective_name->is_string()) collective = a.collective_name->get<std::string>();
  c.op = normalize_collective(collective);

  // Bytes: the larger of the input and output buffers (nccl-tests' convention, as the Kineto importer: the input
  // for all-reduce / reduce-scatter / broadcast, the output for all-gather).
  std::vector<TensorRef> first_arg;  // the record's first argument: its input tensor(s)
  if (a.in_values && a.in_types) tensors_of_arg(*a.in_values, *a.in_types, 0, first_arg);
  auto nelems_of = [](const json* v) -> std::int64_t {
    const auto r = v && v->is_number_integer() ? as_int64(*v) : std::nullopt;
    return r && *r > 0 ? *r : 0;
  };
  if ((a.in_msg_nelems && a.in_msg_nelems->is_number_integer()) ||
      (a.out_msg_nelems && a.out_msg_nelems->is_number_integer())) {
    const std::int64_t nelems = std::max(nelems_of(a.in_msg_nelems), nelems_of(a.out_msg_nelems));
    double elem = a.dtype && a.dtype->is_string() ? dtype_bytes(a.dtype->get_ref<const std::string&>()) : 0;
    if (elem == 0 && !first_arg.empty()) elem = first_arg.front().elem_bytes;
    c.bytes = static_cast<double>(nelems) * elem;
  } else {
    double in = 0, out = 0;
    for (const auto& t : first_arg) in += t.bytes;
    for (const auto& t : a.out_tensors) out += t.bytes;
    c.bytes = std::max(in, out);
  }

  if (a.pg_size && a.pg_size->is_number_integer()) {
    const auto gs = as_int64(*a.pg_size);
    if (gs && *gs > 0 && *gs <= std::numeric_limits<int>::max()) c.group_size = static_cast<int>(*gs);
  } else if (a.in_values && a.in_types) {
    const std::size_t n = std::min(a.in_values->size(), a.in_types->size());
    for (std::size_t k = 0; k < n; ++k) {
      const json& t = (*a.in_types)[k];
      const json& v = (*a.in_values)[k];
      if (t.is_string() && starts_with(t.get_ref<const std::string&>(), "GenericList[Int") && v.is_array() &&
          !v.empty() && v.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        c.group_size = static_cast<int>(v.size());
        break;
      }
    }
  }
  if (a.pg_name && a.pg_name->is_string()) c.process_group = a.pg_name->get<std::string>();
  if (c.process_group.empty() && a.pg_desc && a.pg_desc->is_string()) c.process_group = a.pg_desc->get<std::string>();
  return c;
}

ExecGraph build_pytorch_et(const json& doc, const std::string& source) {
  ExecGraph g;
  g.source = source;
  g.format = "pytorch-et";
  if (!doc.is_object())
    throw FormatError(source + ": expected a JSON object at top level, found " + std::string(doc.type_name()));
  if (const json* schema = member(doc, "schema"); schema && !schema->is_null()) {
    if (!schema->is_string())
      throw FormatError(source + ": field 'schema' is not a string (" + schema->type_name() + ")");
    g.schema = schema->get<std::string>();
  }
  const json* nodes = member(doc, "nodes");
  if (!nodes) throw FormatError(source + ": not a PyTorch execution trace (missing field 'nodes')");
  if (!nodes->is_array()) throw FormatError(source + ": field 'nodes' is not an array (" + nodes->type_name() + ")");

  const std::size_t n = nodes->size();
  std::vector<ExecNode> parsed(n);
  std::vector<EtAux> parsed_aux(n);
  for (std::size_t i = 0; i < n; ++i) parse_et_node((*nodes)[i], i, source, parsed[i], parsed_aux[i]);

  // Sort by id (keeping each node with its aux data) and refuse duplicates.
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  std::sort(perm.begin(), perm.end(), [&](std::size_t a, std::size_t b) { return parsed[a].id < parsed[b].id; });
  g.nodes.reserve(n);
  std::vector<EtAux> aux;
  aux.reserve(n);
  for (std::size_t i : perm) {
    g.nodes.push_back(std::move(parsed[i]));
    aux.push_back(std::move(parsed_aux[i]));
  }
  check_unique_ids(g.nodes, source);
  std::unordered_map<std::int64_t, std::size_t> index;
  index.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) index.emplace(g.nodes[i].id, i);

  // Parent indexes; unknown parents are an error.
  std::vector<std::size_t> parent(n, kNone);
  for (std::size_t i = 0; i < n; ++i) {
    const ExecNode& node = g.nodes[i];
    if (node.parent < 0) continue;
    auto it = index.find(node.parent);
    if (it == index.end())
      throw FormatError(source + ": node " + std::to_string(node.id) + " ('" + printable(node.name, 60) +
                        "'): parent node " + std::to_string(node.parent) + " does not exist");
    parent[i] = it->second;
  }

  // One pass over the parent forest (refusing loops): depth, whether an operator is an ancestor (nested) and the
  // nearest record_param_comms ancestor.
  enum : unsigned char { kUnvisited, kActive, kDone };
  std::vector<unsigned char> state(n, kUnvisited);
  std::vector<std::size_t> depth(n, 0), record_ancestor(n, kNone);
  std::vector<char> op_ancestor(n, 0);
  std::vector<std::size_t> path;
  for (std::size_t start = 0; start < n; ++start) {
    if (state[start] == kDone) continue;
    path.clear();
    std::size_t cur = start;
    while (cur != kNone && state[cur] == kUnvisited) {
      state[cur] = kActive;
      path.push_back(cur);
      cur = parent[cur];
    }
    if (cur != kNone && state[cur] == kActive)
      throw FormatError(source + ": node " + std::to_string(g.nodes[cur].id) + " ('" +
                        printable(g.nodes[cur].name, 60) + "') is its own ancestor (the parent chain loops)");
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const std::size_t i = *it, p = parent[i];
      if (p != kNone) {
        depth[i] = depth[p] + 1;
        op_ancestor[i] = static_cast<char>(op_ancestor[p] || aux[p].is_op);
        record_ancestor[i] = aux[p].is_record ? p : record_ancestor[p];
      }
      state[i] = kDone;
    }
  }
  for (std::size_t i = 0; i < n; ++i) g.nodes[i].nested = op_ancestor[i] != 0;

  // FLOPs: own formula, else the sum over children (structure passes sums through but reports 0).
  std::vector<std::size_t> by_depth(n);
  for (std::size_t i = 0; i < n; ++i) by_depth[i] = i;
  std::stable_sort(by_depth.begin(), by_depth.end(), [&](std::size_t a, std::size_t b) { return depth[a] > depth[b]; });
  std::vector<double> own(n), child_sum(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double f = aux[i].is_op ? own_flops(g.nodes[i].name, aux[i]) : 0;
    own[i] = std::isfinite(f) ? f : 0;  // absurd shapes: unknown rather than infinite
  }
  for (std::size_t i : by_depth) {
    const double value = own[i] > 0 ? own[i] : (std::isfinite(child_sum[i]) ? child_sum[i] : 0);
    g.nodes[i].flops = aux[i].is_op ? value : 0;
    if (parent[i] != kNone) child_sum[parent[i]] += value;
  }

  // Communication: record_param_comms first (in id order, which also fixes the rank), then the ops around them.
  std::vector<std::size_t> first_record_descendant(n, kNone);
  for (std::size_t i = 0; i < n; ++i) {
    if (!aux[i].is_record) continue;
    std::optional<std::int64_t> rank;
    g.nodes[i].comm = record_comm_info(aux[i], rank);
    const std::string& op = g.nodes[i].comm.op;
    if (g.rank < 0 && rank && *rank >= 0 && *rank <= std::numeric_limits<int>::max() &&
        (op == "all-reduce" || op == "all-gather" || op == "reduce-scatter" || op == "all-to-all" || op == "barrier"))
      g.rank = static_cast<int>(*rank);
    for (std::size_t a = parent[i]; a != kNone && first_record_descendant[a] == kNone; a = parent[a])
      first_record_descendant[a] = i;
  }
  for (std::size_t i = 0; i < n; ++i) {
    ExecNode& node = g.nodes[i];
    if (node.kind != ExecNodeKind::COMMUNICATION || aux[i].is_record) continue;
    const std::size_t src = record_ancestor[i] != kNone ? record_ancestor[i] : first_record_descendant[i];
    if (src != kNone) node.comm = g.nodes[src].comm;
    if (std::string own_op = normalize_collective(node.name); !own_op.empty()) node.comm.op = std::move(own_op);
  }

  // Dependencies between top-level operators, in id (start) order.
  std::unordered_map<std::int64_t, std::int64_t> producer;  // tensor id -> node id of its last writer
  std::unordered_map<std::int64_t, std::int64_t> last_on_thread;
  producer.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    ExecNode& node = g.nodes[i];
    if (!aux[i].is_op || node.nested) continue;
    for (const auto& t : aux[i].in_tensors) {
      auto it = producer.find(t.id);
      if (it != producer.end() && it->second != node.id) node.data_deps.push_back(it->second);
    }
    std::sort(node.data_deps.begin(), node.data_deps.end());
    node.data_deps.erase(std::unique(node.data_deps.begin(), node.data_deps.end()), node.data_deps.end());
    for (const auto& t : aux[i].out_tensors) producer[t.id] = node.id;
    auto [it, inserted] = last_on_thread.try_emplace(node.thread, node.id);
    if (!inserted) {
      node.ctrl_deps.push_back(it->second);
      it->second = node.id;
    }
  }
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Chakra JSON

ExecNodeKind chakra_kind(std::int64_t type) {
  switch (type) {
    case 4: return ExecNodeKind::COMPUTE;  // COMP_NODE
    case 5:
    case 6:
    case 7: return ExecNodeKind::COMMUNICATION;  // COMM_SEND / COMM_RECV / COMM_COLL
    case 2:
    case 3: return ExecNodeKind::MEMORY;  // MEM_LOAD / MEM_STORE
    default: return ExecNodeKind::OTHER;  // INVALID, METADATA, STORAGE, ...
  }
}

std::int64_t chakra_type_from_name(std::string_view name) {
  // clang-format off
  static constexpr std::pair<std::string_view, std::int64_t> kTypes[] = {
      {"INVALID_NODE", 0},  {"METADATA_NODE", 1},  {"MEM_LOAD_NODE", 2},  {"MEM_STORE_NODE", 3},
      {"COMP_NODE", 4},     {"COMM_SEND_NODE", 5}, {"COMM_RECV_NODE", 6}, {"COMM_COLL_NODE", 7},
      {"STORAGE_NODE", 8},  {"BATCH_NODE", 9},     {"CHECKPOINT_NODE", 10}};
  // clang-format on
  for (const auto& [n, t] : kTypes)
    if (n == name) return t;
  return -1;  // unknown: OTHER
}

/// CollectiveCommType -> normalised op.
std::string chakra_comm_op(std::int64_t comm_type) {
  switch (comm_type) {
    case 0: return "all-reduce";
    case 1: return "reduce";
    case 2: return "all-gather";
    case 5: return "broadcast";
    case 6: return "all-to-all";
    case 7:
    case 8: return "reduce-scatter";
    case 9: return "barrier";
    default: return "";  // GATHER, SCATTER, unknown
  }
}

/// Strict integer field accessor for Chakra nodes.
std::optional<std::int64_t> chakra_int(const json& n, std::initializer_list<const char*> keys, const std::string& ctx,
                                       bool allow_string) {
  for (const char* key : keys) {
    const json* v = member(n, key);
    if (!v || v->is_null()) continue;
    const auto r = (v->is_string() && !allow_string) ? std::nullopt : as_int64(*v);
    if (!r) throw FormatError(ctx + ": field '" + key + "' is not an integer (" + v->type_name() + ")");
    return r;
  }
  return std::nullopt;
}

std::vector<std::int64_t> chakra_ids(const json& n, std::initializer_list<const char*> keys, const std::string& ctx,
                                     bool allow_string) {
  std::vector<std::int64_t> out;
  for (const char* key : keys) {
    const json* v = member(n, key);
    if (!v || v->is_null()) continue;
    if (!v->is_array()) throw FormatError(ctx + ": field '" + key + "' is not an array (" + v->type_name() + ")");
    out.reserve(v->size());
    for (const auto& x : *v) {
      const auto r = (x.is_string() && !allow_string) ? std::nullopt : as_int64(x);
      if (!r || *r < 0)
        throw FormatError(ctx + ": field '" + key + "' holds a non-id value (" +
                          (x.is_number_integer() ? std::to_string(x.get<std::int64_t>()) : std::string(x.type_name())) +
                          ")");
      out.push_back(*r);
    }
    break;
  }
  return out;
}

std::int64_t micros_to_ns(std::int64_t us, const std::string& ctx) {
  if (us < 0) throw FormatError(ctx + ": negative duration " + std::to_string(us) + " us");
  if (us > std::numeric_limits<std::int64_t>::max() / 1000) throw FormatError(ctx + ": duration out of range");
  return us * 1000;
}

void finish_comm(ExecNode& node, std::optional<std::int64_t> type, std::optional<std::int64_t> comm_type) {
  if (node.kind != ExecNodeKind::COMMUNICATION) return;
  if (comm_type) node.comm.op = chakra_comm_op(*comm_type);
  else if (type == 5) node.comm.op = "send";
  else if (type == 6) node.comm.op = "recv";
  else node.comm.op = normalize_collective(node.name);
}

/// {"workload_graph": [{"Id", "Name", "NodeType", ...}]}: the input of Chakra's JSON feeder.
void build_chakra_feeder(const json& doc, ExecGraph& g) {
  const json& list = doc.at("workload_graph");
  if (!list.is_array())
    throw FormatError(g.source + ": field 'workload_graph' is not an array (" + list.type_name() + ")");
  g.nodes.resize(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& n = list[i];
    ExecNode& node = g.nodes[i];
    if (!n.is_object())
      throw FormatError(node_ctx(g.source, i, std::nullopt) + ": expected a JSON object, found " + n.type_name());
    const auto id = chakra_int(n, {"Id"}, node_ctx(g.source, i, std::nullopt), false);
    if (!id) throw FormatError(node_ctx(g.source, i, std::nullopt) + ": missing field 'Id'");
    if (*id < 0) throw FormatError(node_ctx(g.source, i, std::nullopt) + ": negative id " + std::to_string(*id));
    node.id = *id;
    const std::string ctx = node_ctx(g.source, i, node.id);
    const json* name = member(n, "Name");
    if (!name) throw FormatError(ctx + ": missing field 'Name'");
    if (!name->is_string()) throw FormatError(ctx + ": field 'Name' is not a string (" + name->type_name() + ")");
    node.name = name->get<std::string>();
    const auto type = chakra_int(n, {"NodeType"}, ctx, false);
    if (!type) throw FormatError(ctx + ": missing field 'NodeType'");
    node.kind = chakra_kind(*type);
    node.data_deps = chakra_ids(n, {"data_deps"}, ctx, false);
    node.ctrl_deps = chakra_ids(n, {"ctrlDeps", "ctrl_deps"}, ctx, false);
    if (const auto us = chakra_int(n, {"runtime", "duration_micros"}, ctx, false))
      node.duration_ns = micros_to_ns(*us, ctx);
    if (const json* cpu = member(n, "is_cpu_op"); cpu && !cpu->is_null()) {
      if (!cpu->is_boolean())
        throw FormatError(ctx + ": field 'is_cpu_op' is not a boolean (" + cpu->type_name() + ")");
      node.gpu = !cpu->get<bool>();
    }
    const auto comm_type = chakra_int(n, {"comm_type"}, ctx, false);
    node.comm_src = chakra_int(n, {"comm_src"}, ctx, false).value_or(-1);
    node.comm_dst = chakra_int(n, {"comm_dst"}, ctx, false).value_or(-1);
    node.comm_tag = chakra_int(n, {"comm_tag"}, ctx, false).value_or(-1);
    if (const auto size = chakra_int(n, {"comm_size", "tensor_size"}, ctx, false); size && *size > 0)
      node.comm.bytes = static_cast<double>(*size);
    finish_comm(node, type, comm_type);
    if (node.kind != ExecNodeKind::COMMUNICATION) node.comm = CollectiveInfo{};
  }
}

/// Value of a protobuf-JSON AttributeProto ({"name": ..., "int64Val": "5"} etc.).
const json* attr_value(const json& a) {
  for (auto it = a.begin(); it != a.end(); ++it)
    if (it.key() != "name" && it.key() != "docString" && it.key() != "doc_string" &&
        (ends_with(it.key(), "Val") || ends_with(it.key(), "_val")))
      return &*it;
  return nullptr;
}

/// chakra_jsonizer output: GlobalMetadata then one protobuf-JSON Node per value. proto3 omits default values, so
/// a missing id is 0, a missing type INVALID_NODE.
void build_chakra_jsonizer(const std::vector<json>& values, ExecGraph& g) {
  std::size_t first = 0;
  if (!values.empty() && values[0].contains("version") && !values[0].contains("name")) {
    const json& v = values[0]["version"];
    if (!v.is_string())
      throw FormatError(g.source + ": GlobalMetadata field 'version' is not a string (" + v.type_name() + ")");
    g.schema = v.get<std::string>();
    first = 1;
  }
  g.nodes.resize(values.size() - first);
  for (std::size_t i = first; i < values.size(); ++i) {
    const json& n = values[i];
    ExecNode& node = g.nodes[i - first];
    const std::size_t index = i - first;
    if (!n.is_object()) throw FormatError(node_ctx(g.source, index, std::nullopt) + ": expected a JSON object");
    const auto id = chakra_int(n, {"id"}, node_ctx(g.source, index, std::nullopt), true);
    node.id = id.value_or(0);
    if (node.id < 0)
      throw FormatError(node_ctx(g.source, index, std::nullopt) + ": negative id " + std::to_string(node.id));
    const std::string ctx = node_ctx(g.source, index, node.id);
    if (const json* name = member(n, "name")) {
      if (!name->is_string()) throw FormatError(ctx + ": field 'name' is not a string (" + name->type_name() + ")");
      node.name = name->get<std::string>();
    }
    std::optional<std::int64_t> type = 0;
    if (const json* t = member(n, "type"); t && !t->is_null()) {
      if (t->is_string()) type = chakra_type_from_name(t->get_ref<const std::string&>());
      else if (t->is_number_integer()) type = as_int64(*t);
      else throw FormatError(ctx + ": field 'type' has the wrong type (" + t->type_name() + ")");
    }
    node.kind = chakra_kind(type.value_or(-1));
    node.data_deps = chakra_ids(n, {"dataDeps", "data_deps"}, ctx, true);
    node.ctrl_deps = chakra_ids(n, {"ctrlDeps", "ctrl_deps"}, ctx, true);
    if (const auto us = chakra_int(n, {"durationMicros", "duration_micros"}, ctx, true))
      node.duration_ns = micros_to_ns(*us, ctx);
    std::optional<std::int64_t> comm_type;
    double comm_size = 0, tensor_size = 0;
    const json* attrs = member(n, "attr");
    if (!attrs) attrs = member(n, "attrs");
    if (attrs && !attrs->is_null()) {
      if (!attrs->is_array()) throw FormatError(ctx + ": field 'attr' is not an array (" + attrs->type_name() + ")");
      for (const auto& a : *attrs) {
        if (!a.is_object() || !a.contains("name") || !a["name"].is_string()) continue;
        const std::string& key = a["name"].get_ref<const std::string&>();
        const json* v = attr_value(a);
        if (!v) continue;
        if (key == "is_cpu_op" && v->is_boolean()) node.gpu = !v->get<bool>();
        else if (key == "comm_type") comm_type = as_int64(*v);
        else if (key == "comm_size") comm_size = static_cast<double>(as_int64(*v).value_or(0));
        else if (key == "tensor_size") tensor_size = static_cast<double>(as_int64(*v).value_or(0));
        else if (key == "rf_id") node.rf_id = as_int64(*v).value_or(-1);
        else if (key == "tid") node.thread = as_int64(*v).value_or(0);
        else if (key == "comm_src") node.comm_src = as_int64(*v).value_or(-1);
        else if (key == "comm_dst") node.comm_dst = as_int64(*v).value_or(-1);
        else if (key == "comm_tag") node.comm_tag = as_int64(*v).value_or(-1);
        else if ((key == "pg_name" || key == "process_group") && v->is_string())
          node.comm.process_group = v->get<std::string>();
        else if ((key == "comm_group_size" || key == "pg_size") && as_int64(*v)) {
          const auto gs = *as_int64(*v);
          if (gs > 0 && gs <= std::numeric_limits<int>::max()) node.comm.group_size = static_cast<int>(gs);
        }
      }
    }
    const double size = comm_size > 0 ? comm_size : tensor_size;
    if (size > 0) node.comm.bytes = size;
    finish_comm(node, type, comm_type);
    if (node.kind != ExecNodeKind::COMMUNICATION) node.comm = CollectiveInfo{};
  }
}

ExecGraph build_chakra(const std::vector<json>& values, DocKind kind, const std::string& source) {
  ExecGraph g;
  g.source = source;
  g.format = "chakra-json";
  g.rank = rank_from_file_name(source);
  if (kind == DocKind::CHAKRA_FEEDER) build_chakra_feeder(values.front(), g);
  else build_chakra_jsonizer(values, g);
  std::sort(g.nodes.begin(), g.nodes.end(), [](const ExecNode& a, const ExecNode& b) { return a.id < b.id; });
  check_unique_ids(g.nodes, source);
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Chakra protobuf (.et)

namespace pb = dtsim::chakra;

/// An integer attribute value of any integer (or bool) kind; nullopt for others and for uint64 above int64's range.
std::optional<std::int64_t> attr_int(const pb::AttributeProto& a) {
  using V = pb::AttributeProto;
  switch (a.value_case()) {
    case V::kInt32Val: return a.int32_val();
    case V::kInt64Val: return a.int64_val();
    case V::kUint32Val: return a.uint32_val();
    case V::kSint32Val: return a.sint32_val();
    case V::kSint64Val: return a.sint64_val();
    case V::kFixed32Val: return a.fixed32_val();
    case V::kSfixed32Val: return a.sfixed32_val();
    case V::kSfixed64Val: return a.sfixed64_val();
    case V::kBoolVal: return a.bool_val() ? 1 : 0;
    case V::kUint64Val:
    case V::kFixed64Val: {
      const std::uint64_t u = a.value_case() == V::kUint64Val ? a.uint64_val() : a.fixed64_val();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
      return static_cast<std::int64_t>(u);
    }
    default: return std::nullopt;
  }
}

std::int64_t id_of(std::uint64_t id, const std::string& ctx, const char* what) {
  if (id > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw FormatError(ctx + ": " + what + " " + std::to_string(id) + " is out of range");
  return static_cast<std::int64_t>(id);
}

/// One Node message -> ExecNode, with the same attributes as the JSON forms (build_chakra_jsonizer).
void fill_from_protobuf(const pb::Node& n, std::size_t index, const std::string& source, ExecNode& node) {
  node.id = id_of(n.id(), node_ctx(source, index, std::nullopt), "id");
  const std::string ctx = node_ctx(source, index, node.id);
  node.name = n.name();
  const std::int64_t type = n.type();
  node.kind = chakra_kind(type);
  node.data_deps.reserve(static_cast<std::size_t>(n.data_deps_size()));
  for (std::uint64_t d : n.data_deps()) node.data_deps.push_back(id_of(d, ctx, "data dependency"));
  node.ctrl_deps.reserve(static_cast<std::size_t>(n.ctrl_deps_size()));
  for (std::uint64_t d : n.ctrl_deps()) node.ctrl_deps.push_back(id_of(d, ctx, "control dependency"));
  if (n.duration_micros() > 0) node.duration_ns = micros_to_ns(id_of(n.duration_micros(), ctx, "duration"), ctx);
  std::optional<std::int64_t> comm_type;
  double comm_size = 0, tensor_size = 0;
  for (const pb::AttributeProto& a : n.attr()) {
    const std::string& key = a.name();
    const auto v = attr_int(a);
    if (key == "is_cpu_op" && a.value_case() == pb::AttributeProto::kBoolVal) node.gpu = !a.bool_val();
    else if (key == "comm_type") comm_type = v;
    else if (key == "comm_size") comm_size = static_cast<double>(v.value_or(0));
    else if (key == "tensor_size") tensor_size = static_cast<double>(v.value_or(0));
    else if (key == "rf_id") node.rf_id = v.value_or(-1);
    else if (key == "tid") node.thread = v.value_or(0);
    else if (key == "comm_src") node.comm_src = v.value_or(-1);
    else if (key == "comm_dst") node.comm_dst = v.value_or(-1);
    else if (key == "comm_tag") node.comm_tag = v.value_or(-1);
    else if ((key == "pg_name" || key == "process_group") && a.value_case() == pb::AttributeProto::kStringVal)
      node.comm.process_group = a.string_val();
    else if ((key == "comm_group_size" || key == "pg_size") && v && *v > 0 && *v <= std::numeric_limits<int>::max())
      node.comm.group_size = static_cast<int>(*v);
  }
  const double size = comm_size > 0 ? comm_size : tensor_size;
  if (size > 0) node.comm.bytes = size;
  finish_comm(node, type, comm_type);
  if (node.kind != ExecNodeKind::COMMUNICATION) node.comm = CollectiveInfo{};
}

/// A Chakra .et stream: varint-length-prefixed messages, GlobalMetadata first (as Chakra's feeder reads it), then
/// Nodes. Each message must fit in what remains of the file and parse whole.
/// libprotobuf's own log lines (an ERROR for invalid UTF-8 in a string field, say) are dropped from the first Chakra
/// read on: dtsim reports a bad trace in its one line (issue Guard: third-party logging never reaches the user on
/// bad input). Once per process, thread-safe (a function-local static; SetLogHandler itself is not).
void quiet_protobuf() {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    return true;
  }();
  (void)quiet;
}

ExecGraph build_chakra_et(std::string_view bytes, const std::string& source) {
  quiet_protobuf();
  ExecGraph g;
  g.source = source;
  g.format = "chakra-et";
  g.rank = rank_from_file_name(source);
  if (bytes.empty()) throw FormatError(source + ": empty file (no Chakra GlobalMetadata)");
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw FormatError(source + ": Chakra trace larger than 2 GiB (split it per rank)");
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  for (std::size_t k = 0;; ++k) {
    const int at = in.CurrentPosition();
    if (static_cast<std::size_t>(at) == bytes.size()) break;
    const std::string what = k == 0 ? "the GlobalMetadata" : "node #" + std::to_string(k);
    std::uint32_t len = 0;
    if (!in.ReadVarint32(&len))
      throw FormatError(source + ": truncated length prefix of " + what + " at byte " + std::to_string(at));
    const std::size_t left = bytes.size() - static_cast<std::size_t>(in.CurrentPosition());
    if (len > left)
      throw FormatError(source + ": " + what + " at byte " + std::to_string(at) + " claims " + std::to_string(len) +
                        " bytes but " + std::to_string(left) + " remain (truncated file?)");
    const auto limit = in.PushLimit(static_cast<int>(len));
    if (k == 0) {
      pb::GlobalMetadata md;
      if (!md.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw FormatError(source + ": the first message is not a Chakra GlobalMetadata (not a Chakra .et trace?)");
      g.schema = md.version();
      // Chakra's published versions are 0.0.x (ASTRA-sim writes "0.0.4"); an empty version is what converters
      // that record only attributes write. Anything else has a Node layout this reader was not written for.
      if (!g.schema.empty() && g.schema.rfind("0.0.", 0) != 0)
        throw FormatError(source + ": Chakra schema version '" + printable(g.schema, 40) +
                          "' is not supported (dtsim reads Chakra 0.0.x traces, et_def.proto Node fields 1-10)");
    } else {
      pb::Node n;
      if (!n.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw FormatError(source + ": " + what + " at byte " + std::to_string(at) + " is not a valid Chakra Node");
      g.nodes.emplace_back();
      fill_from_protobuf(n, k - 1, source, g.nodes.back());
    }
    in.PopLimit(limit);
  }
  std::sort(g.nodes.begin(), g.nodes.end(), [](const ExecNode& a, const ExecNode& b) { return a.id < b.id; });
  check_unique_ids(g.nodes, source);
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Files and archives

enum class Want { ANY, PYTORCH_ET, CHAKRA };

ExecGraph parse_any(const std::string& text, const std::string& source, Want want, bool protobuf = false) {
  if (protobuf || is_protobuf_text(text)) {
    if (want == Want::PYTORCH_ET)
      throw FormatError(source + ": not a PyTorch execution trace (it is a Chakra protobuf trace)");
    return build_chakra_et(text, source);
  }
  const std::vector<json> values = parse_json_values(text, source);
  const DocKind kind = detect(values, source);
  if (want == Want::PYTORCH_ET && kind != DocKind::PYTORCH_ET)
    throw FormatError(source + ": not a PyTorch execution trace (missing field 'nodes'; it looks like Chakra JSON)");
  if (want == Want::CHAKRA && kind == DocKind::PYTORCH_ET)
    throw FormatError(source + ": not a Chakra JSON trace (it is a PyTorch execution trace)");
  if (kind == DocKind::PYTORCH_ET) return build_pytorch_et(values.front(), source);
  return build_chakra(values, kind, source);
}

struct Loaded {
  std::string text;
  std::string source;
  bool protobuf = false;  ///< a Chakra .et file or member (by name or content)
};

bool is_protobuf_member(const ArchiveMember& m) {
  return ends_with(m.name, ".et") || (!m.content.empty() && m.content[0] != '{' && looks_like_protobuf(m.content));
}

/// The JSON documents of `path`: the file itself when it is not an archive, else its .json members.
std::vector<Loaded> load_documents(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 && !ec)
    throw FormatError(path + (ends_with(path, ".et") || ends_with(path, ".et.gz")
                                  ? ": empty file (no Chakra GlobalMetadata record)"
                                  : ": empty file (no JSON document)"));
  std::vector<ArchiveMember> members = read_archive_members(path);
  const std::string file_name = std::filesystem::path(path).filename().string();
  std::vector<Loaded> docs;
  if (members.size() == 1 && members[0].name == file_name) {  // not an archive: the (decompressed) file itself
    const bool et = (ends_with(path, ".et") || ends_with(path, ".et.gz")) && !members[0].content.empty() &&
                    members[0].content[0] != '{';
    docs.push_back({std::move(members[0].content), path, et});
    return docs;
  }
  for (auto& m : members) {
    const bool et = is_protobuf_member(m);
    if (et || ends_with(m.name, ".json")) docs.push_back({std::move(m.content), path + ":" + m.name, et});
  }
  if (docs.empty())
    throw FormatError(path + ": archive has no .json or .et member (" + std::to_string(members.size()) + " members)");
  return docs;
}

Loaded load_single(const std::string& path) {
  std::vector<Loaded> docs = load_documents(path);
  if (docs.size() != 1)
    throw FormatError(path + ": archive has " + std::to_string(docs.size()) +
                      " .json / .et members; use import_exec_graph_archive to read them all");
  return std::move(docs.front());
}

}  // namespace

// -------------------------------------------------------------------------------------------------------------------
// Public API

ExecGraph parse_pytorch_et(const std::string& text, const std::string& source) {
  return parse_any(text, source, Want::PYTORCH_ET);
}

ExecGraph parse_chakra_json(const std::string& text, const std::string& source) {
  return parse_any(text, source, Want::CHAKRA);
}

ExecGraph parse_chakra_et(const std::string& bytes, const std::string& source) {
  return build_chakra_et(bytes, source);
}

ExecGraph import_pytorch_et(const std::string& path) {
  Loaded doc = load_single(path);
  return parse_any(doc.text, doc.source, Want::PYTORCH_ET, doc.protobuf);
}

ExecGraph import_chakra_json(const std::string& path) {
  Loaded doc = load_single(path);
  return parse_any(doc.text, doc.source, Want::CHAKRA, doc.protobuf);
}

ExecGraph import_chakra_et(const std::string& path) {
  Loaded doc = load_single(path);
  return parse_chakra_et(doc.text, doc.source);
}

ExecGraph import_exec_graph(const std::string& path) {
  Loaded doc = load_single(path);
  return parse_any(doc.text, doc.source, Want::ANY, doc.protobuf);
}

std::vector<ExecGraph> import_exec_graph_archive(const std::string& path) {
  std::vector<ExecGraph> graphs;
  for (const Loaded& doc : load_documents(path))
    graphs.push_back(parse_any(doc.text, doc.source, Want::ANY, doc.protobuf));
  return graphs;
}

std::vector<std::size_t> topological_order(const ExecGraph& g) {
  const std::size_t n = g.nodes.size();
  std::unordered_map<std::int64_t, std::size_t> index;
  index.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i)
    if (!index.emplace(g.nodes[i].id, i).second)
      throw FormatError(g.source + ": duplicate node id " + std::to_string(g.nodes[i].id));
  auto describe = [&](std::size_t i) {
    return "node " + std::to_string(g.nodes[i].id) + " ('" + printable(g.nodes[i].name, 60) + "')";
  };

  // Edges dep -> node in CSR form; validation in node order, data deps before ctrl deps.
  std::vector<std::size_t> indegree(n, 0), offsets(n + 1, 0);
  std::vector<std::size_t> dep_index;
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto* deps : {&g.nodes[i].data_deps, &g.nodes[i].ctrl_deps})
      for (std::int64_t d : *deps) {
        const char* what = deps == &g.nodes[i].data_deps ? "data" : "control";
        if (d == g.nodes[i].id)
          throw FormatError(g.source + ": " + describe(i) + " has a " + what + " dependency on itself");
        auto it = index.find(d);
        if (it == index.end())
          throw FormatError(g.source + ": " + describe(i) + " has a " + what + " dependency on missing node " +
                            std::to_string(d));
        dep_index.push_back(it->second);
        ++offsets[it->second + 1];
        ++indegree[i];
      }
  }
  for (std::size_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  std::vector<std::size_t> successors(dep_index.size());
  {
    std::vector<std::size_t> fill(offsets.begin(), offsets.end() - 1);
    std::size_t e = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (const auto* deps : {&g.nodes[i].data_deps, &g.nodes[i].ctrl_deps})
        for (std::size_t k = 0; k < deps->size(); ++k) successors[fill[dep_index[e++]]++] = i;
  }

  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<char> emitted(n, 0);
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    emitted[i] = 1;
    for (std::size_t k = offsets[i]; k < offsets[i + 1]; ++k)
      if (--indegree[successors[k]] == 0) ready.push(successors[k]);
  }
  if (order.size() == n) return order;

  // A cycle: from the first node left, follow not-yet-emitted dependencies until a node repeats.
  std::size_t cur = 0;
  while (emitted[cur]) ++cur;
  std::vector<std::size_t> walk;
  std::unordered_map<std::size_t, std::size_t> position;
  while (position.emplace(cur, walk.size()).second) {
    walk.push_back(cur);
    std::size_t next = kNone;
    for (const auto* deps : {&g.nodes[cur].data_deps, &g.nodes[cur].ctrl_deps})
      for (std::int64_t d : *deps) {
        const std::size_t j = index.at(d);
        if (!emitted[j] && next == kNone) next = j;
      }
    DTSIM_ASSERT(next != kNone, "node left by Kahn's algorithm without a pending dependency");
    cur = next;
  }
  const std::size_t start = position.at(cur);
  std::string cycle;
  const std::size_t shown = std::min<std::size_t>(walk.size() - start, 8);
  for (std::size_t k = 0; k < shown; ++k) cycle += std::to_string(g.nodes[walk[start + k]].id) + " -> ";
  if (walk.size() - start > shown) cycle += "... -> ";
  cycle += std::to_string(g.nodes[cur].id);
  throw FormatError(g.source + ": dependency cycle through " + describe(cur) + " (waits on: " + cycle + ")");
}

}  // namespace dtsim
