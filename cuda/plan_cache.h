// The policy of the cuFFT plan pool (csrc/ops/cufft_plan_pool_cuda.cpp),
// free of torch and cuFFT so that tests/cpp/cuda_host_check.cpp can check it.
//
//   - A plan is used by one caller at a time: take() removes an idle plan
//     from the cache, give_back() returns it.
//   - At most max_size() idle plans are kept (default 4096, PyTorch's cuFFT
//     plan cache size); beyond that the least recently returned are evicted,
//     handed to the caller to destroy outside its lock.
//   - A plan that a CUDA graph capture used is pinned: the captured graph
//     replays the plan's kernels, which read its device memory, so a pinned
//     plan is never evicted (not by max_size, not by clear()) and lives until
//     the process ends. It stays available to later calls with its key.
//   - A give_back() during a capture evicts nothing (freeing device memory
//     while a stream captures breaks the capture); the next one outside a
//     capture restores the bound.
// Not thread-safe: the pool holds a mutex around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <unordered_map>
#include <vector>

namespace tmm::cuda {

constexpr size_t kDefaultPlanCacheMaxSize = 4096;

// Parses a cache size (a decimal integer >= 0, as in the environment variable
// TMM_CUFFT_PLAN_CACHE_MAX_SIZE); false for anything else.
inline bool parse_plan_cache_size(const char* text, size_t& out) {
  if (text == nullptr || *text == '\0') return false;
  size_t v = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    const size_t digit = size_t(*p - '0');
    if (v > (SIZE_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  out = v;
  return true;
}

template <class Key, class Handle, class Hash>
class PlanCache {
 public:
  struct Entry {
    Key key;
    Handle handle;
    size_t work_bytes;
    bool pinned;  // a graph capture used it: never destroyed
  };

  explicit PlanCache(size_t max_size) : max_size_(max_size) {}

  // Moves an idle plan with `key` into `out` (pinned plans first: reusing one
  // keeps the number of plans down); false if there is none.
  bool take(const Key& key, Entry& out) {
    const auto pinned = pinned_.find(key);
    if (pinned != pinned_.end()) {
      out = pinned->second;
      pinned_.erase(pinned);
      return true;
    }
    const auto it = index_.find(key);
    if (it == index_.end()) return false;
    out = *it->second;
    lru_.erase(it->second);
    index_.erase(it);
    return true;
  }

  // Returns a plan taken or newly created. `capturing`: the caller used it in
  // a graph capture (it becomes pinned) and nothing may be destroyed now.
  void give_back(Entry e, bool capturing, std::vector<Handle>& evicted) {
    e.pinned = e.pinned || capturing;
    if (e.pinned) {
      pinned_.emplace(e.key, e);
    } else {
      lru_.push_front(e);
      index_.emplace(e.key, lru_.begin());
    }
    if (!capturing) evict_beyond(max_size_, evicted);
  }

  // A new bound; idle plans beyond it are evicted now.
  void set_max_size(size_t max_size, std::vector<Handle>& evicted) {
    max_size_ = max_size;
    evict_beyond(max_size_, evicted);
  }

  // Evicts every idle unpinned plan.
  void clear(std::vector<Handle>& evicted) { evict_beyond(0, evicted); }

  size_t max_size() const { return max_size_; }
  size_t idle() const { return lru_.size(); }            // evictable idle plans
  size_t pinned_idle() const { return pinned_.size(); }  // idle pinned plans

 private:
  void evict_beyond(size_t bound, std::vector<Handle>& evicted) {
    while (lru_.size() > bound) {
      const auto last = std::prev(lru_.end());
      auto range = index_.equal_range(last->key);
      for (auto it = range.first; it != range.second; ++it) {
        if (it->second == last) {
          index_.erase(it);
          break;
        }
      }
      evicted.push_back(last->handle);
      lru_.erase(last);
    }
  }

  size_t max_size_;
  std::list<Entry> lru_;  // idle unpinned plans, most recently returned first
  std::unordered_multimap<Key, typename std::list<Entry>::iterator, Hash> index_;
  std::unordered_multimap<Key, Entry, Hash> pinned_;  // idle pinned plans
};

}  // namespace tmm::cuda
