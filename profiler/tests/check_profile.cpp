// dtsim_profile_check FILE [--min-kernels N] [--annotation NAME]: checks a trace written by libdtsim_cupti.so
// for the GPU smoke test (tests/gpu_smoke.sh). Prints one line per check; exit code 0 if all pass, 1 otherwise,
// 2 on bad usage or unreadable JSON.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dtsim_profile_check FILE [--min-kernels N] [--annotation NAME]\n");
    return 2;
  }
  std::size_t min_kernels = 1;
  std::string annotation;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--min-kernels") min_kernels = std::stoul(argv[i + 1]);
    else if (a == "--annotation") annotation = argv[i + 1];
    else {
      std::fprintf(stderr, "dtsim_profile_check: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  nlohmann::json doc;
  try {
    std::ifstream in(argv[1]);
    std::stringstream ss;
    ss << in.rdbuf();
    doc = nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim_profile_check: cannot read '%s': %s\n", argv[1], e.what());
    return 2;
  }

  expect(doc.value("schemaVersion", 0) == 1, "schemaVersion is 1");
  const auto& props = doc["deviceProperties"];
  expect(props.is_array() && !props.empty() && props[0].value("numSms", 0) > 0 &&
             props[0].value("totalGlobalMem", std::uint64_t{0}) > 0,
         "deviceProperties has a device with numSms and totalGlobalMem");
  expect(doc.contains("baseTimeNanoseconds") && doc["baseTimeNanoseconds"].get<std::int64_t>() > 0,
         "baseTimeNanoseconds is set");

  std::map<std::string, int> cats;
  std::set<std::string> kernel_names, memcpy_names, runtime_names;
  std::map<std::int64_t, int> flow_starts, flow_ends;
  std::int64_t annotation_id = -1;
  bool gpu_annotation = false, memory_counter = false, negative = false;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const std::string cat = e.value("cat", "");
    if (ph == "X") {
      ++cats[cat];
      if (e["ts"].get<double>() < 0 || e["dur"].get<double>() < 0) negative = true;
      const std::string name = e.value("name", "");
      if (cat == "kernel") kernel_names.insert(name);
      if (cat == "gpu_memcpy") memcpy_names.insert(name);
      if (cat == "cuda_runtime") runtime_names.insert(name);
      if (cat == "user_annotation" && name == annotation) annotation_id = e["args"].value("External id", -1);
      if (cat == "gpu_user_annotation" && name == annotation) gpu_annotation = true;
    } else if (ph == "s") {
      ++flow_starts[e["id"].get<std::int64_t>()];
    } else if (ph == "f") {
      ++flow_ends[e["id"].get<std::int64_t>()];
    } else if (ph == "C" && e.value("name", "") == "GPU Memory") {
      memory_counter = true;
    }
  }
  expect(!negative, "no negative ts or dur");
  expect(static_cast<std::size_t>(cats["kernel"]) >= min_kernels,
         "at least " + std::to_string(min_kernels) + " kernels (found " + std::to_string(cats["kernel"]) + ")");
  bool demangled = false;
  for (const auto& k : kernel_names) demangled |= k.rfind("add_one(", 0) == 0 || k.rfind("scale(", 0) == 0;
  expect(demangled, "kernel names are demangled (add_one(float*, int) / scale(...))");
  expect(memcpy_names.count("Memcpy HtoD (Pageable -> Device)") == 1, "a host-to-device copy");
  expect(memcpy_names.count("Memcpy DtoH (Device -> Pageable)") == 1, "a device-to-host copy");
  expect(cats["gpu_memset"] >= 1, "a memset");
  expect(runtime_names.count("cudaLaunchKernel") == 1, "cudaLaunchKernel runtime calls");
  // Every kernel, copy and memset is the end of a flow from the call that launched it.
  int linked = 0, unlinked = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (e.value("ph", "") != "X" || (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset")) continue;
    const auto corr = e["args"].value("correlation", std::int64_t{-1});
    (flow_starts.count(corr) && flow_ends.count(corr) ? linked : unlinked)++;
  }
  expect(unlinked == 0 && linked > 0, "every GPU activity has an ac2g flow from its launch (" + std::to_string(linked) +
                                          " linked, " + std::to_string(unlinked) + " not)");
  if (!annotation.empty()) {
    expect(annotation_id >= 0, "NVTX range '" + annotation + "' is a user_annotation");
    expect(gpu_annotation, "NVTX range '" + annotation + "' has a gpu_user_annotation");
    int inside = 0;
    for (const auto& e : doc["traceEvents"])
      if (e.value("cat", "") == "kernel" && e["args"].value("External id", std::int64_t{-2}) == annotation_id) ++inside;
    expect(inside >= static_cast<int>(min_kernels), "kernels carry the range's External id");
  }
  expect(memory_counter, "a GPU Memory counter (MEMORY2 records)");
  std::printf("%s: %d check(s) failed\n", argv[1], failures);
  return failures == 0 ? 0 : 1;
}
