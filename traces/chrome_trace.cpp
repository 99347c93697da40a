#include "traces/chrome_trace.hpp"

#include <charconv>
#include <cmath>

#include "traces/units.hpp"

namespace dtsim {

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

namespace {
void append_int(std::string& out, std::int64_t v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}
// Microseconds with exactly three decimals from integer nanoseconds: no floating-point rounding.
void append_us(std::string& out, std::int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  append_int(out, ns / 1000);
  std::int64_t frac = ns % 1000;
  if (frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(frac));
    out += buf;
  }
}
}  // namespace

ChromeTraceWriter::ChromeTraceWriter() { out_ = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"; }

void ChromeTraceWriter::begin_event() {
  if (events_++ > 0) out_ += ",\n";
}

void ChromeTraceWriter::process_name(int pid, const std::string& name, int sort_index) {
  begin_event();
  out_ += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"args\":{\"name\":";
  append_json_string(out_, name);
  out_ += "}}";
  begin_event();
  out_ += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"args\":{\"sort_index\":";
  append_int(out_, sort_index);
  out_ += "}}";
}

void ChromeTraceWriter::thread_name(int pid, int tid, const std::string& name) {
  begin_event();
  out_ += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"tid\":";
  append_int(out_, tid);
  out_ += ",\"args\":{\"name\":";
  append_json_string(out_, name);
  out_ += "}}";
}

void ChromeTraceWriter::complete(int pid, int tid, const std::string& name, const std::string& category,
                                 std::int64_t start_ns, std::int64_t dur_ns, const std::vector<TraceArg>& args) {
  begin_event();
  out_ += "{\"ph\":\"X\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"tid\":";
  append_int(out_, tid);
  out_ += ",\"ts\":";
  append_us(out_, start_ns);
  out_ += ",\"dur\":";
  append_us(out_, dur_ns);
  out_ += ",\"name\":";
  append_json_string(out_, name);
  out_ += ",\"cat\":";
  append_json_string(out_, category);
  if (!args.empty()) {
    out_ += ",\"args\":{";
    bool first = true;
    for (const auto& a : args) {
      if (!first) out_ += ',';
      first = false;
      append_json_string(out_, a.key);
      out_ += ':';
      if (a.kind == TraceArg::Kind::INT) append_int(out_, a.i);
      else if (a.kind == TraceArg::Kind::DOUBLE) append_json_number(out_, a.d);
      else append_json_string(out_, a.s);
    }
    out_ += '}';
  }
  out_ += '}';
}

void ChromeTraceWriter::counter(int pid, const std::string& name, std::int64_t ts_ns, const std::string& series,
                                double value) {
  begin_event();
  out_ += "{\"ph\":\"C\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"ts\":";
  append_us(out_, ts_ns);
  out_ += ",\"name\":";
  append_json_string(out_, name);
  out_ += ",\"args\":{";
  append_json_string(out_, series);
  out_ += ':';
  append_json_number(out_, value);
  out_ += "}}";
}

void ChromeTraceWriter::counter(int pid, const std::string& name, std::int64_t ts_ns,
                                const std::vector<std::pair<std::string, double>>& series) {
  begin_event();
  out_ += "{\"ph\":\"C\",\"pid\":";
  append_int(out_, pid);
  out_ += ",\"ts\":";
  append_us(out_, ts_ns);
  out_ += ",\"name\":";
  append_json_string(out_, name);
  out_ += ",\"args\":{";
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (i) out_ += ',';
    append_json_string(out_, series[i].first);
    out_ += ':';
    append_json_number(out_, series[i].second);
  }
  out_ += "}}";
}

std::string ChromeTraceWriter::finish() {
  std::string result = std::move(out_);
  result += "\n],\"otherData\":";
  result += metadata_;
  result += "}\n";
  out_.clear();
  return result;
}

}  // namespace dtsim
