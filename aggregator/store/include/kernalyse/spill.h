// Rows kept on disk while one large input is imported (issue 28: a 10 GB trace in bounded
// memory): an external sort (sorted runs, merged).
// Rows are trivially copyable structs written as they are; the files are unlinked temporaries,
// gone when closed or when the process dies.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace kernalyse {

// An unlinked temporary file in `dir` (O_TMPFILE, else mkstemp + unlink). Throws Error naming
// the directory when it cannot be created or written (disk full).
class SpillFile {
 public:
  explicit SpillFile(std::string dir);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  uint64_t append(const void* p, size_t n);  // the offset it was written at
  void read(uint64_t offset, void* p, size_t n) const;

 private:
  std::string dir_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// An external sort: rows added in any order come back ordered by `Less` (a strict total order:
// make it total with a sequence number, so that the result does not depend on the chunking).
// At most `chunk` rows are held while adding; reading holds a block of each run.
template <class Row, class Less>
class RowSorter {
  static_assert(std::is_trivially_copyable_v<Row>);

 public:
  RowSorter(std::string dir, size_t chunk)
      : dir_(std::move(dir)), chunk_(std::max<size_t>(chunk, 1)) {}
  void add(const Row& r) {
    buf_.push_back(r);
    if (buf_.size() >= chunk_) flush();
  }
  uint64_t size() const { return total_ + buf_.size(); }
  size_t runs() const { return runs_.size(); }
  uint64_t disk_bytes() const { return total_ * sizeof(Row); }  // in the runs on disk

  // Pulls the rows in order: next(&row) until it returns false. Sorts the rows still in memory,
  // which the reader then refers to: no rows may be added while it lives, and the sorter must
  // outlive it. open() may be called again (another pass over the same rows).
  class Reader {
   public:
    bool next(Row* out) {
      if (heap_.empty()) return false;
      const size_t k = heap_.front().run;
      Cursor& c = cur_[k];
      *out = c.data[c.at++];
      // The run's next row replaces the top and sinks once: half the comparisons of a pop and a
      // push (the merge was a tenth of a large import, issue 28).
      if (load(k)) {
        heap_.front().row = &c.data[c.at];
      } else {
        heap_.front() = heap_.back();
        heap_.pop_back();
      }
      sift_down(0);
      return true;
    }

   private:
    friend class RowSorter;
    struct Cursor {
      uint64_t offset = 0, left = 0;  // on disk: the run's next unread row, rows still unread
      std::vector<Row> rows;          // its block read into memory
      const Row* data = nullptr;      // the rows in memory: the block, or the sorter's own
      size_t n = 0, at = 0;
    };
    struct Top {
      size_t run;
      const Row* row;
    };
    // Whether run k has a next row, its block refilled from disk when used up.
    bool load(size_t k) {
      Cursor& c = cur_[k];
      if (c.at == c.n && c.left) {
        c.n = static_cast<size_t>(std::min<uint64_t>(c.left, block_));
        c.rows.resize(c.n);
        file_->read(c.offset, c.rows.data(), c.n * sizeof(Row));
        c.data = c.rows.data();
        c.offset += c.n * sizeof(Row);
        c.left -= c.n;
        c.at = 0;
      }
      return c.at < c.n;
    }
    // A min-heap of the runs' current rows; the order is total, so no two rows tie.
    void sift_down(size_t i) {
      const size_t n = heap_.size();
      if (i >= n) return;
      const Top t = heap_[i];
      for (size_t l; (l = 2 * i + 1) < n; i = l) {
        if (l + 1 < n && Less()(*heap_[l + 1].row, *heap_[l].row)) ++l;
        if (!Less()(*heap_[l].row, *t.row)) break;
        heap_[i] = heap_[l];
      }
      heap_[i] = t;
    }
    const SpillFile* file_ = nullptr;
    size_t block_ = 1;
    std::vector<Cursor> cur_;
    std::vector<Top> heap_;
  };

  Reader open() {
    std::sort(buf_.begin(), buf_.end(), Less());
    Reader r;
    r.file_ = file_.get();
    // About 4 MB of blocks in all, at least 64 rows a run.
    r.block_ = std::max<size_t>(64, (size_t{4} << 20) / sizeof(Row) / (runs_.size() + 1));
    r.cur_.resize(runs_.size() + 1);
    for (size_t k = 0; k < runs_.size(); ++k) {
      r.cur_[k].offset = runs_[k].offset;
      r.cur_[k].left = runs_[k].rows;
    }
    r.cur_.back().data = buf_.data();
    r.cur_.back().n = buf_.size();
    for (size_t k = 0; k < r.cur_.size(); ++k)
      if (r.load(k)) r.heap_.push_back(typename Reader::Top{k, &r.cur_[k].data[r.cur_[k].at]});
    for (size_t i = r.heap_.size() / 2; i-- > 0;) r.sift_down(i);
    return r;
  }

 private:
  struct Run {
    uint64_t offset, rows;
  };
  void flush() {
    std::sort(buf_.begin(), buf_.end(), Less());
    if (!file_) file_ = std::make_unique<SpillFile>(dir_);
    runs_.push_back(Run{file_->append(buf_.data(), buf_.size() * sizeof(Row)), buf_.size()});
    total_ += buf_.size();
    buf_.clear();
  }
  std::string dir_;
  size_t chunk_;
  std::unique_ptr<SpillFile> file_;
  std::vector<Run> runs_;
  uint64_t total_ = 0;
  std::vector<Row> buf_;
};

}  // namespace kernalyse
