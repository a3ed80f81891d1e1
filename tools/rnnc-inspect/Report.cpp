// The text and JSON forms of an Inspection. Text is for people and grep
// (every line names its file:line); JSON keeps the keys in a fixed order.
#include "Report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rnnc::inspect {

namespace {

nlohmann::ordered_json orNull(const std::string &s) { return s.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s); }

/// {"a", "b"} -> "a b".
std::string joined(const std::vector<std::string> &words) {
  std::string out;
  for (const std::string &w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

} // namespace

std::string textReport(const Inspection &in) {
  std::string out;
  const std::string &f = in.file;
  for (const Kernel &k : in.kernels) {
    out += fmt::format("{}:{}: kernel {}{}\n", f, k.line, k.name, k.helper ? " (rnnc helper)" : "");
    std::string parameters;
    for (const Parameter &p : k.parameters) {
      bool tight = p.name.empty() || (!p.type.empty() && (p.type.back() == '*' || p.type.back() == '&')); // "float *a"
      parameters += fmt::format("{}{}{}{}", parameters.empty() ? "" : ", ", p.type, tight ? "" : " ", p.name);
    }
    out += fmt::format("  parameters: {}\n", parameters);
    if (!k.launchBounds.empty()) out += fmt::format("  launch_bounds: {}\n", k.launchBounds);
    out += fmt::format("  equations: {}\n", k.equations.empty() ? "(none)" : joined(k.equations));
    for (const Launch &l : k.launches) {
      out += fmt::format("  launch {}:{} in {}", f, l.line, l.function);
      if (!l.grid.empty())
        out += fmt::format(": grid {}, block {}, stream {}, shared memory {}{}", l.grid, l.block, l.stream, l.sharedMemory,
                           l.cooperative ? ", cooperative" : "");
      out += "\n";
    }
  }
  for (const LibraryCall &c : in.libraryCalls)
    out += fmt::format("{}:{}: library call {} in {}{}{}\n", f, c.line, c.callee, c.function,
                       c.status.empty() ? "" : fmt::format(": {}, {}", c.status, c.checked ? "checked" : "NOT CHECKED"),
                       c.equations.empty() ? "" : "; equations: " + joined(c.equations));
  for (const Problem &p : in.problems) out += fmt::format("{}:{}: problem: {} [{}]\n", f, p.line, p.message, p.kind);
  out += fmt::format("{}: {} kernel{}{}, {} library call{}, {} problem{}\n", f, in.kernels.size(),
                     in.kernels.size() == 1 ? "" : "s",
                     in.kernelString.empty() ? "" : fmt::format(" (from the string {})", in.kernelString),
                     in.libraryCalls.size(), in.libraryCalls.size() == 1 ? "" : "s", in.problems.size(),
                     in.problems.size() == 1 ? "" : "s");
  return out;
}

std::string jsonReport(const Inspection &in) {
  using json = nlohmann::ordered_json;
  json kernels = json::array();
  for (const Kernel &k : in.kernels) {
    json parameters = json::array(), launches = json::array();
    for (const Parameter &p : k.parameters) parameters.push_back({{"type", p.type}, {"name", p.name}});
    for (const Launch &l : k.launches)
      launches.push_back({{"function", l.function},
                          {"grid", orNull(l.grid)},
                          {"block", orNull(l.block)},
                          {"stream", orNull(l.stream)},
                          {"shared_memory", orNull(l.sharedMemory)},
                          {"cooperative", l.cooperative},
                          {"line", l.line}});
    kernels.push_back({{"name", k.name},
                       {"line", k.line},
                       {"helper", k.helper},
                       {"parameters", parameters},
                       {"launch_bounds", orNull(k.launchBounds)},
                       {"equations", k.equations},
                       {"launches", launches}});
  }
  json calls = json::array(), problems = json::array();
  for (const LibraryCall &c : in.libraryCalls)
    calls.push_back({{"callee", c.callee},
                     {"function", c.function},
                     {"status", orNull(c.status)},
                     {"checked", c.checked},
                     {"equations", c.equations},
                     {"line", c.line}});
  for (const Problem &p : in.problems) problems.push_back({{"kind", p.kind}, {"message", p.message}, {"line", p.line}});
  json out = {{"file", in.file},
              {"language", in.language},
              {"kernel_string", orNull(in.kernelString)},
              {"kernels", kernels},
              {"library_calls", calls},
              {"problems", problems}};
  return out.dump(2) + "\n";
}

} // namespace rnnc::inspect
