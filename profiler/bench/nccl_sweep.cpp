// dtsim_nccl_sweep: NCCL collective bandwidth over message sizes on all visible GPUs of one process
// (ncclCommInitAll), printed in the text format of NVIDIA's nccl-tests so that traces/nccl_tests.hpp reads it:
//   # Collective test starting: all_reduce_perf ...
//   #  Rank  0 Group  0 Pid ... device  0 [...] NVIDIA H100 ...
//   #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw
//   #wrong
//            8             2     float     sum      -1    12.34    0.00    0.00    N/A    12.01    0.00    0.00    N/A
// Columns: size in bytes, element count, then out-of-place and in-place time (us per call, mean over the timed
// iterations), algbw = size / time and busbw = algbw * (2(n-1)/n for all-reduce, (n-1)/n for all-gather and
// reduce-scatter), in GB/s. Results are not validated (#wrong is N/A, as nccl-tests -c 0 prints).
// One block per collective; the parser reads one collective per file, hence --output-dir.
//
// Usage: dtsim_nccl_sweep [--op all_reduce,all_gather,reduce_scatter] [--min-bytes 8] [--max-bytes 1G]
//                         [--factor 2] [--warmup 5] [--iters 20] [--gpus N] [--output-dir DIR]
// With --output-dir, each collective goes to DIR/<op>_perf.txt; otherwise all blocks go to stdout.
// With one GPU the communicator has one rank: NCCL still runs (a local copy) and busbw is 0 by definition.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Failure(std::string(what) + ": " + ncclGetErrorString(r));
}

struct Options {
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter"};
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{1} << 30;
  std::size_t factor = 2;
  int warmup = 5;
  int iters = 20;
  int gpus = 0;  ///< 0: all visible
  std::string output_dir;
};

std::size_t parse_bytes(const std::string& s) {
  std::size_t pos = 0;
  const unsigned long long v = std::stoull(s, &pos);
  std::size_t mult = 1;
  const std::string suffix = s.substr(pos);
  if (suffix == "K" || suffix == "k") mult = std::size_t{1} << 10;
  else if (suffix == "M" || suffix == "m") mult = std::size_t{1} << 20;
  else if (suffix == "G" || suffix == "g") mult = std::size_t{1} << 30;
  else if (!suffix.empty()) throw std::invalid_argument("bad size '" + s + "'");
  return static_cast<std::size_t>(v) * mult;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--op") {
      o.ops.clear();
      std::istringstream in(value());
      std::string op;
      while (std::getline(in, op, ',')) {
        if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter")
          throw std::invalid_argument("unknown collective '" + op + "'");
        o.ops.push_back(op);
      }
    } else if (a == "--min-bytes" || a == "-b") {
      o.min_bytes = parse_bytes(value());
    } else if (a == "--max-bytes" || a == "-e") {
      o.max_bytes = parse_bytes(value());
    } else if (a == "--factor" || a == "-f") {
      o.factor = std::stoul(value());
    } else if (a == "--warmup" || a == "-w") {
      o.warmup = std::stoi(value());
    } else if (a == "--iters" || a == "-n") {
      o.iters = std::stoi(value());
    } else if (a == "--gpus" || a == "-g") {
      o.gpus = std::stoi(value());
    } else if (a == "--output-dir") {
      o.output_dir = value();
    } else if (a == "-h" || a == "--help") {
      throw std::invalid_argument("");
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'");
    }
  }
  if (o.ops.empty() || o.min_bytes == 0 || o.max_bytes < o.min_bytes || o.factor < 2 || o.warmup < 0 || o.iters < 1 ||
      o.gpus < 0)
    throw std::invalid_argument("bad option values");
  return o;
}

/// Per-GPU state of the single-process communicator clique.
struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
};

class Sweep {
public:
  explicit Sweep(const Options& o) : o_(o) {
    int visible = 0;
    check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
    if (visible == 0) throw Failure("no CUDA device visible");
    const int n = o.gpus > 0 ? std::min(o.gpus, visible) : visible;
    std::vector<int> devs(static_cast<std::size_t>(n));
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devs[static_cast<std::size_t>(i)] = i;
    check(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll");
    ranks_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      Rank& r = ranks_[static_cast<std::size_t>(i)];
      r.device = i;
      r.comm = comms[static_cast<std::size_t>(i)];
      check(cudaSetDevice(i), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaMalloc(reinterpret_cast<void**>(&r.send), o.max_bytes), "cudaMalloc send");
      check(cudaMalloc(reinterpret_cast<void**>(&r.recv), o.max_bytes), "cudaMalloc recv");
      check(cudaMemset(r.send, 0, o.max_bytes), "cudaMemset");
      check(cudaMemset(r.recv, 0, o.max_bytes), "cudaMemset");
    }
    for (Rank& r : ranks_) {
      check(cudaSetDevice(r.device), "cudaSetDevice");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  ~Sweep() {
    for (Rank& r : ranks_) {
      cudaSetDevice(r.device);
      cudaFree(r.send);
      cudaFree(r.recv);
      cudaStreamDestroy(r.stream);
      ncclCommDestroy(r.comm);
    }
  }
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  int ranks() const { return static_cast<int>(ranks_.size()); }

  /// The nccl-tests text block of one collective.
  std::string run(const std::string& op) {
    const int n = ranks();
    std::string out;
    char line[1024];  // room for a 255-byte host name and a 256-byte device name (-Wformat-truncation)
    int version = 0;
    ncclGetVersion(&version);
    std::snprintf(line, sizeof line,
                  "# Collective test starting: %s_perf (dtsim_nccl_sweep, NCCL %d)\n"
                  "# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
                  "agg iters: 1 validation: 0 graph: 0\n#\n# Using devices\n",
                  op.c_str(), version, n, o_.min_bytes, o_.max_bytes, o_.factor, o_.warmup, o_.iters);
    out += line;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    for (const Rank& r : ranks_) {
      cudaDeviceProp prop{};
      check(cudaGetDeviceProperties(&prop, r.device), "cudaGetDeviceProperties");
      std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%04x:%02x:%02x.0] %s\n",
                    r.device, static_cast<int>(getpid()), host, r.device, prop.pciDomainID, prop.pciBusID,
                    prop.pciDeviceID, prop.name);
      out += line;
    }
    if (n == 1)
      out += "# Note: one visible GPU: a single-rank communicator; the collective is a local copy, busbw is 0\n";
    out += "#\n";
    out +=
        "#                                                              out-of-place                       "
        "in-place          \n";
    out +=
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n";
    out +=
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
        "  (GB/s)       \n";
    const double bus_factor = op == "all_reduce" ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
    double busbw_sum = 0;
    int rows = 0;
    for (std::size_t size = o_.min_bytes; size <= o_.max_bytes; size *= o_.factor) {
      // Element counts as nccl-tests: all-gather and reduce-scatter move equal float chunks per rank.
      std::size_t count = size / sizeof(float);
      if (op != "all_reduce") count = count / static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
      if (count == 0) continue;
      const std::size_t bytes = count * sizeof(float);
      const double oop_us = time_us(op, count, false);
      const double ip_us = time_us(op, count, true);
      const double oop_algbw = static_cast<double>(bytes) / oop_us / 1e3;  // bytes/us / 1e3 = GB/s
      const double ip_algbw = static_cast<double>(bytes) / ip_us / 1e3;
      std::snprintf(line, sizeof line,
                    "%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %5s  %7.2f  %6.2f  %6.2f  %5s\n", bytes, count,
                    "float", op == "all_gather" ? "none" : "sum", -1, oop_us, oop_algbw, oop_algbw * bus_factor, "N/A",
                    ip_us, ip_algbw, ip_algbw * bus_factor, "N/A");
      out += line;
      busbw_sum += oop_algbw * bus_factor;
      ++rows;
      if (size > o_.max_bytes / o_.factor) break;  // the next size would overflow or exceed the maximum
    }
    out += "# Out of bounds values : N/A (not validated)\n";
    std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %g \n#\n", rows ? busbw_sum / rows : 0.0);
    out += line;
    return out;
  }

private:
  /// Launches the collective once on every rank, in one NCCL group.
  void launch(const std::string& op, std::size_t count, bool in_place) {
    const auto n = static_cast<std::size_t>(ranks());
    check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < n; ++i) {
      Rank& r = ranks_[i];
      if (op == "all_reduce") {
        void* dst = in_place ? r.send : r.recv;
        check(ncclAllReduce(r.send, dst, count, ncclFloat, ncclSum, r.comm, r.stream), "ncclAllReduce");
      } else if (op == "all_gather") {
        const std::size_t chunk = count / n;  // elements each rank contributes
        const void* src = in_place ? r.recv + i * chunk * sizeof(float) : r.send;
        check(ncclAllGather(src, r.recv, chunk, ncclFloat, r.comm, r.stream), "ncclAllGather");
      } else {
        const std::size_t chunk = count / n;  // elements each rank receives
        void* dst = in_place ? r.send + i * chunk * sizeof(float) : r.recv;
        check(ncclReduceScatter(r.send, dst, chunk, ncclFloat, ncclSum, r.comm, r.stream), "ncclReduceScatter");
      }
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
  }

  void sync() {
    for (Rank& r : ranks_) check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
  }

  /// Mean microseconds per call over the timed iterations, host clock around launches and synchronization.
  double time_us(const std::string& op, std::size_t count, bool in_place) {
    for (int i = 0; i < o_.warmup; ++i) launch(op, count, in_place);
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) launch(op, count, in_place);
    sync();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters;
  }

  const Options& o_;
  std::vector<Rank> ranks_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_args(argc, argv);
  } catch (const std::exception& e) {
    if (*e.what()) std::fprintf(stderr, "dtsim_nccl_sweep: %s\n", e.what());
    std::fprintf(stderr,
                 "usage: dtsim_nccl_sweep [--op all_reduce,all_gather,reduce_scatter] [--min-bytes 8] "
                 "[--max-bytes 1G]\n                        [--factor 2] [--warmup 5] [--iters 20] [--gpus N] "
                 "[--output-dir DIR]\n");
    return 2;
  }
  try {
    if (!o.output_dir.empty()) {  // created before any GPU work, so a bad path fails at once
      std::error_code ec;
      std::filesystem::create_directories(o.output_dir, ec);
      if (ec) throw Failure("cannot create '" + o.output_dir + "': " + ec.message());
    }
    Sweep sweep(o);
    std::fprintf(stderr, "dtsim_nccl_sweep: %d GPU%s%s\n", sweep.ranks(), sweep.ranks() == 1 ? "" : "s",
                 sweep.ranks() == 1 ? " (single-rank communicator: collectives are local copies)" : "");
    for (const std::string& op : o.ops) {
      const std::string text = sweep.run(op);
      if (o.output_dir.empty()) {
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
      } else {
        const std::string path = o.output_dir + "/" + op + "_perf.txt";
        std::ofstream f(path);
        f << text;
        if (!f) throw Failure("cannot write '" + path + "'");
        std::fprintf(stderr, "dtsim_nccl_sweep: wrote %s\n", path.c_str());
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim_nccl_sweep: error: %s\n", e.what());
    return 1;
  }
}
