#include "traces/chakra_et_writer.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "chakra_et.pb.h"

namespace dtsim {
namespace {

namespace pb = dtsim::chakra;

void append(google::protobuf::io::CodedOutputStream& out, const google::protobuf::MessageLite& m) {
  out.WriteVarint64(m.ByteSizeLong());
  m.SerializeWithCachedSizes(&out);
}

/// An integer attribute as Chakra's converters type it (int32), or int64 when it does not fit (read back alike).
void set_int(pb::AttributeProto* a, std::int64_t v) {
  if (v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max())
    a->set_int32_val(static_cast<std::int32_t>(v));
  else a->set_int64_val(v);
}

pb::CollectiveCommType comm_type_of(const std::string& op) {
  if (op == "reduce") return pb::REDUCE;
  if (op == "all-gather") return pb::ALL_GATHER;
  if (op == "broadcast") return pb::BROADCAST;
  if (op == "all-to-all") return pb::ALL_TO_ALL;
  if (op == "reduce-scatter") return pb::REDUCE_SCATTER;
  return pb::ALL_REDUCE;
}

}  // namespace

std::string chakra_et_bytes(const ExecGraph& g) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sink(&bytes);
    google::protobuf::io::CodedOutputStream out(&sink);
    pb::GlobalMetadata meta;
    meta.set_version("0.0.4");
    append(out, meta);
    pb::Node n;
    for (const ExecNode& e : g.nodes) {
      n.Clear();
      n.set_id(static_cast<std::uint64_t>(e.id));
      n.set_name(e.name);
      for (std::int64_t d : e.ctrl_deps) n.add_ctrl_deps(static_cast<std::uint64_t>(d));
      for (std::int64_t d : e.data_deps) n.add_data_deps(static_cast<std::uint64_t>(d));
      if (e.duration_ns >= 0) n.set_duration_micros(static_cast<std::uint64_t>(std::llround(e.duration_ns / 1e3)));
      auto attr = [&n](const char* name) {
        pb::AttributeProto* a = n.add_attr();
        a->set_name(name);
        return a;
      };
      attr("is_cpu_op")->set_bool_val(!e.gpu);
      if (e.flops > 0) attr("num_ops")->set_int64_val(static_cast<std::int64_t>(std::llround(e.flops)));
      switch (e.kind) {
        case ExecNodeKind::COMPUTE: n.set_type(pb::COMP_NODE); break;
        case ExecNodeKind::MEMORY: n.set_type(pb::MEM_LOAD_NODE); break;
        case ExecNodeKind::OTHER: n.set_type(pb::METADATA_NODE); break;
        case ExecNodeKind::COMMUNICATION: {
          const bool send = e.comm.op == "send", recv = e.comm.op == "recv";
          n.set_type(send ? pb::COMM_SEND_NODE : recv ? pb::COMM_RECV_NODE : pb::COMM_COLL_NODE);
          attr("comm_size")->set_int64_val(static_cast<std::int64_t>(std::llround(e.comm.bytes)));
          if (send || recv) {
            set_int(attr("comm_src"), send ? g.rank : e.peer);
            set_int(attr("comm_dst"), send ? e.peer : g.rank);
            set_int(attr("comm_tag"), e.tag);
          } else {
            attr("comm_type")->set_int64_val(comm_type_of(e.comm.op));
            if (!e.comm.process_group.empty()) attr("pg_name")->set_string_val(e.comm.process_group);
            if (e.comm.group_size > 0) attr("comm_group_size")->set_int64_val(e.comm.group_size);
          }
          break;
        }
      }
      append(out, n);
    }
  }
  return bytes;
}

}  // namespace dtsim
