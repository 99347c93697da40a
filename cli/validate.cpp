// `dtsim validate published|fit`: score predictions against published measurements, or fit a calibration
// (dtsim::validate_published, dtsim::fit). `validate measured` and `validate run` are in cli/validate_run.cpp.
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {
int cmd_validate(int argc, char** argv, std::ostream& out) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "measured") return cmd_validate_measured(argc - 1, argv + 1, out);
  if (mode == "run") return cmd_validate_run(argc - 1, argv + 1, out);
  if (mode != "published" && mode != "fit")
    throw ConfigError(
        "validate: expected 'published', 'fit', 'measured' or 'run' (e.g. dtsim validate published --data FILE)");
  po::options_description desc(
      "dtsim validate published: predict every row of a file of measured runs and score the predictions\n"
      "dtsim validate fit: fit the calibration to the rows of a split (mean group MAPE [+ weight x max error], "
      "Nelder-Mead)\n"
      "example: dtsim validate published --data ../shared/measurements/vtrain_ground_truth_single.csv --out "
      "val/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("data", po::value<std::vector<std::string>>(), "measurements (repeatable): the vTrain CSV, a CSV with named columns, JSON rows, or a measurements document (../shared/measurements/*.json: model_shapes + rows)")
    ("calibration", po::value<std::string>(), "calibration JSON (default: the GPU's shipped calibration)")
    ("split", po::value<std::string>()->default_value("all"), "all | train (even rows) | test (odd rows)")
    ("network", po::value<std::string>()->default_value("analytic"), "analytic | flow (flow: one child process per row)")
    ("max-evals", po::value<int>()->default_value(300), "fit: objective evaluations (each predicts every row)")
    ("max-error-weight", po::value<double>()->default_value(0.0), "fit: weight of each group's largest |error| next to its MAPE")
    ("cross-validate", "published: leave one source (--data file) out; refits what saw it (--max-evals each) and scores the 90% intervals")
    ("fit-max-gpus", po::value<int>(), "published: scale extrapolation: refit each GPU's calibration on the rows with at most N GPUs (--max-evals) and score the rows with more")
    ("out", po::value<std::string>(), "published: validation.json, validation.csv, predicted_vs_measured.svg; fit: calibration.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc - 1, argv + 1);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  FitRequest req;
  if (vm.count("data")) req.data = vm["data"].as<std::vector<std::string>>();
  if (vm.count("calibration")) req.calibration = vm["calibration"].as<std::string>();
  req.split = vm["split"].as<std::string>();
  req.network = vm["network"].as<std::string>();
  req.max_evaluations = vm["max-evals"].as<int>();
  req.max_error_weight = vm["max-error-weight"].as<double>();
  if (vm.count("fit-max-gpus") && (mode == "fit" || vm.count("cross-validate")))
    throw ConfigError(std::string("validate ") + (mode == "fit" ? "fit" : "published --cross-validate") +
                      ": --fit-max-gpus applies to validate published alone");
  std::string text;
  Files files;
  if (mode == "fit") {
    auto r = fit(req);
    text = std::move(r.text);
    files = std::move(r.files);
  } else if (vm.count("cross-validate")) {
    auto r = cross_validate(req);
    text = std::move(r.text);
    files = std::move(r.files);
  } else {
    if (vm.count("fit-max-gpus")) {
      req.fit_max_gpus = vm["fit-max-gpus"].as<int>();
      if (req.fit_max_gpus <= 0) throw ConfigError("validate published: --fit-max-gpus must be positive");
      req.fit_max_evaluations = req.max_evaluations;
      req.fit_max_error_weight = req.max_error_weight;
    }
    auto r = validate_published(req);
    text = std::move(r.text);
    files = std::move(r.files);
  }
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), files);
  if (!vm.count("quiet")) out << text;
  return 0;
}

}  // namespace dtsim::cli
