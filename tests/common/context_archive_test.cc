// Context archives and .sfignore (common/context/): packing real directories, unpacking them
// elsewhere, and refusing archives that would escape their destination.
#include "common/context/context_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "common/context/ignore_rules.h"

namespace sf::context {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sf-context-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> Split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + sep.size();
  }
}

TEST(IgnoreRules, MatchEveryCaseOfTheSharedTable) {
  std::ifstream in(std::string(SF_SOURCE_DIR) + "/tests/data/sfignore_cases.tsv");
  ASSERT_TRUE(in) << "tests/data/sfignore_cases.tsv";
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.rfind("##", 0) == 0) continue;
    std::vector<std::string> f = Split(line, "\t");
    ASSERT_EQ(f.size(), 4u) << line;
    std::string rules_text;
    for (const std::string& r : Split(f[0], " | ")) rules_text += r + "\n";
    IgnoreRules rules = IgnoreRules::Parse(rules_text);
    EXPECT_EQ(rules.Excluded(f[1], f[2] == "dir"), f[3] == "excluded")
        << "rules [" << f[0] << "] path " << f[1] << " (" << f[2] << ")";
    ++cases;
  }
  EXPECT_GT(cases, 30);
}

TEST(IgnoreRules, BlankAndCommentLinesAreNotRules) {
  EXPECT_EQ(IgnoreRules::Parse("\n# a comment\n   \n*.o  \n").size(), 1u);
  EXPECT_TRUE(IgnoreRules::Parse("*.o   \n").Excluded("x.o", false));  // trailing spaces trimmed
}

TEST(ContextArchive, PacksAndUnpacksFilesModesLinksAndHonoursSfignore) {
  TempDir src, dst;
  Write(src.path() / "train.py", "print('hi')\n");
  Write(src.path() / "pkg/model.py", "X = 1\n");
  Write(src.path() / "pkg/__pycache__/model.cpython-311.pyc", "junk");
  Write(src.path() / "data/big.bin", std::string(1000, 'x'));
  Write(src.path() / "run.sh", "#!/bin/sh\necho run\n");
  chmod((src.path() / "run.sh").c_str(), 0755);
  Write(src.path() / ".sfignore", "__pycache__/\n/data\n");
  fs::create_directory_symlink("pkg", src.path() / "pkg-link");
  mkfifo((src.path() / "a-fifo").c_str(), 0600);

  auto packed = PackContext(src.path().string());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(packed->files, 4);  // .sfignore, pkg/model.py, run.sh, train.py
  EXPECT_EQ(packed->sha256.size(), 64u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a second later: no clock in the bytes
  auto again = PackContext(src.path().string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, packed->sha256) << "packing the same directory twice gives the same bytes";

  EXPECT_TRUE(ValidateContext(packed->archive).ok());
  ASSERT_TRUE(UnpackContext(packed->archive, dst.path().string()).ok());
  EXPECT_EQ(Read(dst.path() / "train.py"), "print('hi')\n");
  EXPECT_EQ(Read(dst.path() / "pkg/model.py"), "X = 1\n");
  EXPECT_TRUE(fs::exists(dst.path() / ".sfignore"));
  EXPECT_FALSE(fs::exists(dst.path() / "pkg/__pycache__"));
  EXPECT_FALSE(fs::exists(dst.path() / "data"));
  EXPECT_FALSE(fs::exists(dst.path() / "a-fifo"));
  struct stat st;
  ASSERT_EQ(stat((dst.path() / "run.sh").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR) << "the executable bit survives";
  EXPECT_TRUE(fs::is_symlink(dst.path() / "pkg-link"));
  EXPECT_EQ(Read(dst.path() / "pkg-link/model.py"), "X = 1\n");
}

// What the API shows of a stored context (GET /api/v1/experiments/{id}/context): every file
// with its size and every link with its target, sorted, without unpacking; a damaged archive
// is an error, as for ValidateContext.
TEST(ContextArchive, ListsFilesWithSizesAndLinksWithTargets) {
  TempDir src;
  Write(src.path() / "train.py", "print('hi')\n");
  Write(src.path() / "pkg/model.py", "X = 1\n");
  Write(src.path() / "data/big.bin", std::string(1000, 'x'));
  fs::create_directory_symlink("pkg", src.path() / "pkg-link");
  auto packed = PackContext(src.path().string());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  auto listed = ListContext(packed->archive);
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  std::vector<std::string> rows;
  for (const ContextEntry& e : *listed) rows.push_back(e.path + " " + std::to_string(e.size) + " " + e.link_target);
  EXPECT_EQ(rows, (std::vector<std::string>{"data/big.bin 1000 ", "pkg-link 0 pkg", "pkg/model.py 6 ",
                                            "train.py 12 "}));
  std::string damaged = packed->archive;
  damaged.resize(30);  // inside the first compressed block: no header can be read
  EXPECT_EQ(ListContext(damaged).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ListContext("not a tar").status().code(), StatusCode::kInvalidArgument);
}

TEST(ContextArchive, RefusesAContextOverTheLimitNamingItsLargestFiles) {
  TempDir src;
  Write(src.path() / "small.txt", "x");
  // Sparse files: sizes without the disk.
  for (auto [name, mib] : {std::pair{"weights.pt", 60}, std::pair{"cache.npy", 50}}) {
    int fd = open((src.path() / name).c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, off_t{mib} << 20), 0);
    close(fd);
  }
  auto packed = PackContext(src.path().string());
  ASSERT_FALSE(packed.ok());
  const std::string msg = packed.status().message();
  EXPECT_NE(msg.find("110.0 MiB in 3 files, more than the 96.0 MiB limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weights.pt (60.0 MiB), cache.npy (50.0 MiB)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".sfignore"), std::string::npos) << msg;
  // Listed in .sfignore, they no longer count.
  Write(src.path() / ".sfignore", "*.pt\n*.npy\n");
  EXPECT_TRUE(PackContext(src.path().string()).ok());
}

TEST(ContextArchive, NotADirectoryIsAnError) {
  auto packed = PackContext("/nonexistent/sf-context");
  ASSERT_FALSE(packed.ok());
  EXPECT_NE(packed.status().message().find("/nonexistent/sf-context is not a directory"), std::string::npos);
}

// A tar.gz with the given entries, built with libarchive directly (what a hostile or broken
// client could send).
std::string HandMade(const std::vector<std::tuple<std::string, int, std::string>>& entries) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open(
      a, &out, nullptr,
      [](struct archive*, void* c, const void* b, size_t n) -> la_ssize_t {
        static_cast<std::string*>(c)->append(static_cast<const char*>(b), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const auto& [path, type, content] : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    archive_entry_set_filetype(e, static_cast<unsigned>(type));
    archive_entry_set_perm(e, 0644);
    if (type == AE_IFLNK) archive_entry_set_symlink(e, content.c_str());
    if (type == AE_IFREG) archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    archive_write_header(a, e);
    if (type == AE_IFREG) archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

TEST(ContextArchive, RefusesEntriesThatWouldLeaveTheDestination) {
  TempDir dst;
  struct Case {
    std::vector<std::tuple<std::string, int, std::string>> entries;
    std::string why;
  };
  std::vector<Case> cases = {
      {{{"../escape.txt", AE_IFREG, "x"}}, "\"../escape.txt\" would be written outside"},
      {{{"/etc/evil", AE_IFREG, "x"}}, "\"/etc/evil\" would be written outside"},
      {{{"a/../../b", AE_IFREG, "x"}}, "would be written outside"},
      {{{"link", AE_IFLNK, "../../etc"}}, "links to \"../../etc\", outside"},
      {{{"link", AE_IFLNK, "/etc/passwd"}}, "outside the task's directory"},
      {{{"fifo", AE_IFIFO, ""}}, "is not a file, directory or link"},
  };
  for (const Case& c : cases) {
    TempDir d;
    const std::string archive = HandMade(c.entries);
    Status st = UnpackContext(archive, (d.path() / "out").string());
    ASSERT_FALSE(st.ok()) << c.why;
    EXPECT_NE(st.message().find(c.why), std::string::npos) << st.message();
    Status checked = ValidateContext(archive);  // what the master runs before storing one
    ASSERT_FALSE(checked.ok()) << c.why;
    EXPECT_EQ(checked.message(), st.message());
  }
  EXPECT_FALSE(fs::exists(dst.path().parent_path() / "escape.txt"));
  // A link that stays inside is fine.
  TempDir ok;
  EXPECT_TRUE(UnpackContext(HandMade({{"d/f.txt", AE_IFREG, "x"}, {"d/l", AE_IFLNK, "../d/f.txt"}}),
                            ok.path().string())
                  .ok());
}

TEST(ContextArchive, RefusesMoreContentThanTheLimitAndGarbage) {
  TempDir d;
  std::string big = HandMade({{"a.bin", AE_IFREG, std::string(3000, 'a')}, {"b.bin", AE_IFREG, std::string(3000, 'b')}});
  Status st = UnpackContext(big, d.path().string(), /*max_file_bytes=*/4000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unpacks to more than"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("b.bin"), std::string::npos) << st.message();
  TempDir g;
  Status garbage = UnpackContext("this is not a tar.gz", g.path().string());
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.message().find("context archive"), std::string::npos) << garbage.message();
}

}  // namespace
}  // namespace sf::context
