// The BPE model of a byte-level tokenizer.json: a vocabulary of byte-level
// tokens and ranked merges, applied to one pre-tokenized piece at a time
// exactly as the Rust `tokenizers` library does (lowest rank first, leftmost
// on ties, via a priority queue), with its unk_token / fuse_unk /
// byte_fallback / ignore_merges options.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tmm::text::detail {

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class Bpe {
 public:
  // Throws std::invalid_argument naming the merge (model.merges[i]) whose
  // tokens or concatenation are not in the vocabulary, or the unk_token
  // missing from it.
  Bpe(std::unordered_map<std::string, uint32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options);

  // Appends the ids of one piece of raw bytes (pre-tokenized text) to `out`.
  // Bytes with no token (and no unk_token or byte fallback) are dropped, as
  // in the Rust library. Thread-safe.
  void encode_piece(std::string_view bytes, std::vector<int64_t>& out) const;

  const std::unordered_map<std::string, uint32_t>& vocab() const { return vocab_; }

 private:
  struct MergeTarget {
    uint32_t rank;
    uint32_t id;
  };
  // One starting symbol: a byte's token, or its byte-fallback tokens, or unk.
  struct ByteSymbols {
    std::vector<uint32_t> ids;  // empty: no token
    bool fallback = false;      // ids are <0xXX> byte-fallback tokens
    bool unk = false;           // the byte is unknown: ids holds unk_token's id
  };

  void merge(std::string_view bytes, std::vector<uint32_t>& ids) const;
  std::optional<MergeTarget> find_merge(uint32_t a, uint32_t b) const;

  std::unordered_map<std::string, uint32_t> vocab_;
  std::unordered_map<uint64_t, MergeTarget> merges_;  // (a << 32 | b) -> rank, merged id
  ByteSymbols bytes_[256];
  BpeOptions options_;
  uint32_t unk_id_ = 0;  // when options_.unk_token is set

  // Results for short pieces; cleared when full, so memory stays bounded.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache_;
};

}  // namespace tmm::text::detail
