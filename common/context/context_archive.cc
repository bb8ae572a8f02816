#include "common/context/context_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "common/context/ignore_rules.h"
#include "common/sha256.h"

namespace sf::context {
namespace fs = std::filesystem;
namespace {

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct ReaderDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// One thing to pack, relative to the context's root.
struct Item {
  std::string path;
  enum class Kind { kFile, kDirectory, kLink } kind = Kind::kFile;
  int64_t size = 0;
  mode_t mode = 0;
  time_t mtime = 0;
  std::string link_target;
};

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Walks `root` in sorted order, leaving out what `rules` exclude (and the contents of excluded
// directories).
Status Collect(const fs::path& root, const std::string& relative, const IgnoreRules& rules, std::vector<Item>& out) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  const fs::path dir = relative.empty() ? root : root / relative;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) return InvalidArgument("cannot list " + dir.string() + ": " + ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const fs::directory_entry& a, const fs::directory_entry& b) { return a.path().filename() < b.path().filename(); });
  for (const fs::directory_entry& e : entries) {
    const std::string name = e.path().filename().string();
    const std::string path = relative.empty() ? name : relative + "/" + name;
    struct stat st;
    if (lstat(e.path().c_str(), &st) != 0) {
      return DataLoss("cannot read " + e.path().string() + ": " + std::strerror(errno));
    }
    Item item;
    item.path = path;
    item.mode = st.st_mode & 07777;
    item.mtime = st.st_mtime;
    if (S_ISDIR(st.st_mode)) {
      if (rules.Excluded(path, true)) continue;
      item.kind = Item::Kind::kDirectory;
      out.push_back(item);
      SF_RETURN_IF_ERROR(Collect(root, path, rules, out));
    } else if (S_ISREG(st.st_mode)) {
      if (rules.Excluded(path, false)) continue;
      item.kind = Item::Kind::kFile;
      item.size = st.st_size;
      out.push_back(item);
    } else if (S_ISLNK(st.st_mode)) {
      if (rules.Excluded(path, false)) continue;
      item.kind = Item::Kind::kLink;
      std::error_code lec;
      item.link_target = fs::read_symlink(e.path(), lec).string();
      if (lec) return DataLoss("cannot read the link " + e.path().string() + ": " + lec.message());
      out.push_back(item);
    }
    // Sockets, FIFOs, devices: not code; left out.
  }
  return Status::Ok();
}

la_ssize_t AppendToString(struct archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

// `path` with `.` segments dropped; false when it is absolute, empty or has a `..` segment.
bool SafeRelative(std::string_view path, std::string& normalized) {
  if (path.empty() || path[0] == '/') return false;
  normalized.clear();
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    start = slash == std::string_view::npos ? path.size() + 1 : slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return false;
    if (!normalized.empty()) normalized += '/';
    normalized += part;
  }
  return !normalized.empty();
}

// Whether a link at `link_path` (normalized, relative) pointing to `target` stays inside the
// root, resolving `..` lexically.
bool LinkStaysInside(const std::string& link_path, std::string_view target) {
  if (target.empty() || target[0] == '/') return false;
  std::vector<std::string> parts;
  size_t slash = link_path.rfind('/');
  if (slash != std::string::npos) {
    std::string_view dir(link_path.data(), slash);
    size_t start = 0;
    while (start <= dir.size()) {
      size_t s = dir.find('/', start);
      parts.emplace_back(dir.substr(start, s == std::string_view::npos ? std::string_view::npos : s - start));
      start = s == std::string_view::npos ? dir.size() + 1 : s + 1;
    }
  }
  size_t start = 0;
  while (start <= target.size()) {
    size_t s = target.find('/', start);
    std::string_view part = target.substr(start, s == std::string_view::npos ? std::string_view::npos : s - start);
    start = s == std::string_view::npos ? target.size() + 1 : s + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return false;
      parts.pop_back();
    } else {
      parts.emplace_back(part);
    }
  }
  return true;
}

}  // namespace

Result<PackedContext> PackContext(const std::string& directory, int64_t max_file_bytes) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return InvalidArgument("context directory " + directory + " is not a directory");
  }
  const fs::path root = fs::absolute(directory, ec);
  IgnoreRules rules;
  if (std::ifstream in(root / ".sfignore"); in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    rules = IgnoreRules::Parse(text);
  }
  std::vector<Item> items;
  SF_RETURN_IF_ERROR(Collect(root, "", rules, items));

  PackedContext packed;
  for (const Item& i : items) {
    if (i.kind != Item::Kind::kFile) continue;
    packed.file_bytes += i.size;
    packed.files++;
    packed.paths.push_back(i.path);
  }
  if (packed.file_bytes > max_file_bytes) {
    std::vector<const Item*> files;
    for (const Item& i : items) {
      if (i.kind == Item::Kind::kFile) files.push_back(&i);
    }
    std::sort(files.begin(), files.end(), [](const Item* a, const Item* b) { return a->size > b->size; });
    std::string largest;
    for (size_t k = 0; k < files.size() && k < 3; ++k) {
      largest += (k ? ", " : "") + files[k]->path + " (" + MiB(files[k]->size) + ")";
    }
    return InvalidArgument("context directory " + root.string() + " holds " + MiB(packed.file_bytes) + " in " +
                           std::to_string(packed.files) + " files, more than the " + MiB(max_file_bytes) +
                           " limit; list what the trials do not need in " + (root / ".sfignore").string() +
                           " (largest: " + largest + ")");
  }

  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_write_new());
  // No time in the gzip header: the same files give the same bytes, hence the same digest (the
  // agents' cache key).
  if (archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK ||
      archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr) != ARCHIVE_OK ||
      archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_open(a.get(), &packed.archive, nullptr, AppendToString, nullptr) != ARCHIVE_OK) {
    return Internal(std::string("cannot start the context archive: ") + archive_error_string(a.get()));
  }
  std::vector<char> buffer(1 << 16);
  for (const Item& i : items) {
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), i.path.c_str());
    archive_entry_set_mtime(e.get(), i.mtime, 0);
    archive_entry_set_perm(e.get(), i.mode);
    switch (i.kind) {
      case Item::Kind::kDirectory: archive_entry_set_filetype(e.get(), AE_IFDIR); break;
      case Item::Kind::kLink:
        archive_entry_set_filetype(e.get(), AE_IFLNK);
        archive_entry_set_symlink(e.get(), i.link_target.c_str());
        break;
      case Item::Kind::kFile:
        archive_entry_set_filetype(e.get(), AE_IFREG);
        archive_entry_set_size(e.get(), i.size);
        break;
    }
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) {
      return Internal("cannot pack " + i.path + ": " + archive_error_string(a.get()));
    }
    if (i.kind != Item::Kind::kFile) continue;
    const fs::path file = root / i.path;
    std::ifstream in(file, std::ios::binary);
    if (!in) return DataLoss("cannot read " + file.string() + ": " + std::strerror(errno));
    int64_t written = 0;
    while (in && written < i.size) {
      in.read(buffer.data(), static_cast<std::streamsize>(std::min<int64_t>(buffer.size(), i.size - written)));
      const std::streamsize n = in.gcount();
      if (n <= 0) break;
      if (archive_write_data(a.get(), buffer.data(), static_cast<size_t>(n)) < 0) {
        return Internal("cannot pack " + i.path + ": " + archive_error_string(a.get()));
      }
      written += n;
    }
    if (written != i.size) return DataLoss(file.string() + " changed size while it was packed");
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return Internal(std::string("cannot finish the context archive: ") + archive_error_string(a.get()));
  }
  packed.sha256 = Sha256Hex(packed.archive);
  return packed;
}

namespace {

// Reads every entry of `archive`, checking each; with a destination, writes them there too;
// with `listing`, appends each file and link to it.
Status WalkArchive(std::string_view archive, const std::string& destination, int64_t max_file_bytes,
                   std::vector<ContextEntry>* listing = nullptr) {
  const bool write = !destination.empty();
  std::unique_ptr<struct archive, ReaderDeleter> a(archive_read_new());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), archive.data(), archive.size()) != ARCHIVE_OK) {
    return InvalidArgument(std::string("the context archive is not a gzip tar: ") + archive_error_string(a.get()));
  }
  std::error_code ec;
  if (write) {
    fs::create_directories(destination, ec);
    if (ec) return InvalidArgument("cannot create " + destination + ": " + ec.message());
  }
  const fs::path root(write ? destination : "/nonexistent");
  int64_t total = 0;
  std::vector<std::pair<fs::path, mode_t>> directory_modes;
  archive_entry* e = nullptr;
  while (true) {
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return InvalidArgument(std::string("the context archive is damaged: ") + archive_error_string(a.get()));
    }
    const char* raw = archive_entry_pathname(e);
    std::string path;
    if (!raw || !SafeRelative(raw, path)) {
      return InvalidArgument(std::string("context archive entry \"") + (raw ? raw : "") +
                             "\" would be written outside the task's directory");
    }
    const fs::path out = root / path;
    const mode_t perm = archive_entry_perm(e) & 0777;
    switch (archive_entry_filetype(e)) {
      case AE_IFDIR:
        if (!write) break;
        fs::create_directories(out, ec);
        if (ec) return InvalidArgument("cannot create " + out.string() + ": " + ec.message());
        directory_modes.emplace_back(out, perm | S_IRWXU);
        break;
      case AE_IFLNK: {
        const char* target = archive_entry_symlink(e);
        if (!target || !LinkStaysInside(path, target)) {
          return InvalidArgument("context archive entry \"" + path + "\" links to \"" + (target ? target : "") +
                                 "\", outside the task's directory");
        }
        if (listing) listing->push_back({path, 0, target});
        if (!write) break;
        fs::create_directories(out.parent_path(), ec);
        if (symlink(target, out.c_str()) != 0) {
          return InvalidArgument("cannot create the link " + out.string() + ": " + std::strerror(errno));
        }
        break;
      }
      case AE_IFREG: {
        const int64_t size = archive_entry_size(e);
        if (size < 0) return InvalidArgument("context archive entry \"" + path + "\" has no size");
        total += size;
        if (total > max_file_bytes) {
          return InvalidArgument("the context archive unpacks to more than " + MiB(max_file_bytes) + " (at \"" +
                                 path + "\")");
        }
        if (listing) listing->push_back({path, size, ""});
        if (!write) {
          // Read the data through, so a damaged stream is found here too.
          const void* block = nullptr;
          size_t length = 0;
          la_int64_t offset = 0;
          int rr = ARCHIVE_OK;
          while ((rr = archive_read_data_block(a.get(), &block, &length, &offset)) == ARCHIVE_OK) {
          }
          if (rr != ARCHIVE_EOF) {
            return InvalidArgument("the context archive is damaged at \"" + path + "\": " + archive_error_string(a.get()));
          }
          break;
        }
        fs::create_directories(out.parent_path(), ec);
        int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm | S_IRUSR | S_IWUSR);
        if (fd < 0) return InvalidArgument("cannot create " + out.string() + ": " + std::strerror(errno));
        const void* block = nullptr;
        size_t length = 0;
        la_int64_t offset = 0;
        int64_t got = 0;
        Status st = Status::Ok();
        while (st.ok()) {
          int rr = archive_read_data_block(a.get(), &block, &length, &offset);
          if (rr == ARCHIVE_EOF) break;
          if (rr != ARCHIVE_OK) {
            st = InvalidArgument("the context archive is damaged at \"" + path + "\": " + archive_error_string(a.get()));
            break;
          }
          got += static_cast<int64_t>(length);
          if (got > size) {
            st = InvalidArgument("context archive entry \"" + path + "\" is longer than its header says");
            break;
          }
          const char* p = static_cast<const char*>(block);
          while (length > 0) {
            ssize_t w = pwrite(fd, p, length, offset);
            if (w <= 0) {
              st = DataLoss("cannot write " + out.string() + ": " + std::strerror(errno));
              break;
            }
            p += w;
            offset += w;
            length -= static_cast<size_t>(w);
          }
        }
        if (close(fd) != 0 && st.ok()) st = DataLoss("cannot write " + out.string() + ": " + std::strerror(errno));
        SF_RETURN_IF_ERROR(st);
        // The permission bits the archive says (umask aside): scripts stay executable.
        chmod(out.c_str(), perm | S_IRUSR | S_IWUSR);
        break;
      }
      default:
        return InvalidArgument("context archive entry \"" + path +
                               "\" is not a file, directory or link (hard links and devices are not unpacked)");
    }
  }
  for (const auto& [dir, mode] : directory_modes) chmod(dir.c_str(), mode);
  return Status::Ok();
}

}  // namespace

Status UnpackContext(std::string_view archive, const std::string& destination, int64_t max_file_bytes) {
  if (destination.empty()) return InvalidArgument("UnpackContext: no destination");
  return WalkArchive(archive, destination, max_file_bytes);
}

Status ValidateContext(std::string_view archive, int64_t max_file_bytes) {
  return WalkArchive(archive, "", max_file_bytes);
}

Result<std::vector<ContextEntry>> ListContext(std::string_view archive, int64_t max_file_bytes) {
  std::vector<ContextEntry> entries;
  SF_RETURN_IF_ERROR(WalkArchive(archive, "", max_file_bytes, &entries));
  std::sort(entries.begin(), entries.end(),
            [](const ContextEntry& a, const ContextEntry& b) { return a.path < b.path; });
  return entries;
}

}  // namespace sf::context
