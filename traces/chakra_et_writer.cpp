#include "traces/chakra_et_writer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "chakra_et.pb.h"
#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
namespace {

namespace pb = dtsim::chakra;

/// Appends one message preceded by its length as a varint (Chakra's protolib encodeMessage framing).
void append_framed(const google::protobuf::MessageLite& m, std::string& out) {
  std::string body;
  m.SerializeToString(&body);
  std::uint64_t len = body.size();
  while (len >= 0x80) {
    out.push_back(static_cast<char>((len & 0x7f) | 0x80));
    len >>= 7;
  }
  out.push_back(static_cast<char>(len));
  out += body;
}

/// CollectiveCommType of a normalised collective op; -1 when Chakra has none.
int comm_type_of(const std::string& op) {
  if (op == "all-reduce") return pb::ALL_REDUCE;
  if (op == "reduce") return pb::REDUCE;
  if (op == "all-gather") return pb::ALL_GATHER;
  if (op == "broadcast") return pb::BROADCAST;
  if (op == "all-to-all") return pb::ALL_TO_ALL;
  if (op == "reduce-scatter") return pb::REDUCE_SCATTER;
  if (op == "barrier") return pb::BARRIER;
  return -1;
}

std::uint64_t as_u64(std::int64_t v) { return v < 0 ? 0 : static_cast<std::uint64_t>(v); }

std::int64_t rounded(double v) {
  if (!(v > 0)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
  return std::llround(v);
}

pb::AttributeProto* attr(pb::Node& n, const char* name) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  return a;
}

}  // namespace

std::string chakra_et_bytes(const ExecGraph& g) {
  std::string out;
  pb::GlobalMetadata md;
  md.set_version("0.0.4");
  append_framed(md, out);
  for (const ExecNode& e : g.nodes) {
    DTSIM_ASSERT(e.id >= 0, "negative node id " << e.id << " in " << g.source);
    pb::Node n;
    n.set_id(static_cast<std::uint64_t>(e.id));
    n.set_name(e.name);
    for (auto d : e.ctrl_deps) n.add_ctrl_deps(as_u64(d));
    for (auto d : e.data_deps) n.add_data_deps(as_u64(d));
    if (e.duration_ns > 0) n.set_duration_micros(as_u64(rounded(static_cast<double>(e.duration_ns) / 1000.0)));
    // A metadata node is a CPU op: ASTRA-sim's workload layer issues only CPU ops, compute, memory and communication
    // nodes (astra-sim/workload/Workload.cc, Workload::issue), so a GPU metadata node would never complete there.
    attr(n, "is_cpu_op")->set_bool_val(!e.gpu || e.kind == ExecNodeKind::OTHER);
    switch (e.kind) {
      case ExecNodeKind::COMPUTE:
        n.set_type(pb::COMP_NODE);
        if (e.flops > 0) attr(n, "num_ops")->set_int64_val(rounded(e.flops));
        if (e.tensor_bytes > 0) attr(n, "tensor_size")->set_uint64_val(as_u64(rounded(e.tensor_bytes)));
        break;
      case ExecNodeKind::COMMUNICATION:
        if (e.comm.op == "send" || e.comm.op == "recv") {
          n.set_type(e.comm.op == "send" ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE);
          attr(n, "comm_size")->set_int64_val(rounded(e.comm.bytes));
          if (e.comm_src >= 0) attr(n, "comm_src")->set_int32_val(static_cast<std::int32_t>(e.comm_src));
          if (e.comm_dst >= 0) attr(n, "comm_dst")->set_int32_val(static_cast<std::int32_t>(e.comm_dst));
          if (e.comm_tag >= 0) attr(n, "comm_tag")->set_int32_val(static_cast<std::int32_t>(e.comm_tag));
        } else {
          const int type = comm_type_of(e.comm.op);
          if (type < 0)
            throw ConfigError(g.source + ": node " + std::to_string(e.id) + " ('" + e.name + "'): collective '" +
                              e.comm.op + "' has no Chakra CollectiveCommType");
          n.set_type(pb::COMM_COLL_NODE);
          attr(n, "comm_type")->set_int64_val(type);
          // Chakra's comm_size of an all-gather is each rank's input (its PyTorch converter takes the input
          // tensor's size; ASTRA-sim gathers comm_size from every member), dtsim's the gathered output.
          const bool per_rank = type == pb::ALL_GATHER && e.comm.group_size > 1;
          attr(n, "comm_size")->set_int64_val(rounded(per_rank ? e.comm.bytes / e.comm.group_size : e.comm.bytes));
          if (!e.comm.process_group.empty()) attr(n, "pg_name")->set_string_val(e.comm.process_group);
        }
        break;
      case ExecNodeKind::MEMORY:
        n.set_type(pb::MEM_LOAD_NODE);
        if (e.tensor_bytes > 0) attr(n, "tensor_size")->set_uint64_val(as_u64(rounded(e.tensor_bytes)));
        break;
      case ExecNodeKind::OTHER: n.set_type(pb::METADATA_NODE); break;
    }
    append_framed(n, out);
  }
  return out;
}

std::string chakra_comm_groups_json(const ChakraCommGroups& groups) {
  // Written by hand: nlohmann's object would sort the ids as strings ("10" before "2").
  std::string out = "{";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    out += nlohmann::json(groups[i].first).dump() + ": [";
    for (std::size_t k = 0; k < groups[i].second.size(); ++k)
      out += (k ? ", " : "") + std::to_string(groups[i].second[k]);
    out += "]";
  }
  out += groups.empty() ? "}\n" : "\n}\n";
  return out;
}

ChakraCommGroups read_chakra_comm_groups(const std::string& path) {
  const nlohmann::json j = json_util::read_file(path);
  if (!j.is_object())
    throw FormatError(path + ": a communicator-group file is a JSON object {\"<id>\": [ranks]}, found " +
                      j.type_name());
  ChakraCommGroups out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& id = it.key();
    if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
      throw FormatError(path + ": group id '" + id + "' is not a decimal integer");
    if (!it.value().is_array()) throw FormatError(path + ": group '" + id + "' is not a list of ranks");
    std::vector<int> ranks;
    for (const auto& r : it.value()) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > 1 << 30)
        throw FormatError(path + ": group '" + id + "' holds " + r.dump() + ", not a rank");
      ranks.push_back(r.get<int>());
    }
    out.emplace_back(id, std::move(ranks));
  }
  // In numeric order of the ids (the JSON object's own order is not kept).
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
  });
  return out;
}

}  // namespace dtsim
