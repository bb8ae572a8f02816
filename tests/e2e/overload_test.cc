// Reads under load against a real master and PostgreSQL (docs/cluster.md "Reads under load"):
// the API's reads have database connections of their own with a bounded wait. With one read
// connection held by a list that PostgreSQL blocks (another session holds a lock on the
// experiments table), the next read is answered 503 with Retry-After in about the configured
// wait, not queued; the blocked list completes once the lock goes, and reads are served again.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>
#include <pqxx/pqxx>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using namespace std::chrono_literals;

struct Reply {
  int status = 0;
  std::string retry_after, body;
};

// One GET as the cluster's admin, on a connection of its own.
Reply Get(const Cluster& cluster, const std::string& target) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  const std::string host = "127.0.0.1";
  const std::string port = cluster.url().substr(cluster.url().rfind(':') + 1);
  stream.connect(tcp::resolver(io).resolve(host, port));
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, host);
  req.set(http::field::authorization, "Bearer " + cluster.admin_token());
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return {static_cast<int>(res.result_int()), std::string(res[http::field::retry_after]), res.body()};
}

TEST(ReadsUnderLoad, AReadThatGetsNoConnectionInTimeIs503WithRetryAfterAndTheOthersGoOn) {
  ClusterLayout layout;
  layout.master_flags = {"--db-read-pool-size", "1", "--db-read-wait-ms", "300", "--experiment-list-cache-ms", "0"};
  Cluster cluster(0, 1, layout);
  cluster.StartMaster();
  if (HasFatalFailure()) return;
  ASSERT_EQ(Get(cluster, "/api/v1/experiments").status, 200);

  // Another session locks the experiments table: the next list waits in PostgreSQL, holding the
  // only read connection.
  pqxx::connection locker(cluster.db());
  pqxx::work lock(locker);
  lock.exec("LOCK TABLE experiments IN ACCESS EXCLUSIVE MODE");
  auto blocked = std::async(std::launch::async, [&] { return Get(cluster, "/api/v1/experiments"); });
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        return Count(cluster.db(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                   "AND query LIKE '%FROM experiments%'") > 0;
      },
      std::chrono::seconds(30)));

  const auto start = std::chrono::steady_clock::now();
  Reply busy = Get(cluster, "/api/v1/experiments/1");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_EQ(busy.retry_after, "1");
  EXPECT_NE(busy.body.find("the database is busy"), std::string::npos) << busy.body;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 10s);
  EXPECT_EQ(blocked.wait_for(0s), std::future_status::timeout) << "the list waits for the lock";

  lock.abort();
  Reply listed = blocked.get();
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(Get(cluster, "/api/v1/experiments/1").status, 404);
}

}  // namespace
}  // namespace sf::testing
