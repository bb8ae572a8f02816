// Metric ingestion load: N simulated trainers report training metrics to the master's TrialLink
// as fast as they can; prints rows/s and per-call latency percentiles.
//
//   metric_ingest MASTER_GRPC_ADDRESS FIRST_TRIAL_ID TRIALS REPORTS_PER_TRIAL [ROWS_PER_CALL]
//                 [--rows-per-second R] [--reporter]
//
// Each simulated trainer owns one trial and reports steps 1, 2, 3, ... (ROWS_PER_CALL rows per
// call, as a trainer batches its reports), so every row is new and stored. With
// --rows-per-second the trainers together offer R rows/s (each paces its calls; a call that
// comes back late is followed at once by the next due one) instead of calling back to back.
//
// --reporter: each trainer hands its rows, one at a time (as fast as it can, or paced to its
// share of R), to a MetricReporter of its own (core_api/metric_reporter.h, as the Core API's
// Context does), which sends what has piled up in one call while the previous one is in flight
// (ROWS_PER_CALL is ignored). The run ends when every row is acknowledged (Flush). Prints the
// same figures, plus mean_rows_per_call, largest_call_rows and retries.
//
// TrialLink wants each call's task token (master/auth/task_tokens.h). The simulated trainers
// make theirs from the cluster's secret, read from $SF_TASK_TOKEN_SECRET_HEX (the hex of
// cluster_secrets 'task_tokens'; bench/api_load.sh reads it from the database); without it the
// master refuses every call. A TLS master: $SF_MASTER_CA_FILE names its CA, as for a trainer.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "common/command_line.h"
#include "common/tls_files.h"
#include "core_api/metric_reporter.h"
#include "core_api/trial_link_call.h"
#include "master/auth/task_tokens.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace {

// Row `batches` of a simulated trainer's training metrics.
void FillRow(steadfast::v1::MetricReport* m, int64_t batches) {
  m->set_kind("training");
  m->set_batches(batches);
  (*m->mutable_values()->mutable_fields())["loss"].set_number_value(1.0 /
                                                                    static_cast<double>(batches));
  (*m->mutable_values()->mutable_fields())["tokens_per_second"].set_number_value(5000);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Metric ingestion load: simulated trainers report training metrics to TrialLink.", "metric_ingest");
  sf::cmdline::UseDefaults(app);
  std::string master;
  int64_t first = 0;
  int trials = 0, reports = 0, per_call = 1;
  app.add_option("MASTER", master, "the master's gRPC address HOST:PORT")->required();
  app.add_option("FIRST_TRIAL", first, "id of the first trial (trials FIRST..FIRST+TRIALS-1 must exist)")
      ->required()
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("TRIALS", trials, "simulated trainers, one thread and trial each")->required()->check(sf::cmdline::AtLeast(1));
  app.add_option("REPORTS", reports, "rows each trainer reports")->required()->check(sf::cmdline::AtLeast(1));
  app.add_option("ROWS_PER_CALL", per_call, "rows per ReportMetrics call")->check(sf::cmdline::AtLeast(1));
  double rows_per_second = 0;
  app.add_option("--rows-per-second", rows_per_second, "offer this many rows/s in total (default: as fast as possible)")
      ->check(CLI::Range(1.0, 1e9));
  bool use_reporter = false;
  app.add_flag("--reporter", use_reporter,
               "hand rows to a MetricReporter per trainer instead of fixed-size calls");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  std::optional<sf::master::TaskTokens> tokens;
  if (const char* hex = std::getenv("SF_TASK_TOKEN_SECRET_HEX"); hex && *hex) {
    auto t = sf::master::TaskTokens::FromHexSecret(hex);
    if (!t.ok()) {
      std::fprintf(stderr, "metric_ingest: SF_TASK_TOKEN_SECRET_HEX: %s\n", t.status().message().c_str());
      return 2;
    }
    tokens = std::move(t).value();
  }
  // Over TLS when $SF_MASTER_CA_FILE names the master's CA (as trainers do), else plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (const char* ca_file = std::getenv("SF_MASTER_CA_FILE"); ca_file && *ca_file) {
    auto ca = sf::LoadCaCertificates(ca_file, "SF_MASTER_CA_FILE");
    if (!ca.ok()) {
      std::fprintf(stderr, "metric_ingest: %s\n", ca.status().message().c_str());
      return 2;
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    credentials = grpc::SslCredentials(ssl);
  }
  // Per trainer: one call every `call_interval` (zero: back to back).
  const std::chrono::duration<double> call_interval(rows_per_second > 0 ? per_call * trials / rows_per_second : 0.0);
  // --reporter: per trainer, one row every `row_interval` (zero: as fast as Add takes them).
  const std::chrono::duration<double> row_interval(rows_per_second > 0 ? trials / rows_per_second
                                                                       : 0.0);
  std::vector<std::vector<double>> latencies(trials);
  std::vector<sf::core::MetricReporterStats> reporter_stats(trials);
  std::atomic<int> failures{0};
  std::atomic<int64_t> undelivered{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < trials; ++t) {
    threads.emplace_back([&, t] {
      auto stub = steadfast::v1::TrialLink::NewStub(grpc::CreateChannel(master, credentials));
      const std::string token = tokens ? tokens->Issue({first + t, 0, 0, ""}) : "";
      if (use_reporter) {
        steadfast::v1::TrialIdentity who;
        who.set_trial_id(first + t);
        // The Context's sender, timed: latencies[t] is only touched by this reporter's thread.
        auto send = sf::core::TrialLinkMetricSender(stub.get(), who, token);
        sf::core::MetricReporter reporter(
            [&, t, send](const std::vector<steadfast::v1::MetricReport>& rows) {
              auto t0 = std::chrono::steady_clock::now();
              sf::Status st = send(rows);
              if (!st.ok()) failures++;
              latencies[t].push_back(
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
              return st;
            });
        for (int r = 0; r < reports; ++r) {
          if (row_interval.count() > 0) {
            std::this_thread::sleep_until(
                start +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(row_interval * r));
          }
          steadfast::v1::MetricReport row;
          FillRow(&row, r + 1);
          if (!reporter.Add(std::move(row)).ok()) break;
        }
        sf::Status flushed =
            reporter.Flush(std::chrono::steady_clock::now() + std::chrono::minutes(10));
        if (!flushed.ok())
          std::fprintf(stderr, "metric_ingest: trial %lld: %s\n", static_cast<long long>(first + t),
                       flushed.ToString().c_str());
        reporter_stats[t] = reporter.stats();
        undelivered += reports - reporter_stats[t].rows;
        return;
      }
      for (int r = 0, call = 0; r < reports; r += per_call, ++call) {
        if (call_interval.count() > 0) {
          std::this_thread::sleep_until(
              start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(call_interval * call));
        }
        steadfast::v1::ReportMetricsRequest req;
        req.mutable_who()->set_trial_id(first + t);
        for (int k = 0; k < per_call && r + k < reports; ++k) FillRow(req.add_reports(), r + k + 1);
        steadfast::v1::ReportMetricsResponse resp;
        grpc::ClientContext ctx;
        if (!token.empty()) ctx.AddMetadata(sf::master::TaskTokens::kMetadataKey, token);
        auto t0 = std::chrono::steady_clock::now();
        if (!stub->ReportMetrics(&ctx, req, &resp).ok()) failures++;
        latencies[t].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, size_t(p * all.size()))]; };
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double client_cpu = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                            static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  const double cpu_per_1000_rows =
      1000.0 * client_cpu / (static_cast<double>(trials) * reports) * 1000.0;
  if (use_reporter) {
    int64_t calls = 0, rows = 0, largest = 0, retries = 0;
    for (const auto& st : reporter_stats) {
      calls += st.calls;
      rows += st.rows;
      largest = std::max(largest, st.largest_call_rows);
      retries += st.retries;
    }
    std::printf(
        "mode: reporter\ntrainers: %d\nrows: %lld\nmean_rows_per_call: %.1f\nlargest_call_rows: "
        "%lld\n"
        "seconds: %.2f\nrows_per_second: %.0f\ncall_p50_ms: %.2f\ncall_p99_ms: %.2f\nfailed_calls: "
        "%d\n"
        "retries: %lld\nundelivered_rows: %lld\nclient_cpu_ms_per_1000_rows: %.1f\n",
        trials, static_cast<long long>(rows),
        calls ? static_cast<double>(rows) / static_cast<double>(calls) : 0.0,
        static_cast<long long>(largest), seconds, static_cast<double>(rows) / seconds, pct(0.5),
        pct(0.99), failures.load(), static_cast<long long>(retries),
        static_cast<long long>(undelivered.load()), cpu_per_1000_rows);
    return undelivered.load() == 0 ? 0 : 1;
  }
  std::printf(
      "trainers: %d\nrows: %lld\nrows_per_call: %d\nseconds: %.2f\nrows_per_second: %.0f\n"
      "call_p50_ms: %.2f\ncall_p99_ms: %.2f\nfailed_calls: %d\nclient_cpu_ms_per_1000_rows: %.1f\n",
      trials, static_cast<long long>(trials) * reports, per_call, seconds,
      trials * reports / seconds, pct(0.5), pct(0.99), failures.load(), cpu_per_1000_rows);
  return failures.load() == 0 ? 0 : 1;
}
