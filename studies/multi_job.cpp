#include "studies/multi_job.hpp"

#include <algorithm>

#include "sim/engine/analytic_runtime.hpp"
#include "sim/engine/isolate.hpp"
#include "traces/json_util.hpp"

namespace dtsim::sim {

std::vector<Job> load_jobs(const std::string& path) {
  const std::string ctx = "jobs file '" + path + "'";
  auto j = json_util::read_file(path);
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx, {"schema_version", "jobs"});
  auto list = json_util::get<nlohmann::json>(j, ctx, "jobs");
  if (!list.is_array() || list.empty()) throw ConfigError(ctx + ": 'jobs' must be a non-empty list");
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string jc = ctx + ": jobs[" + std::to_string(i) + "]";
    json_util::reject_unknown(list[i], jc, {"name", "model", "first_gpu", "plan"});
    Job job;
    job.name = json_util::get_or<std::string>(list[i], jc, "name", "job" + std::to_string(i));
    auto mj = json_util::get<nlohmann::json>(list[i], jc, "model");
    job.model = mj.is_string() ? load_model(mj.get<std::string>()) : model_from_json(mj, jc + ".model");
    job.model.validate();
    job.first_gpu = json_util::get_or<int>(list[i], jc, "first_gpu", 0);
    job.plan = plan_from_json(json_util::get<nlohmann::json>(list[i], jc, "plan"), jc + ".plan");
    jobs.push_back(std::move(job));
  }
  return jobs;
}

namespace {
// The cluster as one job sees it (for plan validation): its GPUs only.
ClusterSpec job_view(const ClusterSpec& c, int gpus) {
  ClusterSpec v = c;
  if (gpus <= c.gpus_per_node) {
    v.num_nodes = 1;
    v.gpus_per_node = gpus;
  } else {
    v.num_nodes = gpus / c.gpus_per_node;
  }
  v.graph = TopologyGraph{};
  return v;
}
}  // namespace

MultiJobResult simulate_jobs(const std::vector<Job>& jobs, const ClusterSpec& cluster, const Calibration& cal,
                             const SimOptions& options, bool compare_alone) {
  cluster.validate();
  cal.validate("calibration '" + cal.name + "'");
  std::vector<int> owner(cluster.total_gpus(), -1);
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const auto& job = jobs[k];
    const int n = job.plan.world_size();
    const std::string jc = "job '" + job.name + "'";
    if (job.first_gpu < 0 || job.first_gpu + n > cluster.total_gpus())
      throw ConfigError(jc + ": GPUs " + std::to_string(job.first_gpu) + ".." + std::to_string(job.first_gpu + n - 1) +
                        " are not all in the " + std::to_string(cluster.total_gpus()) + " GPUs of '" + cluster.name +
                        "'");
    if (n > cluster.gpus_per_node && (n % cluster.gpus_per_node != 0 || job.first_gpu % cluster.gpus_per_node != 0))
      throw ConfigError(jc + ": a job larger than a node must use whole nodes (first_gpu and size multiples of " +
                        std::to_string(cluster.gpus_per_node) + ")");
    for (int g = job.first_gpu; g < job.first_gpu + n; ++g) {
      if (owner[g] >= 0)
        throw ConfigError(jc + " and job '" + jobs[owner[g]].name + "' both use GPU " + std::to_string(g));
      owner[g] = static_cast<int>(k);
    }
    job.plan.validate(job.model, job_view(cluster, n));
  }

  // Each job alone first, in child processes: SimGrid's engine must not exist yet in this process when forking.
  std::vector<double> alone(jobs.size(), 0.0);
  if (compare_alone)
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      SimOptions own_opt = options;
      own_opt.first_gpu = jobs[k].first_gpu;
      own_opt.fold_shared_links = false;  // as in the combined run below
      alone[k] = run_isolated(
          [&] {
            Lowered low = lower(jobs[k].model, cluster, jobs[k].plan, cal, own_opt);
            const std::vector<int> own = platform_ranks(low, jobs[k].plan, jobs[k].first_gpu).gpu;
            EngineResult res = options.network == NetworkMode::ANALYTIC ? run_analytic(low.graph, cluster, cal, own)
                                                                        : run_on_simgrid(low.graph, cluster, cal, own);
            return std::vector<double>{*std::max_element(res.end_s.begin(), res.end_s.end())};
          },
          1)[0];
    }

  MultiJobResult out;
  TaskGraph merged;
  std::vector<int> gpus;
  std::vector<std::size_t> task_offset;
  for (const auto& job : jobs) {
    JobResult jr;
    jr.options = options;
    jr.options.first_gpu = job.first_gpu;
    // The other jobs' traffic shares leaf uplinks and NICs with this job's, unseen by its lowering: no folding with
    // multiplicity (each job's links carry its own ranks' flows one for one).
    jr.options.fold_shared_links = false;
    jr.lowered = lower(job.model, cluster, job.plan, cal, jr.options);
    const auto& g = jr.lowered.graph;
    const auto toff = static_cast<std::int32_t>(merged.size());
    const auto roff = static_cast<std::int32_t>(gpus.size());
    task_offset.push_back(static_cast<std::size_t>(toff));
    const auto own = platform_ranks(jr.lowered, job.plan, job.first_gpu).gpu;
    gpus.insert(gpus.end(), own.begin(), own.end());
    for (const auto& t : g.tasks()) {
      Task c = t;
      c.rank += roff;
      if (c.peer >= 0) c.peer += roff;
      c.name = merged.intern(job.name + "/" + g.names()[t.name]);
      merged.add(c);
    }
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(g.size()); ++i) {
      for (auto* s = g.succ_begin(i); s != g.succ_end(i); ++s) merged.depend(i + toff, *s + toff);
      if (g.release_s(i) > 0) merged.release_at_least(i + toff, g.release_s(i));
    }
    for (Exchange x : g.exchanges()) {  // analytic network: all-to-alls as one task per member
      for (auto& t : x.tasks) t += toff;
      for (auto& r : x.ranks) r += roff;
      merged.add_exchange(std::move(x));
    }
    for (HostSpan h : g.host_spans()) {
      h.rank += roff;
      h.name = merged.intern(job.name + "/" + g.names()[h.name]);
      merged.add_host_span(h);
    }
    // The jobs share one calibration and one set of options: the same interference settings.
    merged.interference_on = g.interference_on;
    merged.collective_slowdown = g.collective_slowdown;
    out.jobs.push_back(std::move(jr));
  }
  merged.finalize();
  out.combined = options.network == NetworkMode::ANALYTIC ? run_analytic(merged, cluster, cal, gpus)
                                                          : run_on_simgrid(merged, cluster, cal, gpus);
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    auto& jr = out.jobs[k];
    const std::size_t n = jr.lowered.graph.size(), off = task_offset[k];
    jr.engine = out.combined;
    jr.engine.start_s.assign(out.combined.start_s.begin() + off, out.combined.start_s.begin() + off + n);
    jr.engine.end_s.assign(out.combined.end_s.begin() + off, out.combined.end_s.begin() + off + n);
    Inputs in{&jobs[k].model, &cluster, &jobs[k].plan, &cal, &jr.options};
    jr.report = analyze(in, jr.lowered, jr.engine);
    jr.alone_iteration_s = alone[k];
  }
  return out;
}

}  // namespace dtsim::sim
