#include "agent/outbox.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/testing.h"

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

// The journal (Outbox::OpenJournal): a second outbox on the same file, as a restarted agent
// process makes, gets back the incarnation, the unacknowledged messages as they were sent and
// the lines not yet sent; nothing acknowledged comes back.
TEST(OutboxJournalTest, ARestartedOutboxSendsWhatThePreviousOneHadNotDelivered) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/outbox.journal";
  Outbox::Options options;
  options.max_batch_delay = std::chrono::hours(1);
  std::string incarnation;
  steadfast::v1::AgentMessage sent_state;
  {
    Outbox first(options);
    ASSERT_TRUE(first.OpenJournal(path).ok());
    incarnation = first.incarnation();
    for (int i = 1; i <= 5; ++i) first.PushLog(Line("line-" + std::to_string(i)));
    first.PushState(State("t1", TaskStateChange::STATE_EXITED));
    auto lines = first.Take(Soon());  // the lines go ahead of the state change
    ASSERT_TRUE(lines && lines->logs().lines_size() == 5);
    auto state = first.Take(Soon());
    ASSERT_TRUE(state && state->has_task_state());
    sent_state = *state;
    first.PushLog(Line("line-6"));
    first.PushLog(Line("line-7"));
    first.Ack(lines->sequence());  // the lines were applied, the state change not yet
  }  // the process ends without a word
  Outbox second(options);
  ASSERT_TRUE(second.OpenJournal(path).ok());
  EXPECT_EQ(second.incarnation(), incarnation);
  EXPECT_EQ(second.last_sequence(), 2);
  auto again = second.Take(Soon());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->SerializeAsString(), sent_state.SerializeAsString());  // as it was sent
  auto rest = second.Take(Soon(), /*flush=*/true);
  ASSERT_TRUE(rest && rest->has_logs());
  EXPECT_EQ(rest->sequence(), 3);
  ASSERT_EQ(rest->logs().lines_size(), 2);
  EXPECT_EQ(rest->logs().lines(0).message(), "line-6");
  EXPECT_EQ(rest->logs().lines(1).message(), "line-7");
  EXPECT_FALSE(second.Take(Soon(), true).has_value());
  second.Ack(3);
  EXPECT_TRUE(second.empty());
}

TEST(OutboxJournalTest, NothingComesBackOnceAcknowledgedAndNewOutboxesGetNewNames) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/outbox.journal";
  std::string incarnation;
  {
    Outbox first;
    ASSERT_TRUE(first.OpenJournal(path).ok());
    incarnation = first.incarnation();
    first.PushState(State("t1", TaskStateChange::STATE_STARTED));
    auto m = first.Take(Soon());
    ASSERT_TRUE(m.has_value());
    first.Ack(m->sequence());
  }
  {
    Outbox second;
    ASSERT_TRUE(second.OpenJournal(path).ok());
    EXPECT_EQ(second.incarnation(), incarnation);
    EXPECT_TRUE(second.empty());
    EXPECT_EQ(second.last_sequence(), 1);  // numbering goes on
    EXPECT_FALSE(second.Take(Soon(), true).has_value());
  }
  Outbox fresh;
  sf::testing::TempDir other;
  ASSERT_TRUE(fresh.OpenJournal(other.path() + "/outbox.journal").ok());
  EXPECT_NE(fresh.incarnation(), incarnation);
}

TEST(OutboxJournalTest, ASecondProcessOnTheSameJournalIsRefused) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/outbox.journal";
  Outbox first;
  ASSERT_TRUE(first.OpenJournal(path).ok());
  Outbox second;
  Status st = second.OpenJournal(path);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("another sf-agent"), std::string::npos) << st.ToString();
}

TEST(OutboxJournalTest, ATornLastRecordIsIgnoredAndDroppedLinesStayDropped) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/outbox.journal";
  Outbox::Options options;
  options.max_log_lines = 3;
  options.max_batch_delay = std::chrono::hours(1);
  {
    Outbox first(options);
    ASSERT_TRUE(first.OpenJournal(path).ok());
    for (int i = 1; i <= 5; ++i) first.PushLog(Line("line-" + std::to_string(i)));  // 1 and 2 dropped
    EXPECT_EQ(first.dropped_lines(), 2u);
  }
  {
    std::ofstream torn(path, std::ios::binary | std::ios::app);
    torn.write("\x40\x00\x00\x00L\x0a\x03", 7);  // a record cut short by a crash
  }
  Outbox second(options);
  ASSERT_TRUE(second.OpenJournal(path).ok());
  EXPECT_EQ(second.log_lines(), 3u);
  auto m = second.Take(Soon(), /*flush=*/true);
  ASSERT_TRUE(m && m->has_logs());
  ASSERT_EQ(m->logs().lines_size(), 3);
  EXPECT_EQ(m->logs().lines(0).message(), "line-3");
  EXPECT_EQ(m->logs().lines(2).message(), "line-5");
}

TEST(OutboxJournalTest, TheFileIsRewrittenSmallOnceTheOutboxDrained) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/outbox.journal";
  Outbox::Options options;
  options.max_batch_delay = 0ms;
  Outbox outbox(options);
  ASSERT_TRUE(outbox.OpenJournal(path).ok());
  const std::string text(1000, 'x');
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 100; ++i) outbox.PushLog(Line(text));
    while (auto m = outbox.Take(Soon(), true)) outbox.Ack(m->sequence());
  }
  EXPECT_TRUE(outbox.empty());
  // 3,000 lines of 1 kB went through (twice each: pushed and sent), the file holds a header.
  EXPECT_LT(std::filesystem::file_size(path), 1u << 20);
  EXPECT_EQ(outbox.last_sequence(), 30);  // one batch per round
}

}  // namespace
}  // namespace sf::agent
