#include "master/api/experiment_json.h"

#include <google/protobuf/stubs/strutil.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <cstdio>

namespace sf::master {
namespace v1 = steadfast::v1;
namespace {

// A JSON string: quotes, backslashes and control characters escaped; other bytes (PostgreSQL
// text is valid UTF-8) copied as they are.
void AppendString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

void AppendKey(const char* key, std::string* out) {
  out->push_back(',');
  out->push_back('"');
  out->append(key);
  out->append("\":");
}

// As the proto3 JSON mapping: shortest round-tripping decimal; NaN and infinities as strings.
void AppendDouble(double v, std::string* out) {
  if (std::isnan(v)) return out->append("\"NaN\""), void();
  if (std::isinf(v)) return out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\""), void();
  out->append(google::protobuf::SimpleDtoa(v));
}

void AppendTime(const google::protobuf::Timestamp& t, std::string* out) {
  AppendString(google::protobuf::util::TimeUtil::ToString(t), out);
}

}  // namespace

void AppendExperimentJson(const v1::Experiment& e, std::string* out) {
  out->append("{\"id\":\"");
  out->append(std::to_string(e.id()));
  out->push_back('"');
  AppendKey("name", out);
  AppendString(e.name(), out);
  AppendKey("description", out);
  AppendString(e.description(), out);
  AppendKey("state", out);
  const std::string& state = v1::ExperimentState_Name(e.state());
  if (state.empty()) {
    out->append(std::to_string(static_cast<int>(e.state())));
  } else {
    AppendString(state, out);
  }
  if (e.has_config_yaml()) {
    AppendKey("configYaml", out);
    AppendString(e.config_yaml(), out);
  }
  AppendKey("owner", out);
  AppendString(e.owner(), out);
  AppendKey("archived", out);
  out->append(e.archived() ? "true" : "false");
  AppendKey("searcher", out);
  AppendString(e.searcher(), out);
  AppendKey("metric", out);
  AppendString(e.metric(), out);
  AppendKey("smallerIsBetter", out);
  out->append(e.smaller_is_better() ? "true" : "false");
  AppendKey("numTrials", out);
  out->append(std::to_string(e.num_trials()));
  AppendKey("numCompletedTrials", out);
  out->append(std::to_string(e.num_completed_trials()));
  if (e.has_best_validation_metric()) {
    AppendKey("bestValidationMetric", out);
    AppendDouble(e.best_validation_metric(), out);
  }
  if (e.has_start_time()) {
    AppendKey("startTime", out);
    AppendTime(e.start_time(), out);
  }
  if (e.has_end_time()) {
    AppendKey("endTime", out);
    AppendTime(e.end_time(), out);
  }
  AppendKey("priority", out);
  out->append(std::to_string(e.priority()));
  AppendKey("error", out);
  AppendString(e.error(), out);
  AppendKey("workspace", out);
  AppendString(e.workspace(), out);
  AppendKey("unmanaged", out);
  out->append(e.unmanaged() ? "true" : "false");
  out->push_back('}');
}

std::string ExperimentsResponseJson(const v1::GetExperimentsResponse& r) {
  std::string out;
  out.reserve(256 + 400 * static_cast<size_t>(r.experiments_size()));
  out.append("{\"experiments\":[");
  for (int i = 0; i < r.experiments_size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendExperimentJson(r.experiments(i), &out);
  }
  out.append("]");
  if (r.has_pagination()) {
    const v1::Pagination& p = r.pagination();
    out.append(",\"pagination\":{\"offset\":" + std::to_string(p.offset()) + ",\"limit\":" + std::to_string(p.limit()) +
               ",\"total\":" + std::to_string(p.total()) + ",\"startIndex\":" + std::to_string(p.start_index()) +
               ",\"endIndex\":" + std::to_string(p.end_index()) + "}");
  }
  out.push_back('}');
  return out;
}

}  // namespace sf::master
