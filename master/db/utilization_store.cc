#include "master/db/utilization_store.h"

namespace sf::master {

int64_t MinuteStart(int64_t unix_seconds) {
  int64_t minute = unix_seconds / 60;
  if (unix_seconds % 60 < 0) minute -= 1;  // C++ division truncates toward zero
  return minute * 60;
}

Status UtilizationStore::Record(int64_t at_unix_seconds, const std::vector<PoolSample>& samples) {
  if (samples.empty()) return Status::Ok();
  const int64_t minute = MinuteStart(at_unix_seconds);
  return db_->Transact("record utilization", [&](pqxx::work& tx) {
    for (const PoolSample& s : samples) {
      tx.exec_params(
          "INSERT INTO cluster_utilization AS u"
          " (pool, minute, slots_total, busy_avg, busy_max, samples) "
          "VALUES ($1, to_timestamp($2), $3, $4, $5, 1) "
          "ON CONFLICT (pool, minute) DO UPDATE SET "
          " busy_avg = (u.busy_avg * u.samples + EXCLUDED.busy_avg) / (u.samples + 1),"
          " busy_max = GREATEST(u.busy_max, EXCLUDED.busy_max),"
          " slots_total = GREATEST(u.slots_total, EXCLUDED.slots_total),"
          " samples = u.samples + 1",
          s.pool, minute, s.slots_total, static_cast<double>(s.slots_busy), s.slots_busy);
    }
    return Status::Ok();
  });
}

Result<int64_t> UtilizationStore::DeleteBefore(int64_t cutoff_unix_seconds) {
  int64_t deleted = 0;
  Status st = db_->Transact("prune utilization", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "DELETE FROM cluster_utilization WHERE minute < to_timestamp($1)", cutoff_unix_seconds);
    deleted = r.affected_rows();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return deleted;
}

Result<std::vector<UtilizationPoint>> UtilizationStore::Read(int64_t since_unix_seconds,
                                                             const std::string& pool) {
  std::vector<UtilizationPoint> out;
  Status st = db_->Transact("read utilization", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT pool, EXTRACT(EPOCH FROM minute)::BIGINT, slots_total, busy_avg, busy_max, samples "
        "FROM cluster_utilization WHERE minute >= to_timestamp($1) AND ($2 = '' OR pool = $2) "
        "ORDER BY minute, pool",
        MinuteStart(since_unix_seconds), pool);
    out.reserve(r.size());
    for (const auto& row : r) {
      UtilizationPoint p;
      p.pool = row[0].as<std::string>();
      p.minute = row[1].as<int64_t>();
      p.slots_total = row[2].as<int>();
      p.busy_avg = row[3].as<double>();
      p.busy_max = row[4].as<int>();
      p.samples = row[5].as<int>();
      out.push_back(std::move(p));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace sf::master
