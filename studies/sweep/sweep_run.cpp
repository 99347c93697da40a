#include "studies/sweep/sweep_run.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "traces/error.hpp"

namespace dtsim::sim::sweep {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// Replaces `path` atomically: temporary file, fsync, rename.
void atomic_write(const fs::path& path, const std::string& content) {
  const std::string tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError("cannot write '" + tmp + "': " + std::strerror(errno));
  const bool ok = write_all(fd, content.data(), content.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw ConfigError("cannot write '" + path.string() + "': " + std::strerror(errno));
  }
}

std::string dump(const Row& r) { return r.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace); }

// ---- Rows on disk --------------------------------------------------------------------------------------------

using RowMap = std::unordered_map<std::string, Row>;

/// Reads the complete lines of a results file into `rows` (first row of an id wins). With `own`, an unterminated
/// last line (a write cut by a kill) is truncated away so that appends start on a fresh line.
void read_results(const fs::path& file, bool own, RowMap& rows) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::size_t end = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (own && end < text.size()) fs::resize_file(file, end);
  std::size_t pos = 0;
  while (pos < end) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    Row r = Row::parse(line, nullptr, false);
    if (r.is_discarded() || !r.is_object() || !r.contains("id") || !r["id"].is_string())
      throw FormatError(file.string() + ": a line is not a result row; repair or remove it");
    const std::string id = r["id"].get<std::string>();
    rows.emplace(id, std::move(r));
  }
}

bool is_results_file(const std::string& name) {
  return name == "results.jsonl" ||
         (name.rfind("results.rank-", 0) == 0 && name.size() > 19 && name.compare(name.size() - 6, 6, ".jsonl") == 0);
}

// ---- Progress ------------------------------------------------------------------------------------------------

class Progress {
public:
  Progress(std::ostream* os, std::size_t total) : os_(os), total_(total), tty_(::isatty(2) != 0), t0_(Clock::now()) {}
  void update(std::size_t done, bool force = false) {
    if (!os_ || total_ == 0) return;
    const double t = seconds_since(t0_);
    const double rate = t > 0 ? done / t * 60.0 : 0;
    const double eta = done > 0 ? t / done * (total_ - done) : 0;
    char line[200];
    if (tty_) {
      if (!force && t - last_ < 0.1) return;
      const int width = 30, fill = static_cast<int>(width * done / total_);
      std::snprintf(line, sizeof line, "\r\033[Ksweep [%s%s] %zu/%zu %3.0f%% | %.0f/min | ETA %s",
                    std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(), done, total_,
                    100.0 * done / total_, rate, clock(eta).c_str());
    } else {
      const std::size_t step = 20 * done / total_;  // every 5%
      if (!force && step == last_step_ && t - last_ < 10) return;
      last_step_ = step;
      std::snprintf(line, sizeof line, "sweep: %zu/%zu done (%.0f%%), %.0f scenarios/min, ETA %s\n", done, total_,
                    100.0 * done / total_, rate, clock(eta).c_str());
    }
    last_ = t;
    last_done_ = done;
    *os_ << line << std::flush;
  }
  void finish(std::size_t done) {
    if (done != last_done_) update(done, true);
    if (os_ && tty_ && total_ > 0) *os_ << "\n" << std::flush;
  }

private:
  static std::string clock(double s) {
    const long v = std::lround(s);
    char b[32];
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    return b;
  }
  std::ostream* os_;
  std::size_t total_;
  bool tty_;
  Clock::time_point t0_;
  double last_ = -1;
  std::size_t last_step_ = ~std::size_t{0}, last_done_ = ~std::size_t{0};
};

// ---- Workers -------------------------------------------------------------------------------------------------

struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;  // scenario numbers go down `to`, rows come back on `from`
  int task = -1;           // position in Expansion::scenarios, -1 when idle
  std::string buf;
  Clock::time_point started;
};

/// The worker's loop: read a scenario number, run it, send [u32 length][row JSON]; exit after a flow scenario
/// (SimGrid ran) and when the driver closes the pipe or is gone.
/// Test hook: DTSIM_SWEEP_TEST_CRASH=INDEX makes the worker kill itself on that scenario (tests/cli/sweep_resume.sh).
[[noreturn]] void worker_main(const Expansion& ex, int in, int out) {
  // Keep freed memory in this long-lived process instead of returning it to the kernel after every scenario: the
  // next scenario's task graph reuses pages that are already mapped (page faults and munmap were ~25% of an
  // analytic scenario's time).
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const char* crash = std::getenv("DTSIM_SWEEP_TEST_CRASH");
  const int crash_index = crash && *crash ? std::atoi(crash) : -1;
  for (;;) {
    std::uint32_t task = 0;
    if (!read_all(in, reinterpret_cast<char*>(&task), sizeof task)) ::_exit(0);
    const Scenario& s = ex.scenarios.at(task);
    if (s.index == crash_index) ::raise(SIGKILL);
    const std::string row = dump(run_scenario(ex, s));
    const std::uint32_t len = static_cast<std::uint32_t>(row.size());
    std::string msg(reinterpret_cast<const char*>(&len), sizeof len);
    msg += row;
    if (!write_all(out, msg.data(), msg.size())) ::_exit(1);
    if (s.network == NetworkMode::FLOW) ::_exit(0);
  }
}

class Pool {
public:
  Pool(const Expansion& ex, int n) : ex_(ex), workers_(static_cast<std::size_t>(n)) {}
  ~Pool() {
    for (auto& w : workers_) {
      if (w.pid > 0) ::kill(w.pid, SIGKILL);
      reap(w);
    }
  }
  std::vector<Worker>& workers() { return workers_; }

  /// Hands `task` to `w`, forking a worker first if `w` has none (or its worker died while idle).
  void assign(Worker& w, int task) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (w.pid < 0) spawn(w);
      const std::uint32_t t = static_cast<std::uint32_t>(task);
      if (write_all(w.to, reinterpret_cast<const char*>(&t), sizeof t)) {
        w.task = task;
        w.started = Clock::now();
        w.buf.clear();
        return;
      }
      reap(w);
    }
    throw ConfigError("sweep: cannot start a worker process");
  }

  /// Closes the pipes and waits for the worker; returns its wait status (0 if there was none).
  int reap(Worker& w) {
    int status = 0;
    if (w.to >= 0) ::close(w.to);
    if (w.from >= 0) ::close(w.from);
    if (w.pid > 0)
      while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {}
    w.pid = -1, w.to = -1, w.from = -1;
    return status;
  }

private:
  void spawn(Worker& w) {
    int down[2], up[2];
    if (::pipe2(down, O_CLOEXEC) != 0) throw ConfigError(std::string("sweep: pipe: ") + std::strerror(errno));
    if (::pipe2(up, O_CLOEXEC) != 0) {
      ::close(down[0]), ::close(down[1]);
      throw ConfigError(std::string("sweep: pipe: ") + std::strerror(errno));
    }
    std::fflush(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw ConfigError(std::string("sweep: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(0);
      ::signal(SIGPIPE, SIG_DFL);
      ::close(down[1]), ::close(up[0]);
      for (const auto& o : workers_) {  // other workers' pipes: keep EOF detection exact
        if (o.to >= 0) ::close(o.to);
        if (o.from >= 0) ::close(o.from);
      }
      worker_main(ex_, down[0], up[1]);
    }
    ::close(down[0]), ::close(up[1]);
    w.pid = pid, w.to = down[1], w.from = up[0];
  }

  const Expansion& ex_;
  std::vector<Worker> workers_;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

struct ShardStats {
  std::size_t resumed = 0, simulated = 0, retried = 0;
  double wall_s = 0;
};

/// Runs `tasks` (positions in ex.scenarios) on `jobs` workers; `record` gets every finished row.
void execute(const Expansion& ex, const std::vector<int>& tasks, const RunOptions& opt, std::ostream* progress,
             const std::function<void(Row&&)>& record, ShardStats& stats) {
  const auto old_pipe = ::signal(SIGPIPE, SIG_IGN);  // a dead worker makes write() fail, not kill the driver
  Pool pool(ex, std::max(1, std::min<int>(opt.jobs, static_cast<int>(tasks.size()))));
  std::deque<int> queue(tasks.begin(), tasks.end());
  std::unordered_map<int, int> deaths;
  Progress bar(progress, tasks.size());
  std::size_t done = 0;
  // A finished worker gets its next scenario before the row is recorded (write + fsync), so it does not wait.
  auto finish = [&](Worker& w, Row&& row) {
    w.task = -1;
    if (!queue.empty()) {
      const int t = queue.front();
      queue.pop_front();
      pool.assign(w, t);
    }
    record(std::move(row));
    ++done;
  };
  for (;;) {
    bool busy = false;
    for (auto& w : pool.workers()) {
      if (w.task < 0 && !queue.empty()) {
        const int t = queue.front();
        queue.pop_front();
        pool.assign(w, t);
      }
      busy = busy || w.task >= 0;
    }
    if (!busy) break;
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (auto& w : pool.workers())
      if (w.task >= 0) {
        fds.push_back({w.from, POLLIN, 0});
        owners.push_back(&w);
      }
    const int ready = ::poll(fds.data(), fds.size(), 200);
    if (ready < 0 && errno != EINTR) throw ConfigError(std::string("sweep: poll: ") + std::strerror(errno));
    for (std::size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Worker& w = *owners[i];
      char chunk[65536];
      const ssize_t n = ::read(w.from, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        w.buf.append(chunk, static_cast<std::size_t>(n));
        std::uint32_t len = 0;
        if (w.buf.size() < sizeof len) continue;
        std::memcpy(&len, w.buf.data(), sizeof len);
        if (w.buf.size() < sizeof len + len) continue;
        Row row = Row::parse(w.buf.substr(sizeof len, len));
        if (ex.scenarios[w.task].network == NetworkMode::FLOW) pool.reap(w);  // it exits after a SimGrid run
        finish(w, std::move(row));
        continue;
      }
      // EOF: the worker died with a scenario in flight. Retry once on a fresh worker, then record a crash.
      const int t = w.task;
      const int status = pool.reap(w);
      w.task = -1;
      if (++deaths[t] < 2) {  // to the front: it keeps its place in the order
        ++stats.retried;
        queue.push_front(t);
      } else {
        finish(w, row_skeleton(ex, ex.scenarios[t], "crashed", "worker " + describe_status(status) + ", twice"));
      }
    }
    if (opt.timeout_s > 0)
      for (auto& w : pool.workers())
        if (w.task >= 0 && seconds_since(w.started) > opt.timeout_s) {
          ::kill(w.pid, SIGKILL);
          pool.reap(w);
          char msg[80];
          std::snprintf(msg, sizeof msg, "timed out after %g s", opt.timeout_s);
          Row row = row_skeleton(ex, ex.scenarios[w.task], "failed", msg);
          finish(w, std::move(row));
        }
    bar.update(done);
  }
  bar.finish(done);
  ::signal(SIGPIPE, old_pipe);
  stats.simulated += done;
}

std::string stats_line(const ShardStats& s) {
  return nlohmann::json{
      {"resumed", s.resumed}, {"simulated", s.simulated}, {"retried", s.retried}, {"wall_s", s.wall_s}}
      .dump();
}

}  // namespace

nlohmann::json run_sweep(const Expansion& ex, const RunOptions& opt, std::ostream* progress, const Gather& gather) {
  const auto t0 = Clock::now();
  const fs::path dir = opt.out_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("cannot create output directory '" + opt.out_dir + "': " + ec.message());
  const bool sharded = opt.ranks > 1;
  const std::string own_name = sharded ? "results.rank-" + std::to_string(opt.rank) + ".jsonl" : "results.jsonl";
  const fs::path own = dir / own_name;

  // Resume: every row already in the directory, the own file's torn tail cut.
  RowMap rows;
  read_results(own, true, rows);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && is_results_file(e.path().filename().string()) && e.path().filename() != own_name)
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) read_results(dir / n, false, rows);
  std::unordered_map<std::string, int> position;
  for (std::size_t i = 0; i < ex.scenarios.size(); ++i) position.emplace(ex.scenarios[i].id, static_cast<int>(i));
  std::size_t foreign = 0;
  for (const auto& [id, row] : rows) foreign += position.count(id) == 0;
  if (foreign > 0)
    throw ConfigError("sweep: '" + opt.out_dir + "' holds " + std::to_string(foreign) +
                      " result rows that are not scenarios of this spec (another sweep's output?); use another --out");

  ShardStats stats;
  std::vector<int> tasks;
  for (std::size_t i = 0; i < ex.scenarios.size(); ++i) {
    const Scenario& s = ex.scenarios[i];
    if (s.index % opt.ranks != opt.rank || s.prefiltered) continue;
    if (rows.count(s.id)) ++stats.resumed;
    else tasks.push_back(static_cast<int>(i));
  }

  // Simulate, appending each row with one write() + fsync().
  const int fd = ::open(own.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError("cannot open '" + own.string() + "': " + std::strerror(errno));
  try {
    execute(
        ex, tasks, opt, progress,
        [&](Row&& row) {
          const std::string line = dump(row) + "\n";
          if (!write_all(fd, line.data(), line.size()) || ::fsync(fd) != 0)
            throw ConfigError("cannot append to '" + own.string() + "': " + std::strerror(errno));
          rows.emplace(row["id"].get<std::string>(), std::move(row));
        },
        stats);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  stats.wall_s = seconds_since(t0);

  // Gather (MPI) or take the local rows; rank 0 writes the final files.
  std::vector<ShardStats> per_rank{stats};
  if (gather) {
    std::string mine = stats_line(stats) + "\n";
    for (const auto& [id, row] : rows) mine += dump(row) + "\n";
    const auto all = gather(mine);
    if (opt.rank != 0) return nlohmann::json::parse(stats_line(stats));
    per_rank.clear();
    for (const std::string& text : all) {
      std::istringstream in(text);
      std::string line;
      std::getline(in, line);
      const auto j = nlohmann::json::parse(line);
      per_rank.push_back({j["resumed"], j["simulated"], j["retried"], j["wall_s"]});
      while (std::getline(in, line))
        if (!line.empty()) {
          Row r = Row::parse(line);
          const std::string id = r["id"].get<std::string>();
          rows.emplace(id, std::move(r));
        }
    }
  }
  std::string jsonl, csv = csv_header();
  std::map<std::string, std::size_t> status;
  for (const char* s : {"ok", "oom", "failed", "crashed"}) status[s] = 0;
  for (const Scenario& s : ex.scenarios) {
    auto it = rows.find(s.id);
    if (it == rows.end()) continue;
    Row& r = it->second;
    r["index"] = s.index;  // the spec's numbering (rows keep their ids if the spec's order changed)
    jsonl += dump(r) + "\n";
    csv += csv_line(r);
    ++status[r.value("status", std::string("failed"))];
  }
  atomic_write(dir / "results.jsonl", jsonl);
  atomic_write(dir / "results.csv", csv);

  ShardStats total;
  for (const auto& s : per_rank) {
    total.resumed += s.resumed, total.simulated += s.simulated, total.retried += s.retried;
    total.wall_s = std::max(total.wall_s, s.wall_s);
  }
  total.wall_s = std::max(total.wall_s, seconds_since(t0));
  nlohmann::json skipped = nlohmann::json::object();
  for (const auto& [reason, n] : ex.skipped) skipped[reason] = n;
  std::size_t rows_total = 0;
  for (const auto& [k, n] : status) rows_total += n;
  nlohmann::json summary = {
      {"schema", "dtsim.sweep"},
      {"schema_version", 1},
      {"dtsim_version", DTSIM_VERSION},
      {"spec", ex.spec},
      {"options",
       {{"jobs", opt.jobs}, {"ranks", opt.ranks}, {"prefilter", opt.prefilter}, {"timeout_s", opt.timeout_s}}},
      {"counts",
       {{"grid_points", ex.grid_points},
        {"skipped", skipped},
        {"scenarios", ex.scenarios.size()},
        {"prefiltered", ex.prefiltered},
        {"prefilter_reason", "does not fit (analytic memory estimate)"},
        {"rows", rows_total},
        {"status", status},
        {"resumed", total.resumed},
        {"simulated_this_run", total.simulated},
        {"retried", total.retried}}},
      {"wall_s", total.wall_s},
      {"scenarios_per_min", total.wall_s > 0 ? total.simulated / total.wall_s * 60.0 : 0.0}};
  atomic_write(dir / "sweep.json", summary.dump(2) + "\n");
  return summary;
}

}  // namespace dtsim::sim::sweep
