// `sf` prints reply fields read by type (cli/reply_text.h) as it printed them when it read the
// master's JSON by field name: the reference below is that reader (the former cli::Str), fed the
// JSON the master writes for the same message.
#include "cli/reply_text.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "common/value.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace pb = google::protobuf;
namespace v1 = steadfast::v1;

// The former Str(obj, key): "" when absent or null; strings as they are; doubles to 4
// significant digits; others as JSON.
std::string Reference(const Value& obj, const std::string& key) {
  const Value* v = obj.Find(key);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4g", v->as_double());
    return buf;
  }
  return v->ToDisplay();
}

// `m` as the master's MessageJson writes it, read as a Value.
Value MasterJson(const pb::Message& m) {
  std::string json;
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  EXPECT_TRUE(pb::util::MessageToJsonString(m, &json, o).ok());
  auto v = Value::FromJson(json);
  EXPECT_TRUE(v.ok()) << json;
  return v.ok() ? *v : Value();
}

TEST(ReplyTextTest, NumbersPrintAsTheJsonReaderPrintedThem) {
  for (double d : {0.0,
                   -0.0,
                   0.5,
                   1.0,
                   3.0,
                   -7.0,
                   123456.0,
                   0.123456789,
                   1e-7,
                   2.5e-3,
                   99999.5,
                   1e14,
                   1e15,
                   1e16,
                   1234567890123456.0,
                   1e21,
                   -1e300,
                   std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    v1::Trial t;
    t.set_best_validation_metric(d);
    EXPECT_EQ(NumberText(t.has_best_validation_metric(), t.best_validation_metric()),
              Reference(MasterJson(t), "bestValidationMetric"))
        << d;
  }
  v1::Trial unset;
  EXPECT_EQ(NumberText(unset.has_best_validation_metric(), unset.best_validation_metric()),
            Reference(MasterJson(unset), "bestValidationMetric"));
  EXPECT_EQ(NumberText(false, 1.0), "");
}

TEST(ReplyTextTest, TimesBoolsEnumsAndIntegersPrintAsTheJsonReaderPrintedThem) {
  v1::Agent a;
  a.set_connected(true);
  for (int nanos : {0, 1000000, 123000, 7, 999999999}) {
    a.mutable_last_heartbeat()->set_seconds(1795536060);
    a.mutable_last_heartbeat()->set_nanos(nanos);
    EXPECT_EQ(TimeText(a.has_last_heartbeat(), a.last_heartbeat()),
              Reference(MasterJson(a), "lastHeartbeat"));
  }
  EXPECT_EQ(BoolText(a.connected()), Reference(MasterJson(a), "connected"));
  EXPECT_EQ(TimeText(false, a.last_heartbeat()), "");
  v1::Trial t;
  t.set_state(v1::TRIAL_STATE_RUNNING);
  EXPECT_EQ(EnumText(t.state()), "RUNNING");
  EXPECT_EQ(EnumText(v1::EXPERIMENT_STATE_STOPPING_CANCELED), "STOPPING_CANCELED");
  EXPECT_EQ(EnumText(v1::SLOT_TYPE_CUDA), "CUDA");
  EXPECT_EQ(EnumText(static_cast<v1::TrialState>(42)), "42");
  t.set_total_batches(int64_t{1} << 40);
  EXPECT_EQ(std::to_string(t.total_batches()), Reference(MasterJson(t), "totalBatches"));
}

TEST(ReplyTextTest, StructsPrintAsTheJsonReaderPrintedThem) {
  v1::MetricReport m;
  auto& fields = *m.mutable_values()->mutable_fields();
  fields["loss"].set_number_value(0.123456789);
  fields["steps"].set_number_value(4000);
  fields["name"].set_string_value("a \"b\"");
  fields["ok"].set_bool_value(false);
  fields["none"].set_null_value(pb::NULL_VALUE);
  fields["list"].mutable_list_value()->add_values()->set_number_value(1.5);
  (*fields["nested"].mutable_struct_value()->mutable_fields())["z"].set_number_value(2);
  const Value json = MasterJson(m);
  EXPECT_EQ(StructJson(m.values()), json.Find("values")->ToJson());
  for (const auto& [key, value] : fields)
    EXPECT_EQ(StructValueText(value), Reference(*json.Find("values"), key)) << key;
}

TEST(ReplyTextTest, FieldTextPrintsEachFieldAsTheJsonReaderPrintedIt) {
  v1::GetMasterResponse master;
  master.set_version("0.9");
  master.set_connected_agents(3);
  const Value json = MasterJson(master);
  const pb::Descriptor* d = master.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    EXPECT_EQ(FieldText(master, d->field(i)), Reference(json, d->field(i)->json_name()))
        << d->field(i)->name();
  }
  v1::Experiment e;
  e.set_state(v1::EXPERIMENT_STATE_PAUSED);
  const Value ej = MasterJson(e);
  for (const char* name :
       {"state", "configYaml", "bestValidationMetric", "startTime", "archived", "numTrials"}) {
    const pb::FieldDescriptor* f = nullptr;
    for (int i = 0; i < e.GetDescriptor()->field_count(); ++i) {
      if (e.GetDescriptor()->field(i)->json_name() == name) f = e.GetDescriptor()->field(i);
    }
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(FieldText(e, f), Reference(ej, name)) << name;
  }
}

TEST(ReplyTextTest, MessageJsonIsTheMastersJsonWithSortedKeys) {
  v1::LogLine l;
  l.set_id(5);
  l.set_message("hello");
  l.mutable_time()->set_seconds(1795536060);
  EXPECT_EQ(MessageJson(l), MasterJson(l).ToJson());
}

}  // namespace
}  // namespace sf::cli
