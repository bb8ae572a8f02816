// The PostgreSQL ceiling for metric ingestion: the rows bench/metric_ingest.cc sends through the
// master, inserted straight into PostgreSQL, once by COPY and once by multi-row INSERT ... ON
// CONFLICT DO NOTHING, and once by the master's own statement (jsonb_to_recordset), each batch its
// own committed transaction.
// The target is a scratch copy of the metrics table (same columns, defaults, UNIQUE and index;
// no foreign key), dropped at the end. Prints rows/s for each.
//
//   pg_ingest_ceiling CONNECTION_STRING ROWS [--copy-batch N] [--insert-batch N] [--jsonb-batch N]
#include <libpq-fe.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/command_line.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Exec(PGconn* conn, const std::string& sql) {
  std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn, sql.c_str()), &PQclear);
  ExecStatusType s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    std::fprintf(stderr, "pg_ingest_ceiling: %s: %s", sql.substr(0, 60).c_str(),
                 PQerrorMessage(conn));
    return false;
  }
  return true;
}

// Row i as metric_ingest sends it: trial 1 + i / per_trial, batches 1 + i % per_trial.
struct Row {
  int64_t trial, batches;
  std::string vals;
};
Row MakeRow(int64_t i, int64_t per_trial) {
  int64_t batches = 1 + i % per_trial;
  char vals[96];
  std::snprintf(vals, sizeof vals, "{\"loss\": %.17g, \"tokens_per_second\": 5000}",
                1.0 / static_cast<double>(batches));
  return {1 + i / per_trial, batches, vals};
}

// COPY rows [0, n) in batches of `batch`, one transaction each. Returns seconds, < 0 on error.
double Copy(PGconn* conn, int64_t n, int64_t per_trial, int batch) {
  auto start = Clock::now();
  for (int64_t first = 0; first < n; first += batch) {
    if (!Exec(conn, "BEGIN")) return -1;
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
        PQexec(conn,
               "COPY bench_ceiling_metrics (trial_id, kind, batches, restart, vals) FROM STDIN"),
        &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COPY_IN) {
      std::fprintf(stderr, "pg_ingest_ceiling: COPY: %s", PQerrorMessage(conn));
      return -1;
    }
    std::string data;
    for (int64_t i = first; i < std::min(n, first + batch); ++i) {
      Row row = MakeRow(i, per_trial);
      data += std::to_string(row.trial) + "\ttraining\t" + std::to_string(row.batches) + "\t0\t" +
              row.vals + "\n";
    }
    if (PQputCopyData(conn, data.data(), static_cast<int>(data.size())) != 1 ||
        PQputCopyEnd(conn, nullptr) != 1) {
      std::fprintf(stderr, "pg_ingest_ceiling: COPY data: %s", PQerrorMessage(conn));
      return -1;
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> done(PQgetResult(conn), &PQclear);
    if (PQresultStatus(done.get()) != PGRES_COMMAND_OK) {
      std::fprintf(stderr, "pg_ingest_ceiling: COPY end: %s", PQerrorMessage(conn));
      return -1;
    }
    while (PGresult* extra = PQgetResult(conn)) {
      PQclear(extra);
    }
    if (!Exec(conn, "COMMIT")) return -1;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// INSERT ... VALUES ($1..), ($6..), ... ON CONFLICT DO NOTHING, `batch` rows per statement,
// each statement its own transaction.
double Insert(PGconn* conn, int64_t n, int64_t per_trial, int batch) {
  auto start = Clock::now();
  for (int64_t first = 0; first < n; first += batch) {
    int64_t count = std::min<int64_t>(batch, n - first);
    std::string sql =
        "INSERT INTO bench_ceiling_metrics (trial_id, kind, batches, restart, vals) VALUES ";
    std::vector<std::string> values;
    values.reserve(count * 3);
    for (int64_t k = 0; k < count; ++k) {
      Row row = MakeRow(first + k, per_trial);
      values.push_back(std::to_string(row.trial));
      values.push_back(std::to_string(row.batches));
      values.push_back(row.vals);
      int p = static_cast<int>(k) * 3;
      sql += (k ? ",(" : "(") + ("$" + std::to_string(p + 1)) + "::bigint,'training',$" +
             std::to_string(p + 2) + "::bigint,0,$" + std::to_string(p + 3) + "::jsonb)";
    }
    sql += " ON CONFLICT (trial_id, kind, batches) DO NOTHING";
    std::vector<const char*> params;
    params.reserve(values.size());
    for (const auto& v : values) {
      params.push_back(v.c_str());
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
        PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(),
                     nullptr, nullptr, 0),
        &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      std::fprintf(stderr, "pg_ingest_ceiling: INSERT: %s", PQerrorMessage(conn));
      return -1;
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The master's own statement (master/ingest/metric_writer.cc): the rows of a group as one JSON
// array, INSERT ... SELECT FROM jsonb_to_recordset ... ON CONFLICT DO NOTHING, `batch` rows per
// transaction.
double JsonbInsert(PGconn* conn, int64_t n, int64_t per_trial, int batch) {
  auto start = Clock::now();
  for (int64_t first = 0; first < n; first += batch) {
    std::string json = "[";
    for (int64_t i = first; i < std::min(n, first + batch); ++i) {
      Row row = MakeRow(i, per_trial);
      if (i > first) {
        json += ",";
      }
      json += "{\"trial_id\":" + std::to_string(row.trial) +
              ",\"kind\":\"training\",\"batches\":" + std::to_string(row.batches) +
              ",\"restart\":0,\"vals\":" + row.vals + "}";
    }
    json += "]";
    const char* params[] = {json.c_str()};
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
        PQexecParams(conn,
                     "INSERT INTO bench_ceiling_metrics (trial_id, kind, batches, restart, vals) "
                     "SELECT x.trial_id, x.kind, x.batches, x.restart, x.vals FROM "
                     "jsonb_to_recordset($1::jsonb) "
                     "AS x(trial_id BIGINT, kind TEXT, batches BIGINT, restart INT, vals JSONB) "
                     "ON CONFLICT (trial_id, kind, batches) DO NOTHING",
                     1, nullptr, params, nullptr, nullptr, 0),
        &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      std::fprintf(stderr, "pg_ingest_ceiling: jsonb INSERT: %s", PQerrorMessage(conn));
      return -1;
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "PostgreSQL ceiling for metric ingestion: the same rows by COPY and by multi-row INSERT.",
      "pg_ingest_ceiling");
  sf::cmdline::UseDefaults(app);
  std::string connection;
  int64_t rows = 0;
  int per_trial = 2000, copy_batch = 10000, insert_batch = 1000, jsonb_batch = 640;
  app.add_option("CONNECTION", connection,
                 "libpq connection string of a database with the metrics table")
      ->required();
  app.add_option("ROWS", rows, "rows to insert by each method")
      ->required()
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--rows-per-trial", per_trial, "rows per simulated trial")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--copy-batch", copy_batch, "rows per COPY (one transaction each)")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--insert-batch", insert_batch, "rows per INSERT statement (one transaction each)")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--jsonb-batch", jsonb_batch,
                 "rows per transaction in the master's statement (64 trainers x 10)")
      ->check(sf::cmdline::AtLeast(1));
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;

  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(connection.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::fprintf(stderr, "pg_ingest_ceiling: cannot connect: %s", PQerrorMessage(conn.get()));
    return 1;
  }
  if (!Exec(conn.get(), "SET client_min_messages = warning")) return 1;
  auto fresh_table = [&] {
    return Exec(conn.get(), "DROP TABLE IF EXISTS bench_ceiling_metrics") &&
           Exec(conn.get(),
                "CREATE TABLE bench_ceiling_metrics (LIKE metrics INCLUDING DEFAULTS INCLUDING "
                "CONSTRAINTS "
                "INCLUDING INDEXES)");
  };
  if (!fresh_table()) return 1;
  double copy_s = Copy(conn.get(), rows, per_trial, copy_batch);
  if (copy_s < 0 || !fresh_table()) return 1;
  double insert_s = Insert(conn.get(), rows, per_trial, insert_batch);
  if (insert_s < 0 || !fresh_table()) return 1;
  double jsonb_s = JsonbInsert(conn.get(), rows, per_trial, jsonb_batch);
  if (jsonb_s < 0) return 1;
  (void)Exec(conn.get(), "DROP TABLE bench_ceiling_metrics");
  std::printf("rows: %" PRId64
              "\ncopy_rows_per_transaction: %d\ncopy_rows_per_second: %.0f\n"
              "insert_rows_per_statement: %d\ninsert_rows_per_second: %.0f\n"
              "master_statement_rows_per_transaction: %d\nmaster_statement_rows_per_second: %.0f\n",
              rows, copy_batch, rows / copy_s, insert_batch, rows / insert_s, jsonb_batch,
              rows / jsonb_s);
  return 0;
}
