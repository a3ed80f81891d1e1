// rnnc-inspect DIR_OR_FILE [--json]: reads a bundle rnnc emitted (its .cu or
// .cpp) back through clang and lists its kernels, launches and library calls.
// Exit 0 when it finds no problem, 1 on problems or bad input (a one-line
// error naming the file), like clang's tools.
#include "Inspect.h"
#include "Report.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace rnnc::inspect {
namespace {

/// ".cu" -> "cuda", ".cpp" -> "c++", else "".
std::string languageOf(const fs::path &file) {
  std::string ext = file.extension().string();
  if (ext == ".cu") return "cuda";
  if (ext == ".cpp" || ext == ".cc" || ext == ".cxx") return "c++";
  return "";
}

/// The source of bundle directory `dir`: its only .cu or .cpp, or, when it
/// holds several, the one named like its manifest (<model>.json's "model").
/// "" with `error` set when there is none to pick.
std::string bundleSource(const fs::path &dir, std::string &error) {
  std::vector<fs::path> sources;
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && !languageOf(e.path()).empty()) sources.push_back(e.path());
  if (ec) {
    error = ec.message();
    return "";
  }
  if (sources.size() == 1) return sources[0].string();
  if (sources.empty()) {
    error = "not a bundle: no .cu or .cpp in it";
    return "";
  }
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!manifest.is_object() || !manifest.contains("model") || !manifest["model"].is_string()) continue;
    std::string model = manifest["model"].get<std::string>();
    for (const fs::path &s : sources)
      if (s.stem() == model) return s.string();
  }
  error = "several sources (.cu, .cpp) and no manifest naming one: name the file";
  return "";
}

/// The runtime headers beside an installed rnnc-inspect (<its directory>/../include,
/// as rnnc finds them), else the source tree it was built from.
std::string defaultRuntimeInclude() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = (exe.parent_path() / ".." / "include").lexically_normal();
    if (fs::is_regular_file(installed / "rnnc" / "cuda.h", ec)) return installed.string();
  }
  return RNNC_INSPECT_RUNTIME_INCLUDE;
}

int run(int argc, char **argv) {
  CLI::App app{"rnnc-inspect: the kernels, launches and library calls of a bundle rnnc emitted, read back by clang; "
               "exit 1 when the emitted code has a problem (docs/inspect.md)"};
  std::string input;
  bool json = false, text = false;
  Options options;
  options.runtimeInclude = defaultRuntimeInclude();
  app.add_option("DIR_OR_FILE", input, "a bundle directory (rnnc compile -o DIR), or its .cu or .cpp")->required();
  app.add_flag("--json", json, "print JSON");
  app.add_flag("--text", text, "print text (the default)")->excludes(app.get_option("--json"));
  app.add_option("-I,--runtime-include", options.runtimeInclude, "where rnnc/cuda.h and the runtime's other headers are")
      ->type_name("DIR");
  app.set_version_flag("--version", std::string("rnnc-inspect ") + RNNC_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  std::error_code ec;
  fs::path path(input);
  std::string file, error;
  if (fs::is_directory(path, ec)) {
    file = bundleSource(path, error);
  } else if (!fs::exists(path, ec)) {
    error = "no such file or directory";
  } else if (languageOf(path).empty()) {
    error = "not a .cu or .cpp file, nor a bundle directory";
  } else {
    file = input;
  }
  if (!error.empty()) {
    fmt::print(stderr, "rnnc-inspect: error: {}: {}\n", input, error);
    return 1;
  }
  if (!fs::is_directory(options.runtimeInclude + "/rnnc", ec)) {
    fmt::print(stderr, "rnnc-inspect: error: {}: no rnnc/ runtime headers there (pass --runtime-include DIR)\n",
               options.runtimeInclude);
    return 1;
  }
  options.language = languageOf(file);
  std::optional<Inspection> inspection = inspect(file, options, error);
  if (!inspection) {
    fmt::print(stderr, "rnnc-inspect: error: {}: {}\n", file, error);
    return 1;
  }
  fmt::print("{}", json ? jsonReport(*inspection) : textReport(*inspection));
  return inspection->problems.empty() ? 0 : 1;
}

} // namespace
} // namespace rnnc::inspect

int main(int argc, char **argv) {
  try {
    return rnnc::inspect::run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rnnc-inspect: internal error: %s\n", e.what());
    return 2;
  }
}
