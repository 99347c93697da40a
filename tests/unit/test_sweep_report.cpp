// Sweep results reader (studies/sweep/sweep_results.hpp), SVG writer (studies/report/svg.hpp) and `dtsim report`
// (studies/report/sweep_html.hpp): malformed and torn lines are one-line errors naming file:line; the HTML page holds
// the four plots, the top strategy's numbers and escaped names, is byte-identical across runs, and bad input leaves no
// file behind.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "studies/report/svg.hpp"
#include "studies/report/sweep_html.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::sim;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(DTSIM_SOURCE_DIR) + "/tests/data/sweep/";

const std::string& scratch() {
  static const std::string dir = [] {
    std::string d = (fs::path(::testing::TempDir()) / ("dtsim_report_" + std::to_string(getpid()))).string();
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
struct RemoveScratch : ::testing::Environment {
  void TearDown() override { fs::remove_all(scratch()); }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliRun {
  int rc;
  std::string out, err;
};
CliRun dtsim_cli(const std::string& args) {
  const std::string o = scratch() + "/stdout", e = scratch() + "/stderr";
  const int status = std::system((std::string(DTSIM_BIN) + " " + args + " >" + o + " 2>" + e).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(o), slurp(e)};
}

/// The first row of the hand-made fixture as a JSON line, edited by `edit`.
std::string edited_line(const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(kData + "pareto_handmade.jsonl");
  std::string line;
  std::getline(in, line);
  nlohmann::json j = nlohmann::json::parse(line);
  edit(j);
  return j.dump();
}

/// The FormatError message for parsing `text` as "f.jsonl" ("" if it parses).
std::string parse_error(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_sweep_results(in, "f.jsonl");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(SweepResults, ReadsTheSchemaAndRoundTrips) {
  const SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  ASSERT_EQ(res.rows.size(), 21u);
  const SweepRow& r = res.rows[0];
  EXPECT_EQ(r.id, "s0000");
  EXPECT_EQ(r.cluster, "dgx-a100:8");
  EXPECT_EQ(r.dp, 8);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(r.memory_bytes.optimizer, 3e9);
  EXPECT_TRUE(r.usable());
  const SweepRow& failed = res.rows[10];
  EXPECT_EQ(failed.status, "failed");
  EXPECT_TRUE(std::isnan(failed.tokens_per_s));
  EXPECT_FALSE(failed.fits);
  // to_json writes the same schema back: every row round-trips.
  std::string text;
  for (const SweepRow& row : res.rows) text += to_json(row).dump() + "\n";
  std::istringstream in(text);
  const auto back = parse_sweep_results(in, "back");
  ASSERT_EQ(back.size(), res.rows.size());
  for (std::size_t i = 0; i < back.size(); ++i) EXPECT_EQ(to_json(back[i]), to_json(res.rows[i]));
  std::ifstream orig(kData + "pareto_handmade.jsonl");
  std::string line;
  std::getline(orig, line);
  // The handmade file predates the cp, ep, precision, overlap and dispatcher columns: they read as their defaults and
  // are written back.
  EXPECT_EQ(r.cp, 1);
  EXPECT_EQ(r.ep, 1);
  EXPECT_EQ(r.precision, "bf16");
  EXPECT_FALSE(r.tp_comm_overlap || r.overlap_param_gather || r.cuda_graphs || r.overlap_moe_comm || r.megatron_fsdp);
  EXPECT_EQ(r.dispatcher, "alltoall");
  nlohmann::json expected = nlohmann::json::parse(line);
  expected["cp"] = 1;
  expected["ep"] = 1;
  expected["precision"] = "bf16";
  expected["tp_comm_overlap"] = false;
  expected["overlap_param_gather"] = false;
  expected["cuda_graphs"] = false;
  expected["dispatcher"] = "alltoall";
  expected["overlap_moe_comm"] = false;
  expected["megatron_fsdp"] = false;
  EXPECT_EQ(to_json(res.rows[0]), expected);
}

TEST(SweepResults, MalformedLinesNameFileAndLine) {
  const std::string good = edited_line([](nlohmann::json&) {});
  EXPECT_EQ(parse_error(good + "\n\n" + good + "\n"), "");  // blank lines are skipped
  EXPECT_EQ(parse_error(good), "");                         // complete last line without newline: used
  EXPECT_EQ(parse_error(good + "\n{\"id\": \n" + good + "\n").rfind("f.jsonl:2: not valid JSON: parse error", 0), 0u);
  EXPECT_EQ(parse_error(good + "\n" + good + "\n[1, 2]\n"), "f.jsonl:3: expected a JSON object, found array");
  EXPECT_EQ(parse_error(edited_line([](auto& j) { j.erase("tp"); })), "f.jsonl:1: missing field 'tp'");
  EXPECT_EQ(parse_error(edited_line([](auto& j) { j["tp"] = "2"; })),
            "f.jsonl:1: field 'tp' is string, expected an integer");
  EXPECT_EQ(parse_error(edited_line([](auto& j) { j["status"] = "skipped"; })),
            "f.jsonl:1: status 'skipped' is not one of ok, oom, failed, crashed");
  EXPECT_EQ(parse_error(edited_line([](auto& j) { j["tokens_per_s"] = nullptr; })),
            "f.jsonl:1: status ok but tokens_per_s, peak_memory_bytes or fits is null");
  EXPECT_EQ(parse_error(edited_line([](auto& j) { j["memory_bytes"].erase("reserved"); })),
            "f.jsonl:1: memory_bytes: missing field 'reserved'");
  for (const std::string& msg : {parse_error(good + "\n{"), parse_error("x\n")})
    EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(SweepResults, TornLastLineIsReported) {
  try {
    load_sweep_results(kData + "torn.jsonl");
    FAIL() << "torn line accepted";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(kData + "torn.jsonl:3: torn last line", 0), 0u) << e.what();
  }
  EXPECT_THROW(load_sweep_results(scratch() + "/nope.jsonl"), ConfigError);
  EXPECT_THROW(load_sweep_results(scratch()), ConfigError);  // a directory without results.jsonl
}

TEST(Svg, ScalesTicksAndLabels) {
  const svg::Scale lin = svg::linear(3, 87, 0, 100, true);
  EXPECT_EQ(lin.ticks, (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_DOUBLE_EQ(lin(50), 50);
  const svg::Scale lg = svg::logarithmic(1500, 1.2e6, 300, 0);
  EXPECT_DOUBLE_EQ(lg.lo, 1e3);
  EXPECT_DOUBLE_EQ(lg.hi, 1e7);
  EXPECT_EQ(lg.ticks.size(), 5u);
  EXPECT_DOUBLE_EQ(lg(1e5), 150);
  const svg::Scale narrow = svg::logarithmic(150, 900, 0, 1);
  EXPECT_EQ(narrow.ticks, (std::vector<double>{100, 200, 500, 1000}));
  EXPECT_EQ(svg::si(1500), "1.5k");
  EXPECT_EQ(svg::si(2e6), "2M");
  EXPECT_EQ(svg::si(950), "950");
  EXPECT_EQ(svg::escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  svg::Canvas cv(100, 50, "t<1>");
  cv.text(1, 2, "x & y");
  EXPECT_NE(cv.str().find("<title>t&lt;1&gt;</title>"), std::string::npos);
  EXPECT_NE(cv.str().find(">x &amp; y</text>"), std::string::npos);
}

TEST(SweepReport, PageHasThePlotsTheTopStrategyAndNoExternalReferences) {
  const SweepResults res = load_sweep_results(kData + "sweep_small.jsonl");
  const std::string page = sweep_html(res, 3);
  EXPECT_EQ(count(page, "<svg "), 4u);
  EXPECT_EQ(count(page, "</svg>"), 4u);
  for (const char* banned : {"<script", "http:", "https:", "src=", "url(", "@import", "<link", "<img"})
    EXPECT_EQ(page.find(banned), std::string::npos) << banned;
  // The best strategy of llama2-7b on 64 GPUs, with its numbers as the table prints them.
  const auto groups = pareto_fronts(res.rows);
  const ParetoGroup* g = nullptr;
  for (const auto& x : groups)
    if (x.model == "llama2-7b" && x.gpus == 64) g = &x;
  ASSERT_NE(g, nullptr);
  const auto top = top_strategies(res.rows, *g, 3);
  ASSERT_EQ(top.size(), 3u);
  const SweepRow& best = *top[0];
  const std::string row = "<td class=\"s\">" + svg::escape(best.strategy()) + "</td><td class=\"s\">" + best.id +
                          "</td><td>" + svg::fixed(best.tokens_per_s, 1) + "</td><td>" +
                          svg::fixed(best.samples_per_s, 2) + "</td><td>" + svg::fixed(100 * best.mfu, 1) + "%</td>";
  EXPECT_NE(page.find(row), std::string::npos) << row;
  for (const SweepRow& r : res.rows)  // nothing beats it
    if (r.usable() && r.model == best.model && r.gpus == best.gpus) {
      EXPECT_LE(r.tokens_per_s, best.tokens_per_s);
    }
  // Counts and the skip/failure section (the crashed row's message carries HTML).
  EXPECT_NE(page.find("106 scenarios; 92 ran and fit in memory, 1 ran but exceed the memory capacity, 4 out of memory, "
                      "8 failed, 1 crashed"),
            std::string::npos);
  EXPECT_NE(page.find("lowering: &lt;stage 3&gt; &amp; &quot;rank 17&quot; aborted"), std::string::npos);
  EXPECT_EQ(page.find("<stage 3>"), std::string::npos);
  EXPECT_EQ(page, sweep_html(res, 3));
}

TEST(SweepReport, EscapesNames) {
  SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  for (SweepRow& r : res.rows) {
    r.model = "gpt<script>alert('x')</script>&\"1\"";
    r.planner = r.planner.empty() ? "" : "<b>dapple</b>";
    r.cluster = "<i>c</i>";
  }
  const std::string page = sweep_html(res, 5);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_EQ(page.find("<i>"), std::string::npos);
  EXPECT_NE(page.find("gpt&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;1&quot; on 8 GPUs"),
            std::string::npos);
  EXPECT_NE(page.find("planner &lt;b&gt;dapple&lt;/b&gt;: tp2"), std::string::npos);
}

TEST(SweepReportCli, WritesTheSameBytesTwice) {
  const std::string a = scratch() + "/a/report.html", b = scratch() + "/b/report.html";
  const CliRun ra = dtsim_cli("report " + kData + "sweep_small.jsonl --html " + a + " --top 4");
  ASSERT_EQ(ra.rc, 0) << ra.err;
  EXPECT_NE(ra.out.find("wrote " + a), std::string::npos) << ra.out;
  const CliRun rb = dtsim_cli("report " + kData + "sweep_small.jsonl --html " + b + " --top 4 -q");
  ASSERT_EQ(rb.rc, 0) << rb.err;
  EXPECT_EQ(rb.out, "");
  const std::string page = slurp(a);
  EXPECT_EQ(page, slurp(b));
  EXPECT_EQ(page, sweep_html(load_sweep_results(kData + "sweep_small.jsonl"), 4));
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch() + "/a"), fs::directory_iterator()), 1);  // no temporaries
}

TEST(SweepReportCli, BadInputIsOneLineAndLeavesNoFile) {
  const std::string dir = scratch() + "/bad";
  const std::string html = dir + "/report.html";
  const std::string torn = "report " + kData + "torn.jsonl --html " + html;
  for (const std::string& args :
       {torn, "report " + kData + "nope.jsonl --html " + html, "report " + kData + "sweep_small.jsonl",
        "report " + kData + "sweep_small.jsonl --html " + html + " --top 0",
        "report " + kData + "sweep_small.jsonl --html " + html + " --bogus"}) {
    const CliRun r = dtsim_cli(args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_EQ(r.err.rfind("dtsim: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(dir)) << args;
  }
  EXPECT_NE(dtsim_cli(torn).err.find("torn.jsonl:3: torn last line"), std::string::npos);
  // An existing report is left as it was when the new input is bad.
  fs::create_directories(dir);
  std::ofstream(html) << "previous";
  EXPECT_EQ(dtsim_cli(torn).rc, 2);
  EXPECT_EQ(slurp(html), "previous");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}
