// Regex (regex.h): running a RegexProgram (regex_program.h) over the code
// points of a text.
//
// A backtracking machine with an explicit stack of (instruction, position)
// alternatives, tried in priority order: the first path to kMatch is
// Oniguruma's match. Lookaheads and atomic groups run their sub-program from
// the current position. A plain run counts its steps; past a budget of the
// program's size times the text left, the search is redone remembering
// every state tried (a state that failed once fails again: the continuation
// depends only on the instruction and the position, since repetitions of
// nullable bodies are refused at compile time), and stays so for the rest of
// the text: at most one visit per state and per search.
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "text/regex.h"
#include "text/regex_program.h"
#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

struct BudgetExceeded {};

uint64_t state_key(uint32_t a, size_t b) { return (uint64_t(a) << 32) | uint64_t(b); }

int fold_code_point(char32_t cp, char32_t out[3]) {
  if (cp < 128) {
    out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return 1;
  }
  return case_fold(cp, out);
}

class Matcher {
 public:
  Matcher(const RegexProgram& program, const std::vector<char32_t>& text)
      : prog_(program), text_(text), n_(text.size()) {}

  // The leftmost match that starts at or after `from`.
  bool search(size_t from, size_t& start, size_t& end) {
    if (!memo_) {
      steps_ = 0;
      budget_ = 4096 + 4 * uint64_t(prog_.size) * uint64_t(n_ - from + 1);
      try {
        return search_from(from, nullptr, start, end);
      } catch (const BudgetExceeded&) {
        stack_.clear();
        memo_ = true;
      }
    }
    std::unordered_set<uint64_t> visited;
    return search_from(from, &visited, start, end);
  }

 private:
  bool search_from(size_t from, std::unordered_set<uint64_t>* visited, size_t& start, size_t& end) {
    for (size_t s = from; s <= n_; ++s) {
      const int64_t e = run(0, s, visited);
      if (e >= 0) {
        start = s, end = size_t(e);
        return true;
      }
    }
    return false;
  }

  // The end of the first match of sub-program `sub` from `pos`, or -1.
  int64_t run(uint32_t sub, size_t pos, std::unordered_set<uint64_t>* visited) {
    const std::vector<Inst>& code = prog_.subs[sub];
    const size_t base = stack_.size();
    stack_.emplace_back(0, pos);
    while (stack_.size() > base) {
      uint32_t pc = stack_.back().first;
      size_t p = stack_.back().second;
      stack_.pop_back();
      while (true) {
        if (visited) {
          if (!visited->insert(state_key(pc, p)).second) break;
        } else if (++steps_ > budget_) {
          throw BudgetExceeded{};
        }
        const Inst& in = code[pc];
        bool ok = true;
        switch (in.op) {
          case Op::kChar:
            ok = p < n_ && text_[p] == in.x;
            p += ok;
            break;
          case Op::kFold:
            ok = fold_at(prog_.folds[in.x], p);
            break;
          case Op::kSet:
            ok = p < n_ && prog_.sets[in.x].contains(text_[p]);
            p += ok;
            break;
          case Op::kAny:
            ok = p < n_ && text_[p] != '\n';
            p += ok;
            break;
          case Op::kSplit:
            stack_.emplace_back(in.y, p);
            pc = in.x;
            continue;
          case Op::kJmp:
            pc = in.x;
            continue;
          case Op::kAssert:
            ok = holds(static_cast<Assertion>(in.arg), p);
            break;
          case Op::kLook:
            ok = (sub_match(in.x, p) >= 0) != (in.arg != 0);
            break;
          case Op::kAtomic: {
            const int64_t e = sub_match(in.x, p);
            ok = e >= 0;
            if (ok) p = size_t(e);
            break;
          }
          case Op::kMatch:
            stack_.resize(base);
            return int64_t(p);
        }
        if (!ok) break;
        ++pc;
      }
    }
    return -1;
  }

  // A lookahead's or atomic group's first match from `pos` (cached once memoizing).
  int64_t sub_match(uint32_t sub, size_t pos) {
    if (!memo_) return run(sub, pos, nullptr);
    const uint64_t key = state_key(sub, pos);
    if (const auto it = sub_cache_.find(key); it != sub_cache_.end()) return it->second;
    std::unordered_set<uint64_t> visited;
    const int64_t e = run(sub, pos, &visited);
    sub_cache_.emplace(key, e);
    return e;
  }

  // Whether the text's case folding from `p` spells `folded`, ending on a
  // code point boundary; moves p past it.
  bool fold_at(const std::vector<char32_t>& folded, size_t& p) const {
    size_t k = 0, q = p;
    char32_t f[3];
    while (k < folded.size()) {
      if (q >= n_) return false;
      const int m = fold_code_point(text_[q], f);
      if (k + size_t(m) > folded.size()) return false;
      for (int i = 0; i < m; ++i)
        if (f[i] != folded[k + size_t(i)]) return false;
      k += size_t(m);
      ++q;
    }
    p = q;
    return true;
  }

  bool holds(Assertion a, size_t p) const {
    switch (a) {
      case Assertion::kTextStart: return p == 0;
      case Assertion::kTextEnd: return p == n_;
      case Assertion::kTextEndNewline: return p == n_ || (p + 1 == n_ && text_[p] == '\n');
      case Assertion::kLineStart: return p == 0 || (p < n_ && text_[p - 1] == '\n');
      case Assertion::kLineEnd: return p == n_ || text_[p] == '\n';
    }
    return false;
  }

  const RegexProgram& prog_;
  const std::vector<char32_t>& text_;
  const size_t n_;
  bool memo_ = false;
  uint64_t steps_ = 0, budget_ = 0;
  std::vector<std::pair<uint32_t, size_t>> stack_;
  std::unordered_map<uint64_t, int64_t> sub_cache_;
};

}  // namespace

Regex::Regex(std::string_view pattern) : program_(std::make_shared<RegexProgram>(compile_regex(pattern))) {}

Regex Regex::literal(std::string_view text) {
  Regex r;
  r.program_ = std::make_shared<RegexProgram>(compile_literal(text));
  return r;
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  std::vector<char32_t> cps;
  std::vector<size_t> offsets;  // byte offset of each unit, and of the end
  cps.reserve(text.size());
  offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    cps.push_back(d.cp == kInvalid ? 0xFFFD : d.cp);
    offsets.push_back(i);
    i += d.len;
  }
  offsets.push_back(text.size());
  Matcher matcher(*program_, cps);
  const size_t n = cps.size();
  size_t last_end = 0, start = 0, end = 0;
  bool matched_before = false;
  size_t last_match_end = 0;
  while (last_end <= n && matcher.search(last_end, start, end)) {
    if (start == end && matched_before && last_match_end == end) {  // no empty match right after a match
      ++last_end;
      continue;
    }
    last_end = end;
    last_match_end = end;
    matched_before = true;
    out.emplace_back(offsets[start], offsets[end]);
  }
}

}  // namespace tmm::text::detail
