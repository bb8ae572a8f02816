#include "common/config/families/knob_reader.h"

#include <cmath>
#include <utility>

namespace sf::config {

KnobReader::KnobReader(const Value::Map& map, std::string path, const HpSpec* group)
    : map_(map), path_(std::move(path)), group_(group) {}

Result<int64_t> KnobReader::Int(const std::string& name) const {
  SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
  if (v->is_int()) return v->as_int();
  if (v->is_double() && std::trunc(v->as_double()) == v->as_double() &&
      std::abs(v->as_double()) < 9e15) {
    return static_cast<int64_t>(v->as_double());
  }
  return InvalidArgument(Path(name) + ": expected an integer, got " + v->ToDisplay());
}

Result<double> KnobReader::Number(const std::string& name) const {
  SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
  if (!v->is_number())
    return InvalidArgument(Path(name) + ": expected a number, got " + v->ToDisplay());
  return v->as_double();
}

Result<bool> KnobReader::Bool(const std::string& name) const {
  SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
  if (!v->is_bool())
    return InvalidArgument(Path(name) + ": expected true or false, got " + v->ToDisplay());
  return v->as_bool();
}

Result<std::string> KnobReader::Choice(const std::string& name) const {
  SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
  const HpSpec* spec = Spec(name);
  std::string options;
  for (const std::string& o : spec->options) {
    if (v->is_string() && v->as_string() == o) return o;
    options += (options.empty() ? "" : ", ") + o;
  }
  return InvalidArgument(Path(name) + ": " + v->ToDisplay() + " is not one of " + options);
}

bool KnobReader::Has(const std::string& name) const {
  auto it = map_.find(name);
  return it != map_.end() && !it->second.is_null();
}

Result<KnobReader> KnobReader::Group(const std::string& name) const {
  SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
  if (!v->is_map()) return InvalidArgument(Path(name) + ": expected a map, got " + v->ToDisplay());
  return KnobReader(v->as_map(), Path(name), Spec(name));
}

const HpSpec* KnobReader::Spec(const std::string& name) const {
  return group_ ? group_->Member(name) : FindHyperparameterSpec(name);
}

Result<const Value*> KnobReader::Find(const std::string& name) const {
  if (auto it = map_.find(name); it != map_.end() && !it->second.is_null()) return &it->second;
  const HpSpec* spec = Spec(name);
  if (group_ && spec && !spec->default_value.is_null()) return &spec->default_value;
  return InvalidArgument(Path(name) +
                         ": no value (the arch's preset gives none and the schema no default)");
}

}  // namespace sf::config
