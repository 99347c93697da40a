// `dtsim presets`: the built-in models, GPUs and clusters (dtsim::presets).
#include "cli/commands.hpp"

#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {

int cmd_presets(int argc, char** argv, std::ostream& out) {
  po::options_description desc("dtsim presets: list the built-in models, GPUs and clusters");
  desc.add_options()("help,h", "this help")(
      "limits", "instead: the documented range of every number an input file or flag can give (a Markdown table)");
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  out << (vm.count("limits") ? input_limits_markdown() : presets().text);
  return 0;
}

}  // namespace dtsim::cli
