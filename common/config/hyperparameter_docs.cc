#include "common/config/hyperparameter_docs.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "common/config/families/model_families.h"
#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

std::string TypeName(const HpSpec& s) {
  switch (s.type) {
    case HpSpec::Type::kInt: return "int";
    case HpSpec::Type::kDouble: return "number";
    case HpSpec::Type::kBool: return "bool";
    case HpSpec::Type::kEnum: return "string";
    case HpSpec::Type::kNumberList: return "list of " + std::to_string(s.list_length) + " numbers";
    case HpSpec::Type::kGroup: return "group";
  }
  return "";
}

std::string Bound(double x) {
  if (std::isinf(x)) return x > 0 ? "∞" : "−∞";
  if (std::trunc(x) == x && std::abs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  std::ostringstream out;
  out << x;
  return out.str();
}

std::string Range(const HpSpec& s) {
  if (s.type == HpSpec::Type::kEnum) {
    std::string out;
    for (const std::string& o : s.options) out += (out.empty() ? "" : ", ") + ("`" + o + "`");
    return out;
  }
  if (s.type == HpSpec::Type::kBool || s.type == HpSpec::Type::kGroup) return "";
  if (s.type == HpSpec::Type::kInt) return Bound(s.min) + "–" + Bound(s.max);
  return std::string(s.min_exclusive ? "(" : "[") + Bound(s.min) + ", " + Bound(s.max) + (s.max_exclusive ? ")" : "]");
}

std::string Shown(const Value& v) { return "`" + v.ToJson() + "`"; }

std::string Families(const HpSpec& s) {
  if (s.families.empty()) return "all";
  std::string out;
  for (const std::string& f : s.families) out += (out.empty() ? "" : ", ") + f;
  return out;
}

// "|"-safe cell text.
std::string Cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string HyperparameterReferenceMarkdown() {
  std::ostringstream md;
  md << "| name | type | default | range / values | families | meaning |\n";
  md << "|---|---|---|---|---|---|\n";
  for (const auto& [name, spec] : HyperparameterSchema()) {
    if (spec.type == HpSpec::Type::kGroup) {
      md << "| `" << name << "` | group | | | " << Families(spec) << " | " << Cell(spec.doc) << " |\n";
      for (const auto& [member, m] : spec.members) {
        std::string used_by;
        size_t types = 0;
        if (member != "type") {
          for (const auto& [type, members] : spec.members_by_type) {
            for (const std::string& x : members) {
              if (x == member) {
                used_by += (used_by.empty() ? "" : ", ") + type;
                ++types;
              }
            }
          }
        }
        if (types == spec.members_by_type.size()) used_by.clear();  // every type's
        md << "| `" << name << "." << member << "` | " << TypeName(m) << " | "
           << (m.default_value.is_null() ? "" : Shown(m.default_value)) << " | " << Cell(Range(m)) << " | "
           << (used_by.empty() ? "all" : "type: " + used_by) << " | " << Cell(m.doc) << " |\n";
      }
      continue;
    }
    bool preset = false;
    for (const auto& [arch, values] : ArchPresets()) preset = preset || values.count(name) > 0;
    // No default and in no preset: derived from others (see its meaning), or absent.
    const std::string def = !spec.default_value.is_null() ? Shown(spec.default_value)
                            : preset                      ? "from `arch`"
                                                          : "see meaning";
    md << "| `" << name << "` | " << TypeName(spec) << " | " << def << " | " << Cell(Range(spec)) << " | "
       << Families(spec) << " | " << Cell(spec.doc) << " |\n";
  }
  // What each arch's trials are completed with: the preset, then the schema's defaults.
  for (const FamilySchema& f : FamilySchemas()) {
    const std::string& family = f.name;
    std::vector<std::string> members;
    for (const auto& [a, preset] : f.archs) members.push_back(a);
    std::vector<Value::Map> completed;
    std::set<std::string> keys;
    for (const std::string& a : members) {
      completed.push_back(WithDefaults(Value(Value::Map{{"arch", a}})).as_map());
      for (const auto& [k, v] : completed.back()) {
        if (k != "arch" && !v.is_map()) keys.insert(k);
      }
    }
    md << "\n" << family << " family, as each arch's trials are completed:\n\n| hyperparameter |";
    for (const std::string& a : members) md << " `" << a << "` |";
    md << "\n|---|";
    for (size_t i = 0; i < members.size(); ++i) md << "---|";
    md << "\n";
    // Schema order.
    for (const auto& [name, spec] : HyperparameterSchema()) {
      if (!keys.count(name)) continue;
      md << "| `" << name << "` |";
      for (const Value::Map& c : completed) {
        auto it = c.find(name);
        md << " " << (it == c.end() ? std::string("") : it->second.ToJson()) << " |";
      }
      md << "\n";
    }
  }
  return md.str();
}

}  // namespace sf::config
