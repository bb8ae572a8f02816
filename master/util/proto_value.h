// Conversions between sf::Value and protobuf's Struct / Timestamp.
#pragma once

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <string>

#include "common/value.h"

namespace sf::master {

// Value (a map) -> Struct. Non-map values give an empty Struct.
google::protobuf::Struct ValueToStruct(const Value& v);
// Struct -> Value map. Integral numbers come back as integers.
Value StructToValue(const google::protobuf::Struct& s);
// Seconds since the epoch (fractional) -> Timestamp.
google::protobuf::Timestamp SecondsToTimestamp(double seconds);
double NowSeconds();

}  // namespace sf::master
