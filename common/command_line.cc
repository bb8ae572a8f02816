#include "common/command_line.h"

#include <iostream>

namespace sf::cmdline {

void UseDefaults(CLI::App& app) {
  // Subcommands created after this inherit the help flag and the option defaults.
  app.set_help_flag("-h,--help", "print this help and exit");
  app.option_defaults()->always_capture_default();
}

CLI::Validator AtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a whole number";
        if (v < min) return "must be >= " + std::to_string(min) + ", not " + text;
        return std::string();
      },
      ">=" + std::to_string(min));
}

std::string CommandPath(const CLI::App& command) {
  std::string path = command.get_name();
  for (const CLI::App* p = command.get_parent(); p != nullptr; p = p->get_parent()) {
    path = p->get_name() + " " + path;
  }
  return path;
}

int UsageError(const CLI::App& command, const std::string& message, std::ostream& err) {
  err << CommandPath(command) << ": " << message << "\nrun '" << CommandPath(command)
      << " --help' for usage\n";
  return kExitUsage;
}

namespace {

// The deepest subcommand the parse reached: errors and help are about it.
const CLI::App* Deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    auto chosen = at->get_subcommands();
    if (chosen.empty()) return at;
    at = chosen.front();
  }
}

template <typename ParseFn>
std::optional<int> Run(CLI::App& app, ParseFn parse, std::ostream& out, std::ostream& err) {
  try {
    parse();
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    const CLI::App& at = *Deepest(app);
    // "sf-trainer frobnicate": CLI11 says only that a subcommand is required.
    std::vector<std::string> extra = at.remaining();
    auto commands = at.get_subcommands([](const CLI::App*) { return true; });
    if (!extra.empty() && !commands.empty()) {
      if (extra.front().rfind("-", 0) == 0) {  // "sf --bogus": a flag where a command belongs
        return UsageError(at, "unknown flag '" + extra.front() + "'", err);
      }
      std::string names;
      for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
      return UsageError(at, "unknown command '" + extra.front() + "' (commands: " + names + ")", err);
    }
    return UsageError(at, e.what(), err);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                         std::ostream& err) {
  return Run(app, [&] { app.parse(argc, argv); }, out, err);
}

std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv) {
  return Parse(app, argc, argv, std::cout, std::cerr);
}

std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err) {
  // CLI11 takes a vector in reverse order (it pops from the back).
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  return Run(app, [&] { app.parse(reversed); }, out, err);
}

}  // namespace sf::cmdline
