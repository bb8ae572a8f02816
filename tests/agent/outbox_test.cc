#include "agent/outbox.h"

#include <gtest/gtest.h>

#include <thread>

namespace sf::agent {
namespace {

using namespace std::chrono_literals;
using steadfast::v1::TaskStateChange;

steadfast::v1::LogLine Line(const std::string& text, int64_t trial = 1) {
  steadfast::v1::LogLine line;
  line.set_trial_id(trial);
  line.set_stream("stdout");
  line.set_message(text);
  return line;
}

TaskStateChange State(const std::string& task, TaskStateChange::State state) {
  TaskStateChange change;
  change.set_task_id(task);
  change.set_state(state);
  return change;
}

auto Soon() { return std::chrono::steady_clock::now() + 20ms; }

TEST(OutboxTest, LinesWaitForTheBatchDelay) {
  Outbox::Options options;
  options.max_batch_delay = 150ms;
  Outbox outbox(options);
  auto pushed = std::chrono::steady_clock::now();
  outbox.PushLog(Line("a"));
  outbox.PushLog(Line("b"));
  auto message = outbox.Take(pushed + 5s);
  ASSERT_TRUE(message.has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - pushed, 150ms);  // not released before the delay
  ASSERT_TRUE(message->has_logs());
  ASSERT_EQ(message->logs().lines_size(), 2);
  EXPECT_EQ(message->logs().lines(0).message(), "a");
  EXPECT_EQ(message->logs().lines(1).message(), "b");
  EXPECT_FALSE(outbox.empty());  // until the master acknowledges it
  outbox.Ack(message->sequence());
  EXPECT_TRUE(outbox.empty());
}

TEST(OutboxTest, FullBatchGoesAtOnceAndIsCapped) {
  Outbox::Options options;
  options.max_batch_delay = std::chrono::hours(1);  // only a full batch is ready
  Outbox outbox(options);
  for (int i = 0; i < 1200; ++i) outbox.PushLog(Line(std::to_string(i)));
  auto first = outbox.Take(Soon());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->logs().lines_size(), 500);
  EXPECT_EQ(first->logs().lines(0).message(), "0");
  auto second = outbox.Take(Soon());
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->logs().lines(0).message(), "500");
  EXPECT_FALSE(outbox.Take(Soon()).has_value());  // 200 lines left: not yet
  EXPECT_EQ(outbox.Take(Soon(), /*flush=*/true)->logs().lines_size(), 200);
}

TEST(OutboxTest, BatchesStayUnderOneMebibyte) {
  Outbox outbox;
  for (int i = 0; i < 100; ++i) outbox.PushLog(Line(std::string(16384, 'x')));
  auto first = outbox.Take(Soon());  // full by size: no waiting
  ASSERT_TRUE(first.has_value());
  EXPECT_LE(first->ByteSizeLong(), (1u << 20) + 4096);
  EXPECT_GE(first->logs().lines_size(), 50);
  EXPECT_LT(first->logs().lines_size(), 100);
}

TEST(OutboxTest, StateChangeFlushesTheLinesBeforeIt) {
  Outbox outbox;
  outbox.PushState(State("t", TaskStateChange::STATE_STARTED));
  outbox.PushLog(Line("last words"));
  outbox.PushState(State("t", TaskStateChange::STATE_EXITED));
  auto m1 = outbox.Take(Soon());
  auto m2 = outbox.Take(Soon());
  auto m3 = outbox.Take(Soon());
  ASSERT_TRUE(m1 && m2 && m3);
  EXPECT_EQ(m1->task_state().state(), TaskStateChange::STATE_STARTED);
  EXPECT_EQ(m2->logs().lines(0).message(), "last words");
  EXPECT_EQ(m3->task_state().state(), TaskStateChange::STATE_EXITED);
}

TEST(OutboxTest, BoundDropsOldestLinesAndSaysSo) {
  Outbox::Options options;
  options.max_log_lines = 10;
  Outbox outbox(options);
  outbox.PushState(State("t", TaskStateChange::STATE_STARTED));
  for (int i = 0; i < 25; ++i) outbox.PushLog(Line(std::to_string(i), 7));
  EXPECT_EQ(outbox.log_lines(), 10u);
  EXPECT_EQ(outbox.dropped_lines(), 15u);
  auto started = outbox.Take(Soon());  // state changes are never dropped
  ASSERT_TRUE(started && started->has_task_state());
  auto batch = outbox.Take(Soon(), /*flush=*/true);
  ASSERT_TRUE(batch && batch->has_logs());
  ASSERT_EQ(batch->logs().lines_size(), 11);
  EXPECT_EQ(batch->logs().lines(0).trial_id(), 7);
  EXPECT_NE(batch->logs().lines(0).message().find("15 earlier log lines"), std::string::npos)
      << batch->logs().lines(0).message();
  EXPECT_EQ(batch->logs().lines(1).message(), "15");
  EXPECT_EQ(batch->logs().lines(10).message(), "24");
}

TEST(OutboxTest, MessagesCarryIncreasingSequences) {
  Outbox outbox;
  outbox.PushLog(Line("a"));
  outbox.PushState(State("t", TaskStateChange::STATE_EXITED));
  auto first = outbox.Take(Soon());
  auto second = outbox.Take(Soon());
  ASSERT_TRUE(first && first->has_logs());
  ASSERT_TRUE(second && second->has_task_state());
  EXPECT_EQ(first->sequence(), 1);
  EXPECT_EQ(second->sequence(), 2);
  EXPECT_EQ(outbox.last_sequence(), 2);
}

TEST(OutboxTest, KeepsTakenMessagesUntilAcknowledged) {
  Outbox outbox;
  outbox.PushLog(Line("a"));
  outbox.PushState(State("t", TaskStateChange::STATE_EXITED));
  ASSERT_TRUE(outbox.Take(Soon()));
  ASSERT_TRUE(outbox.Take(Soon()));
  EXPECT_EQ(outbox.unacked(), 2u);
  EXPECT_FALSE(outbox.empty());  // sent is not delivered
  EXPECT_FALSE(outbox.Take(Soon()).has_value());  // nothing new, nothing re-sent unasked
  outbox.Ack(1);
  EXPECT_EQ(outbox.unacked(), 1u);
  EXPECT_FALSE(outbox.empty());
  outbox.Ack(2);
  EXPECT_EQ(outbox.unacked(), 0u);
  EXPECT_TRUE(outbox.empty());
  outbox.Ack(7);  // beyond what was sent: ignored
  EXPECT_TRUE(outbox.empty());
}

TEST(OutboxTest, RewindResendsUnacknowledgedInOrderWithTheSameSequenceBeforeNewOnes) {
  Outbox outbox;
  outbox.PushLog(Line("a"));
  outbox.PushState(State("t", TaskStateChange::STATE_EXITED));
  auto logs = outbox.Take(Soon());
  auto exited = outbox.Take(Soon());
  ASSERT_TRUE(logs && exited);
  // The connection drops; the master had applied only the logs. Meanwhile a new line waits.
  outbox.PushLog(Line("b"));
  outbox.Rewind();
  outbox.Ack(1);  // the new connection's RegisterAck: applied through 1
  auto again = outbox.Take(Soon());
  ASSERT_TRUE(again && again->has_task_state());
  EXPECT_EQ(again->sequence(), 2);
  EXPECT_EQ(again->SerializeAsString(), exited->SerializeAsString());
  auto fresh = outbox.Take(Soon(), /*flush=*/true);
  ASSERT_TRUE(fresh && fresh->has_logs());
  EXPECT_EQ(fresh->sequence(), 3);
  EXPECT_EQ(fresh->logs().lines(0).message(), "b");
  // Another drop before any ack: both go again, same order, same numbers.
  outbox.Rewind();
  auto r1 = outbox.Take(Soon());
  auto r2 = outbox.Take(Soon());
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(r1->sequence(), 2);
  EXPECT_EQ(r2->sequence(), 3);
  EXPECT_EQ(r2->logs().lines(0).message(), "b");
  outbox.Ack(3);
  EXPECT_TRUE(outbox.empty());
}

TEST(OutboxTest, AtMostMaxUnackedAreOutUntilAnAck) {
  Outbox::Options options;
  options.max_unacked = 2;
  Outbox outbox(options);
  for (int i = 0; i < 3; ++i) {
    outbox.PushState(State("t" + std::to_string(i), TaskStateChange::STATE_STARTED));
  }
  ASSERT_TRUE(outbox.Take(Soon()));
  ASSERT_TRUE(outbox.Take(Soon()));
  EXPECT_FALSE(outbox.Take(Soon()).has_value());  // window full
  std::thread acker([&] {
    std::this_thread::sleep_for(50ms);
    outbox.Ack(1);
  });
  auto start = std::chrono::steady_clock::now();
  auto third = outbox.Take(start + 5s);  // an Ack opens the window
  acker.join();
  ASSERT_TRUE(third && third->has_task_state());
  EXPECT_EQ(third->task_state().task_id(), "t2");
  EXPECT_EQ(third->sequence(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(OutboxTest, WakeEndsAWaitingTake) {
  Outbox outbox;
  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);
    outbox.Wake();
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(outbox.Take(start + 5s).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  waker.join();
}

}  // namespace
}  // namespace sf::agent
