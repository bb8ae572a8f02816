// The experiment list's hand-written JSON against protobuf's own JSON printer (the reference,
// with the options HttpServer uses): the same document, field for field, for experiments with
// every field set, with optional fields unset, and with strings that need escaping.
#include "master/api/experiment_json.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/value.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

std::string ProtobufJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = false;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out, o).ok());
  return out;
}

// Both documents parsed: equal as JSON values (key order and number spelling aside).
void ExpectSameJson(const google::protobuf::Message& reference, const std::string& ours) {
  auto want = Value::FromJson(ProtobufJson(reference));
  auto got = Value::FromJson(ours);
  ASSERT_TRUE(want.ok());
  ASSERT_TRUE(got.ok()) << ours;
  EXPECT_EQ(got->ToJson(), want->ToJson()) << "ours:     " << ours << "\nprotobuf: " << ProtobufJson(reference);
}

v1::Experiment Full() {
  v1::Experiment e;
  e.set_id(9007199254740993);  // beyond a double's integers: must stay a string
  e.set_name("ünïcode \"quoted\" back\\slash\ttab\nnewline \x01 ctrl <tag> & \x7f");
  e.set_description("a description");
  e.set_state(v1::EXPERIMENT_STATE_ACTIVE);
  e.set_config_yaml("name: x\nsearcher: {name: grid}\n");
  e.set_owner("alice");
  e.set_archived(true);
  e.set_searcher("adaptive_asha");
  e.set_metric("validation_loss");
  e.set_smaller_is_better(true);
  e.set_num_trials(12);
  e.set_num_completed_trials(7);
  e.set_best_validation_metric(0.1 + 0.2);
  e.mutable_start_time()->set_seconds(1795536060);
  e.mutable_start_time()->set_nanos(123456000);
  e.mutable_end_time()->set_seconds(1795539660);
  e.set_priority(-3);
  e.set_error("trainer exited with rank 0=1");
  e.set_unmanaged(true);
  return e;
}

TEST(ExperimentJson, EveryFieldSetMatchesProtobuf) {
  v1::Experiment e = Full();
  std::string ours;
  AppendExperimentJson(e, &ours);
  ExpectSameJson(e, ours);
}

TEST(ExperimentJson, UnsetOptionalFieldsAreLeftOutAsProtobufDoes) {
  v1::Experiment e = Full();
  e.clear_config_yaml();
  e.clear_best_validation_metric();
  e.clear_end_time();
  std::string ours;
  AppendExperimentJson(e, &ours);
  ExpectSameJson(e, ours);
  EXPECT_EQ(ours.find("configYaml"), std::string::npos);
  EXPECT_EQ(ours.find("endTime"), std::string::npos);
  // Defaults everywhere.
  v1::Experiment empty;
  std::string ours_empty;
  AppendExperimentJson(empty, &ours_empty);
  ExpectSameJson(empty, ours_empty);
}

TEST(ExperimentJson, SpecialDoublesMatchProtobuf) {
  for (double d : {0.0, -0.0, 1e-300, 1e300, 123456789.125, 1.0 / 3.0, std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), std::nan("")}) {
    v1::Experiment e = Full();
    e.set_best_validation_metric(d);
    std::string ours;
    AppendExperimentJson(e, &ours);
    ExpectSameJson(e, ours);
  }
}

TEST(ExperimentJson, ResponseWithPaginationMatchesProtobuf) {
  v1::GetExperimentsResponse r;
  for (int i = 0; i < 3; ++i) {
    v1::Experiment e = Full();
    e.set_id(i + 1);
    if (i == 1) e.clear_config_yaml();
    *r.add_experiments() = e;
  }
  auto* p = r.mutable_pagination();
  p->set_offset(5);
  p->set_limit(3);
  p->set_total(42);
  p->set_start_index(5);
  p->set_end_index(8);
  ExpectSameJson(r, ExperimentsResponseJson(r));
  v1::GetExperimentsResponse none;
  ExpectSameJson(none, ExperimentsResponseJson(none));
}

}  // namespace
}  // namespace sf::master
