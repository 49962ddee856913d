#include "text/bpe.h"

#include <cstdio>
#include <queue>
#include <stdexcept>

#include "text/byte_level.h"
#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

// As in the Rust library: pieces shorter than this are cached, up to
// kCacheEntries of them.
constexpr size_t kCacheMaxPiece = 256;
constexpr size_t kCacheEntries = 10000;

uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, uint32_t> vocab,
         const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const auto id_of = [&](const std::string& token, size_t i) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end())
      throw std::invalid_argument("model.merges[" + std::to_string(i) + "]: the token " + excerpt(token) +
                                  " is not in model.vocab");
    return it->second;
  };
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    const uint32_t ia = id_of(a, i), ib = id_of(b, i), merged = id_of(a + b, i);
    // A repeated pair keeps its last rank, as the Rust library's hash map does.
    merges_[pair_key(ia, ib)] = MergeTarget{uint32_t(i), merged};
  }
  std::optional<uint32_t> unk;
  if (options_.unk_token) {
    const auto it = vocab_.find(*options_.unk_token);
    if (it == vocab_.end())
      throw std::invalid_argument("model.unk_token: " + excerpt(*options_.unk_token) + " is not in model.vocab");
    unk = it->second;
    unk_id_ = *unk;
  }
  for (int b = 0; b < 256; ++b) {
    ByteSymbols& s = bytes_[b];
    if (const auto it = vocab_.find(byte_char(uint8_t(b))); it != vocab_.end()) {
      s.ids = {it->second};
      continue;
    }
    if (options_.byte_fallback) {  // <0xXX> for each byte of the character
      std::vector<uint32_t> ids;
      for (const char c : byte_char(uint8_t(b))) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", unsigned(static_cast<unsigned char>(c)));
        const auto it = vocab_.find(name);
        if (it == vocab_.end()) break;
        ids.push_back(it->second);
      }
      if (ids.size() == byte_char(uint8_t(b)).size()) {
        s.ids = std::move(ids), s.fallback = true;
        continue;
      }
    }
    if (unk) s.ids = {*unk}, s.unk = true;
  }
}

std::optional<Bpe::MergeTarget> Bpe::find_merge(uint32_t a, uint32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  if (it == merges_.end()) return std::nullopt;
  return it->second;
}

// The Rust library's Word::merge_all without dropout: a queue of candidate
// merges ordered by (rank, position); stale entries are skipped when popped.
void Bpe::merge(std::string_view bytes, std::vector<uint32_t>& ids) const {
  struct Symbol {
    uint32_t id;
    int64_t prev, next;  // -1: none
    bool live;
  };
  std::vector<Symbol> syms;
  syms.reserve(bytes.size());
  const auto add = [&](uint32_t id) {
    const int64_t n = int64_t(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back({id, n - 1, -1, true});
  };
  bool pending_unk = false;  // an unknown run not yet added (fuse_unk)
  const uint32_t unk_id = unk_id_;
  for (const char c : bytes) {
    const ByteSymbols& s = bytes_[static_cast<unsigned char>(c)];
    if (s.unk) {
      if (pending_unk && !options_.fuse_unk) add(unk_id);
      pending_unk = true;
      continue;
    }
    if (s.ids.empty()) continue;  // no token and no unk_token: dropped
    // The Rust library adds byte-fallback tokens before a pending unk.
    if (pending_unk && !s.fallback) add(unk_id), pending_unk = false;
    for (const uint32_t id : s.ids) add(id);
  }
  if (pending_unk) add(unk_id);

  struct Candidate {
    size_t pos;
    uint32_t rank, id;
    bool operator<(const Candidate& o) const {  // the top is the lowest rank, then the leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < syms.size(); ++i)
    if (const auto m = find_merge(syms[i].id, syms[i + 1].id)) queue.push({i, m->rank, m->id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = syms[top.pos];
    if (!cur.live || cur.next < 0) continue;
    Symbol& right = syms[size_t(cur.next)];
    const auto m = find_merge(cur.id, right.id);
    if (!m || m->id != top.id) continue;  // stale
    cur.id = top.id;
    right.live = false;
    cur.next = right.next;
    if (right.next >= 0) syms[size_t(right.next)].prev = int64_t(top.pos);
    if (cur.prev >= 0)
      if (const auto p = find_merge(syms[size_t(cur.prev)].id, cur.id)) queue.push({size_t(cur.prev), p->rank, p->id});
    if (cur.next >= 0)
      if (const auto n = find_merge(cur.id, syms[size_t(cur.next)].id)) queue.push({top.pos, n->rank, n->id});
  }
  for (const Symbol& s : syms)
    if (s.live) ids.push_back(s.id);
}

void Bpe::encode_piece(std::string_view bytes, std::vector<int64_t>& out) const {
  if (bytes.empty()) return;
  const bool cacheable = bytes.size() < kCacheMaxPiece;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto it = cache_.find(std::string(bytes)); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> ids;
  bool whole = false;
  if (options_.ignore_merges) {  // a piece that is a token is that token
    std::string word;
    for (const char c : bytes) word += byte_char(static_cast<unsigned char>(c));
    if (const auto it = vocab_.find(word); it != vocab_.end()) ids.push_back(it->second), whole = true;
  }
  if (!whole) merge(bytes, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(bytes), std::move(ids));
  }
}

}  // namespace tmm::text::detail
