// How the fields of the master's replies print in `sf`'s tables and descriptions. The text is
// what sf printed when it read the replies' JSON by field name, so scripts that read it keep
// working: int64s in decimal, doubles as the JSON wrote them when that is an integer ("3") and
// to 4 significant digits otherwise ("0.1235"), NaN and infinities by name, an absent optional
// or message field as "", Timestamps in RFC 3339 as protobuf's JSON mapping writes them, bools
// as true/false, Structs as compact JSON with sorted keys. Pure functions; thread-safe.
#pragma once

#include <google/protobuf/generated_enum_reflection.h>
#include <google/protobuf/message.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <string>

namespace sf::cli {

std::string NumberText(double v);
// An `optional double`: "" when absent.
std::string NumberText(bool present, double v);
// "" when absent.
std::string TimeText(bool present, const google::protobuf::Timestamp& t);
std::string BoolText(bool b);

// An enum value's name without its enum's prefix: TRIAL_STATE_RUNNING -> "RUNNING"; the number
// when this sf does not know it.
std::string EnumText(const google::protobuf::EnumDescriptor* type, int value);
template <class Enum>
std::string EnumText(Enum value) {
  return EnumText(google::protobuf::GetEnumDescriptor<Enum>(), static_cast<int>(value));
}

// hparams, metric values: {"lr":0.001,"n":4}.
std::string StructJson(const google::protobuf::Struct& s);
// One value of a Struct (a metric) as a table cell: numbers as NumberText, strings as they are,
// null as "", lists and maps as JSON.
std::string StructValueText(const google::protobuf::Value& v);

// A message as the master's JSON writes it (every primitive field, lowerCamelCase names), as
// --json prints it: compact, keys sorted.
std::string MessageJson(const google::protobuf::Message& m);
// Singular field `f` of `m` as the above print it (enums by their full name, as the JSON has them).
std::string FieldText(const google::protobuf::Message& m,
                      const google::protobuf::FieldDescriptor* f);

}  // namespace sf::cli
