// RendezvousBoard: ranks meet per named round; a missing rank times out with a reason that
// names it and its agent; closing the allocation releases a waiting rank at once.
#include "master/rendezvous/rendezvous_board.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace sf::master {
namespace {

using std::chrono::milliseconds;

TEST(RendezvousBoard, EveryRankGetsEveryPayloadOfItsRound) {
  RendezvousBoard board;
  board.Open("t1-r0", {"agent-a", "agent-b", "agent-c"});
  std::vector<std::future<sf::Result<RendezvousBoard::Result>>> ranks;
  for (int r = 2; r >= 0; --r) {
    ranks.push_back(std::async(std::launch::async, [&board, r] {
      return board.Arrive("t1-r0", "mpi-server", r, r == 0 ? "uri-of-rank-0" : "", milliseconds(5000));
    }));
  }
  for (auto& f : ranks) {
    auto got = f.get();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->payloads, (std::vector<std::string>{"uri-of-rank-0", "", ""}));
    EXPECT_EQ(got->agents, (std::vector<std::string>{"agent-a", "agent-b", "agent-c"}));
  }
  // A later round starts empty; a retried arrival in a finished round answers at once.
  auto again = board.Arrive("t1-r0", "mpi-server", 1, "", milliseconds(10));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->payloads[0], "uri-of-rank-0");
  auto next = board.Arrive("t1-r0", "mpi-ports", 0, "ports", milliseconds(50));
  EXPECT_FALSE(next.ok());
}

TEST(RendezvousBoard, TimeoutNamesTheMissingRanksAndTheirAgents) {
  RendezvousBoard board;
  board.Open("t7-r2", {"agent-a", "agent-b"});
  auto got = board.Arrive("t7-r2", "members", 0, "agent-a", milliseconds(100));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("rendezvous \"members\" timed out"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("1 of 2 ranks arrived (missing: rank 1 on agent-b)"), std::string::npos)
      << got.status().message();
}

TEST(RendezvousBoard, ClosingTheAllocationReleasesWaitersAndRefusesLateRanks) {
  RendezvousBoard board;
  board.Open("t3-r0", {"a", "b"});
  auto waiting = std::async(std::launch::async, [&] { return board.Arrive("t3-r0", "members", 0, "", milliseconds(30000)); });
  std::this_thread::sleep_for(milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  board.Close("t3-r0");
  auto got = waiting.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("ended while rank 0 waited"), std::string::npos) << got.status().message();
  auto late = board.Arrive("t3-r0", "members", 1, "", milliseconds(10));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("is not running"), std::string::npos);
  // A rank outside the gang is refused.
  board.Open("t4-r0", {"a"});
  EXPECT_EQ(board.Arrive("t4-r0", "members", 3, "", milliseconds(10)).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sf::master
