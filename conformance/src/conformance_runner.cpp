#include "conformance_runner.h"

#include <chrono>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plugin/host_services.h"

namespace loom::conformance {

namespace {

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "fail";
    case Outcome::not_supported: return "not-supported";
  }
  return "?";
}

std::vector<Case> cases_for(loom_plugin_kind kind) {
  std::vector<Case> all = abi_cases();
  auto append = [&](std::vector<Case> more) {
    for (auto& c : more) all.push_back(std::move(c));
  };
  switch (kind) {
    case LOOM_PLUGIN_KIND_BACKEND: append(backend_cases()); break;
    case LOOM_PLUGIN_KIND_KV: append(kv_cases()); break;
    case LOOM_PLUGIN_KIND_QUANTIZER: append(quantizer_cases()); break;
    case LOOM_PLUGIN_KIND_SAMPLER: append(sampler_cases()); break;
    case LOOM_PLUGIN_KIND_DRAFTER: append(drafter_cases()); break;
    default: break;
  }
  return all;
}

CaseResult run_one(const Case& c, CaseContext& context) {
  CaseResult result;
  result.kind = plugin_kind_name(context.plugin->kind());
  result.name = c.name;
  auto start = std::chrono::steady_clock::now();
  try {
    c.run(context);
    result.outcome = Outcome::pass;
  } catch (const CaseNotSupported& e) {
    result.outcome = Outcome::not_supported;
    result.message = e.what();
  } catch (const CaseFailure& e) {
    result.outcome = Outcome::fail;
    result.message = e.what();
  } catch (const std::exception& e) {
    result.outcome = Outcome::fail;
    result.message = std::string("unexpected error: ") + e.what();
  } catch (...) {
    result.outcome = Outcome::fail;
    result.message = "unexpected non-standard exception";
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

}  // namespace

int PluginReport::n_pass() const {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [](auto& r) { return r.outcome == Outcome::pass; }));
}
int PluginReport::n_fail() const {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [](auto& r) { return r.outcome == Outcome::fail; }));
}
int PluginReport::n_not_supported() const {
  return static_cast<int>(
      std::count_if(results.begin(), results.end(), [](auto& r) { return r.outcome == Outcome::not_supported; }));
}

PluginReport run_conformance(const std::shared_ptr<LoadedPlugin>& plugin, const std::string& config_json,
                             const std::string& filter) {
  PluginReport report;
  report.plugin_name = plugin->name();
  report.plugin_kind = plugin_kind_name(plugin->kind());
  report.library = plugin->library_path().string();
  CaseContext context;
  context.plugin = plugin;
  context.host = default_host_services();
  context.plugin_config_json = config_json;
  for (const auto& c : cases_for(plugin->kind())) {
    if (c.kind != 0 && c.kind != plugin->kind()) continue;
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    report.results.push_back(run_one(c, context));
  }
  return report;
}

void print_summary(std::ostream& out, const std::vector<PluginReport>& reports) {
  for (const auto& report : reports) {
    out << "plugin " << report.plugin_name << " (" << report.plugin_kind << ", " << report.library << ")\n";
    for (const auto& r : report.results) {
      out << "  " << std::left << std::setw(14) << outcome_name(r.outcome) << std::setw(47) << r.name << " "
          << std::fixed << std::setprecision(3) << r.seconds << "s";
      if (!r.message.empty()) out << "  " << r.message;
      out << "\n";
    }
    out << "  " << report.n_pass() << " passed, " << report.n_fail() << " failed, " << report.n_not_supported()
        << " not supported\n";
  }
}

std::string reports_to_json(const std::vector<PluginReport>& reports) {
  nlohmann::json root = nlohmann::json::array();
  for (const auto& report : reports) {
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& r : report.results) {
      cases.push_back({{"name", r.name}, {"kind", r.kind}, {"outcome", outcome_name(r.outcome)},
                       {"message", r.message}, {"seconds", r.seconds}});
    }
    root.push_back({{"plugin", report.plugin_name}, {"kind", report.plugin_kind}, {"library", report.library},
                    {"passed", report.n_pass()}, {"failed", report.n_fail()},
                    {"not_supported", report.n_not_supported()}, {"cases", cases}});
  }
  return root.dump(2);
}

std::string reports_to_junit(const std::vector<PluginReport>& reports) {
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  for (const auto& report : reports) {
    double total = 0;
    for (const auto& r : report.results) total += r.seconds;
    out << "  <testsuite name=\"loom.conformance." << xml_escape(report.plugin_kind + "." + report.plugin_name)
        << "\" tests=\"" << report.results.size() << "\" failures=\"" << report.n_fail() << "\" skipped=\""
        << report.n_not_supported() << "\" time=\"" << total << "\">\n";
    for (const auto& r : report.results) {
      out << "    <testcase classname=\"" << xml_escape(report.plugin_name) << "\" name=\"" << xml_escape(r.name)
          << "\" time=\"" << r.seconds << "\"";
      if (r.outcome == Outcome::pass) {
        out << "/>\n";
      } else if (r.outcome == Outcome::fail) {
        out << ">\n      <failure message=\"" << xml_escape(r.message) << "\"/>\n    </testcase>\n";
      } else {
        out << ">\n      <skipped message=\"not supported: " << xml_escape(r.message) << "\"/>\n    </testcase>\n";
      }
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace loom::conformance
