#include "traces/perfetto_trace.hpp"

#include <unordered_map>

#include "perfetto_trace.pb.h"  // generated from traces/perfetto_trace.proto (traces/CMakeLists.txt)

namespace dtsim {

namespace pp = perfetto::protos;

namespace {
// The one packet sequence of the file: interned names are valid on it from the first packet on.
constexpr std::uint32_t kSequenceId = 1;

void append_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
}  // namespace

// An interning table: a string's id (from 1; 0 means "none" in Perfetto) and whether it is new.
// Outside the anonymous namespace: PerfettoTraceWriter::Impl holds it (GCC's -Wsubobject-linkage in a unity build).
struct PerfettoInterner {
  std::unordered_map<std::string, std::uint64_t> ids;
  std::pair<std::uint64_t, bool> get(const std::string& s) {
    auto [it, inserted] = ids.try_emplace(s, ids.size() + 1);
    return {it->second, inserted};
  }
};

struct PerfettoTraceWriter::Impl {
  pp::TracePacket packet;                       // reused for every packet
  std::unique_ptr<pp::TrackEvent> spare_event;  // the last packet's track event, cleared, for the next one
  std::string out;
  PerfettoInterner names, categories, arg_names;
  std::uint64_t next_uuid = 1;
  bool first = true;

  // The packet's track event, reusing the previous one's storage (a oneof member is freed by Clear()).
  pp::TrackEvent* event() {
    if (spare_event) packet.set_allocated_track_event(spare_event.release());
    return packet.mutable_track_event();
  }

  // Appends `packet` as one `repeated TracePacket packet = 1` record of a Trace, serialized in place, and clears it.
  void emit(bool needs_interned_state) {
    packet.set_trusted_packet_sequence_id(kSequenceId);
    std::uint32_t flags = 0;
    if (first) flags |= pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED;
    if (needs_interned_state) flags |= pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE;
    if (flags) packet.set_sequence_flags(flags);
    first = false;
    const std::size_t size = packet.ByteSizeLong();
    out += static_cast<char>((1 << 3) | 2);  // field 1, wire type 2 (length-delimited)
    append_varint(out, size);
    const std::size_t at = out.size();
    out.resize(at + size);
    packet.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.data() + at));
    if (packet.has_track_event()) {
      spare_event.reset(packet.release_track_event());
      spare_event->Clear();
    }
    packet.Clear();
  }
};

PerfettoTraceWriter::PerfettoTraceWriter() : impl_(std::make_unique<Impl>()) {}
PerfettoTraceWriter::~PerfettoTraceWriter() = default;

std::uint64_t PerfettoTraceWriter::process_track(int pid, const std::string& name, int sort_index) {
  const std::uint64_t uuid = impl_->next_uuid++;
  auto* td = impl_->packet.mutable_track_descriptor();
  td->set_uuid(uuid);
  auto* p = td->mutable_process();
  p->set_pid(pid);
  p->set_process_name(name);
  p->set_legacy_sort_index(sort_index);
  impl_->emit(false);
  ++packets_;
  return uuid;
}

std::uint64_t PerfettoTraceWriter::thread_track(std::uint64_t process_uuid, int pid, int tid, const std::string& name,
                                                int sort_index) {
  const std::uint64_t uuid = impl_->next_uuid++;
  auto* td = impl_->packet.mutable_track_descriptor();
  td->set_uuid(uuid);
  td->set_parent_uuid(process_uuid);
  auto* t = td->mutable_thread();
  t->set_pid(pid);
  t->set_tid(tid);
  t->set_thread_name(name);
  t->set_legacy_sort_index(sort_index);
  impl_->emit(false);
  ++packets_;
  return uuid;
}

std::uint64_t PerfettoTraceWriter::counter_track(std::uint64_t parent_uuid, const std::string& name, CounterUnit unit) {
  const std::uint64_t uuid = impl_->next_uuid++;
  auto* td = impl_->packet.mutable_track_descriptor();
  td->set_uuid(uuid);
  if (parent_uuid) td->set_parent_uuid(parent_uuid);
  td->set_name(name);
  auto* c = td->mutable_counter();
  if (unit == CounterUnit::BYTES) c->set_unit(pp::CounterDescriptor::UNIT_SIZE_BYTES);
  impl_->emit(false);
  ++packets_;
  return uuid;
}

void PerfettoTraceWriter::slice_begin(std::uint64_t track, std::int64_t ts_ns, const std::string& name,
                                      const std::vector<std::string>& categories, const std::vector<TraceArg>& args) {
  Impl& m = *impl_;
  m.packet.set_timestamp(static_cast<std::uint64_t>(ts_ns));
  auto* ev = m.event();
  ev->set_type(pp::TrackEvent::TYPE_SLICE_BEGIN);
  ev->set_track_uuid(track);
  const auto [name_iid, new_name] = m.names.get(name);
  ev->set_name_iid(name_iid);
  if (new_name) {
    auto* e = m.packet.mutable_interned_data()->add_event_names();
    e->set_iid(name_iid);
    e->set_name(name);
  }
  for (const auto& c : categories) {
    const auto [iid, fresh] = m.categories.get(c);
    ev->add_category_iids(iid);
    if (fresh) {
      auto* e = m.packet.mutable_interned_data()->add_event_categories();
      e->set_iid(iid);
      e->set_name(c);
    }
  }
  for (const auto& a : args) {
    const auto [iid, fresh] = m.arg_names.get(a.key);
    if (fresh) {
      auto* e = m.packet.mutable_interned_data()->add_debug_annotation_names();
      e->set_iid(iid);
      e->set_name(a.key);
    }
    auto* d = ev->add_debug_annotations();
    d->set_name_iid(iid);
    switch (a.kind) {
      case TraceArg::Kind::INT: d->set_int_value(a.i); break;
      case TraceArg::Kind::DOUBLE: d->set_double_value(a.d); break;
      case TraceArg::Kind::STRING: d->set_string_value(a.s); break;
    }
  }
  m.emit(true);
  ++packets_;
}

void PerfettoTraceWriter::slice_end(std::uint64_t track, std::int64_t ts_ns) {
  impl_->packet.set_timestamp(static_cast<std::uint64_t>(ts_ns));
  auto* ev = impl_->event();
  ev->set_type(pp::TrackEvent::TYPE_SLICE_END);
  ev->set_track_uuid(track);
  impl_->emit(false);
  ++packets_;
}

void PerfettoTraceWriter::counter(std::uint64_t track, std::int64_t ts_ns, double value) {
  impl_->packet.set_timestamp(static_cast<std::uint64_t>(ts_ns));
  auto* ev = impl_->event();
  ev->set_type(pp::TrackEvent::TYPE_COUNTER);
  ev->set_track_uuid(track);
  ev->set_double_counter_value(value);
  impl_->emit(false);
  ++packets_;
}

void PerfettoTraceWriter::counter(std::uint64_t track, std::int64_t ts_ns, std::int64_t value) {
  impl_->packet.set_timestamp(static_cast<std::uint64_t>(ts_ns));
  auto* ev = impl_->event();
  ev->set_type(pp::TrackEvent::TYPE_COUNTER);
  ev->set_track_uuid(track);
  ev->set_counter_value(value);
  impl_->emit(false);
  ++packets_;
}

void PerfettoTraceWriter::reserve(std::size_t bytes) { impl_->out.reserve(bytes); }

std::string PerfettoTraceWriter::finish() {
  std::string done = std::move(impl_->out);
  impl_->out.clear();
  return done;
}

}  // namespace dtsim
