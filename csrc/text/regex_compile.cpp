// Regex (regex.h): the pattern parsed into a syntax tree, checked against the
// supported subset, and compiled to a RegexProgram (regex_program.h).
//
// Oniguruma details kept (each checked against `tokenizers`, see
// tests/python/test_tokenizer_parity.py): an isolated option applies to the
// rest of its group, alternatives included (ab(?i)c|d is ab(?i:c|d));
// case-insensitive literals next to each other, also across a plain (?:...)
// group, are compared as one case-folded string (so (?i:s(?:s)) matches
// U+00DF but (?i:s(s)) does not); \d is \p{Nd}, \h is [0-9A-Fa-f], \s is
// White_Space; `.` is anything but '\n'; ^ does not match after a newline
// that ends the text.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "text/regex_program.h"
#include "text/unicode.h"

namespace tmm::text::detail {

bool CharSet::contains(char32_t cp) const {
  if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                   [](char32_t c, const std::pair<char32_t, char32_t>& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->second;
}

void CharSet::finish() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  ranges = std::move(merged);
  ascii[0] = ascii[1] = 0;
  for (const auto& [first, last] : ranges)
    for (char32_t c = first; c <= last && c < 128; ++c) ascii[c >> 6] |= uint64_t(1) << (c & 63);
}

CharSet CharSet::complement() const {
  CharSet out;
  char32_t next = 0;
  for (const auto& [first, last] : ranges) {
    if (first > next) out.ranges.emplace_back(next, first - 1);
    next = last + 1;
  }
  if (next <= 0x10FFFF) out.ranges.emplace_back(next, 0x10FFFF);
  out.finish();
  return out;
}

namespace {

constexpr int kMaxDepth = 64;             // nested groups
constexpr int kMaxRepeat = 100000;        // Oniguruma's limit for {n,m}
constexpr size_t kMaxInstructions = 100000;

struct Node {
  enum Kind : uint8_t { kEmpty, kChar, kSet, kAny, kConcat, kAlt, kRepeat, kGroup, kLook, kAtomic, kAssert };
  Kind kind = kEmpty;
  bool fold = false;        // kChar inside (?i)
  bool negate = false;      // kLook: (?!...)
  bool greedy = true;       // kRepeat
  bool plain = false;       // kGroup from (?:...): spliced into the enclosing concatenation
  Assertion assertion = Assertion::kTextStart;
  char32_t cp = 0;
  uint32_t set = 0;
  int min = 0, max = 0;  // kRepeat; max -1: unbounded
  std::vector<Node> kids;

  explicit Node(Kind k = kEmpty) : kind(k) {}
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::kChar:
    case Node::kSet:
    case Node::kAny:
      return false;
    case Node::kConcat:
      return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::kAlt:
      return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::kRepeat:
      return n.min == 0 || nullable(n.kids[0]);
    case Node::kGroup:
    case Node::kAtomic:
      return nullable(n.kids[0]);
    default:  // empty, lookahead, anchors
      return true;
  }
}

// Oniguruma's rule for what may not be repeated: an anchor or a lookahead,
// also as an alternative of a (?:...) group (a capturing or atomic group
// around it is fine).
bool invalid_repeat_target(const Node& n) {
  if (n.kind == Node::kGroup && n.plain) return invalid_repeat_target(n.kids[0]);
  if (n.kind == Node::kAssert || n.kind == Node::kLook) return true;
  if (n.kind == Node::kAlt) return std::any_of(n.kids.begin(), n.kids.end(), invalid_repeat_target);
  return false;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A general category name as Oniguruma reads it: case, spaces, '_' and '-' ignored.
std::string property_key(std::string_view name) {
  std::string key;
  for (const char c : name)
    if (c != ' ' && c != '_' && c != '-') key += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return key;
}

// The categories of a property name (short or long), or an empty list.
std::vector<GeneralCategory> property_categories(const std::string& key) {
  using G = GeneralCategory;
  struct Entry {
    const char* short_name;
    const char* long_name;
    std::vector<G> categories;
  };
  static const std::vector<Entry> entries = {
      {"l", "letter", {G::kLu, G::kLl, G::kLt, G::kLm, G::kLo}},
      {"lc", "casedletter", {G::kLu, G::kLl, G::kLt}},
      {"lu", "uppercaseletter", {G::kLu}},
      {"ll", "lowercaseletter", {G::kLl}},
      {"lt", "titlecaseletter", {G::kLt}},
      {"lm", "modifierletter", {G::kLm}},
      {"lo", "otherletter", {G::kLo}},
      {"m", "mark", {G::kMn, G::kMc, G::kMe}},
      {"mn", "nonspacingmark", {G::kMn}},
      {"mc", "spacingmark", {G::kMc}},
      {"me", "enclosingmark", {G::kMe}},
      {"n", "number", {G::kNd, G::kNl, G::kNo}},
      {"nd", "decimalnumber", {G::kNd}},
      {"nl", "letternumber", {G::kNl}},
      {"no", "othernumber", {G::kNo}},
      {"p", "punctuation", {G::kPc, G::kPd, G::kPs, G::kPe, G::kPi, G::kPf, G::kPo}},
      {"pc", "connectorpunctuation", {G::kPc}},
      {"pd", "dashpunctuation", {G::kPd}},
      {"ps", "openpunctuation", {G::kPs}},
      {"pe", "closepunctuation", {G::kPe}},
      {"pi", "initialpunctuation", {G::kPi}},
      {"pf", "finalpunctuation", {G::kPf}},
      {"po", "otherpunctuation", {G::kPo}},
      {"s", "symbol", {G::kSm, G::kSc, G::kSk, G::kSo}},
      {"sm", "mathsymbol", {G::kSm}},
      {"sc", "currencysymbol", {G::kSc}},
      {"sk", "modifiersymbol", {G::kSk}},
      {"so", "othersymbol", {G::kSo}},
      {"z", "separator", {G::kZs, G::kZl, G::kZp}},
      {"zs", "spaceseparator", {G::kZs}},
      {"zl", "lineseparator", {G::kZl}},
      {"zp", "paragraphseparator", {G::kZp}},
      {"c", "other", {G::kCc, G::kCf, G::kCs, G::kCo, G::kCn}},
      {"cc", "control", {G::kCc}},
      {"cf", "format", {G::kCf}},
      {"cs", "surrogate", {G::kCs}},
      {"co", "privateuse", {G::kCo}},
      {"cn", "unassigned", {G::kCn}},
  };
  for (const Entry& e : entries)
    if (key == e.short_name || key == e.long_name) return e.categories;
  return {};
}

class Parser {
 public:
  Parser(std::string_view pattern, RegexProgram& program) : pat_(pattern), prog_(program) {}

  Node parse() {
    Node n = alternation(0, false);
    if (!at_end()) fail("unmatched ')'", pos_);
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw std::invalid_argument(what + " at offset " + std::to_string(at) + " of the pattern");
  }
  [[noreturn]] void refuse(const std::string& construct, const std::string& why, size_t at) const {
    fail("unsupported construct '" + construct + "' (" + why + ")", at);
  }

  bool at_end() const { return pos_ >= pat_.size(); }
  // The next byte, or 0 at the end (NUL in a pattern is read with next()).
  char peek(size_t ahead = 0) const { return pos_ + ahead < pat_.size() ? pat_[pos_ + ahead] : '\0'; }
  bool starts_with(std::string_view s) const { return pat_.substr(pos_, s.size()) == s; }
  char32_t next() {
    const Decoded d = decode_utf8(pat_, pos_);
    if (d.cp == kInvalid) fail("the pattern is not valid UTF-8", pos_);
    pos_ += d.len;
    return d.cp;
  }

  uint32_t add_set(CharSet set) {
    prog_.sets.push_back(std::move(set));
    return uint32_t(prog_.sets.size() - 1);
  }

  Node alternation(int depth, bool fold) {
    if (depth > kMaxDepth) fail("groups nested deeper than " + std::to_string(kMaxDepth), pos_);
    Node alt(Node::kAlt);
    alt.kids.push_back(concatenation(depth, fold));
    while (peek() == '|') {
      ++pos_;
      alt.kids.push_back(concatenation(depth, fold));
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node concatenation(int depth, bool fold) {
    Node cat(Node::kConcat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      const size_t start = pos_;
      bool isolated_fold = fold;
      if (isolated_option(isolated_fold)) {
        // (?i) or (?-i): the rest of the group, alternatives included, in a group of its own.
        Node g(Node::kGroup);
        g.kids.push_back(alternation(depth + 1, isolated_fold));
        cat.kids.push_back(std::move(g));
        break;
      }
      Node atom = quantified(parse_atom(depth, fold, start), start);
      if (atom.kind == Node::kGroup && atom.plain) {  // (?:...) is only grouping: splice it in
        Node& inner = atom.kids[0];
        if (inner.kind == Node::kConcat)
          for (Node& k : inner.kids) cat.kids.push_back(std::move(k));
        else if (inner.kind != Node::kEmpty)
          cat.kids.push_back(std::move(inner));
        continue;
      }
      cat.kids.push_back(std::move(atom));
    }
    if (cat.kids.empty()) return Node(Node::kEmpty);
    if (cat.kids.size() == 1) return std::move(cat.kids[0]);
    return cat;
  }

  // "(?" then options, then ")": consumes it and sets `fold`. Options
  // followed by ':' are a group (parse_atom).
  bool isolated_option(bool& fold) {
    if (!starts_with("(?")) return false;
    size_t i = pos_ + 2;
    bool on = true, value = fold;
    for (; i < pat_.size() && (pat_[i] == 'i' || pat_[i] == '-'); ++i) {
      if (pat_[i] == '-') on = false;
      else value = on;
    }
    if (i == pos_ + 2 || i >= pat_.size() || pat_[i] != ')') return false;
    pos_ = i + 1;
    fold = value;
    return true;
  }

  Node parse_atom(int depth, bool fold, size_t start) {
    const char32_t c = next();
    switch (c) {
      case '(':
        return group(depth, fold, start);
      case '[': {
        if (fold) refuse("[", "a character class inside (?i): case-insensitive classes are not supported", start);
        Node n(Node::kSet);
        n.set = add_set(parse_class(start));
        return n;
      }
      case '.':
        return Node(Node::kAny);
      case '^':
        return assertion(Assertion::kLineStart);
      case '$':
        return assertion(Assertion::kLineEnd);
      case '\\':
        return escape(fold, start);
      case '*':
      case '+':
      case '?':
        fail(std::string("nothing to repeat before '") + char(c) + "'", start);
      case '{':
        refuse("{", "a '{' that does not follow something to repeat; write \\{ for the character", start);
      default: {
        Node n(Node::kChar);
        n.cp = c;
        n.fold = fold;
        return n;
      }
    }
  }

  static Node assertion(Assertion a) {
    Node n(Node::kAssert);
    n.assertion = a;
    return n;
  }

  void expect_close(size_t open) {
    if (peek() != ')') fail("missing ')' for the group opened", open);
    ++pos_;
  }

  Node group(int depth, bool fold, size_t open) {
    Node n(Node::kGroup);
    if (peek() != '?') {  // capturing (tmm does not capture, but it groups as Oniguruma does)
      n.kids.push_back(alternation(depth + 1, fold));
      expect_close(open);
      return n;
    }
    ++pos_;
    const char kind = peek();
    switch (kind) {
      case ':':
        ++pos_;
        n.plain = true;
        n.kids.push_back(alternation(depth + 1, fold));
        expect_close(open);
        return n;
      case '=':
      case '!':
      case '>': {
        ++pos_;
        Node body = alternation(depth + 1, fold);
        expect_close(open);
        Node look(kind == '>' ? Node::kAtomic : Node::kLook);
        look.negate = kind == '!';
        look.kids.push_back(std::move(body));
        return look;
      }
      case '#': {  // a comment
        while (!at_end() && peek() != ')') next();
        expect_close(open);
        return Node(Node::kEmpty);
      }
      case '<':
      case '\'': {
        if (kind == '<' && (peek(1) == '=' || peek(1) == '!'))
          refuse(std::string("(?<") + peek(1), "lookbehind; tmm supports lookahead (?= and (?! only", open);
        const char close = kind == '<' ? '>' : '\'';
        ++pos_;
        const size_t name = pos_;
        while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
        if (pos_ == name || peek() != close) fail("a group name must be letters, digits or '_'", name);
        ++pos_;
        n.kids.push_back(alternation(depth + 1, fold));
        expect_close(open);
        return n;
      }
      case 'i':
      case '-': {
        bool on = true, value = fold;
        while (peek() == 'i' || peek() == '-') {
          if (peek() == '-') on = false;
          else value = on;
          ++pos_;
        }
        if (peek() != ':') refuse(std::string("(?") + (at_end() ? ' ' : peek()), "an option other than i", open);
        ++pos_;
        n.kids.push_back(alternation(depth + 1, value));
        expect_close(open);
        return n;
      }
      default: {
        const std::string what = kind == '~'   ? "the absent operator"
                                 : kind == '(' ? "a conditional"
                                 : kind == 'P' ? "a Python-style named group; write (?<name>...)"
                                 : std::isalpha(static_cast<unsigned char>(kind))
                                     ? "an option other than i (m, x and the others are not supported)"
                                     : "an unknown group";
        refuse(std::string("(?") + kind, what, open);
      }
    }
  }

  // {n}, {n,}, {n,m}, {,m} at pos_ (a '{'); false, consuming nothing, if it is none of them.
  bool interval(int& min, int& max) {
    size_t i = pos_ + 1;
    const auto number = [&](int& out) {
      const size_t begin = i;
      int64_t v = 0;
      while (i < pat_.size() && pat_[i] >= '0' && pat_[i] <= '9') {
        v = std::min<int64_t>(v * 10 + (pat_[i] - '0'), int64_t(kMaxRepeat) + 1);
        ++i;
      }
      out = int(v);
      return i > begin;
    };
    const bool has_min = number(min);
    if (!has_min) min = 0;
    max = min;
    if (i < pat_.size() && pat_[i] == ',') {
      ++i;
      if (!number(max)) {
        if (!has_min) return false;  // "{,}"
        max = -1;
      }
    } else if (!has_min) {
      return false;
    }
    if (i >= pat_.size() || pat_[i] != '}') return false;
    if (min > kMaxRepeat || max > kMaxRepeat)
      fail("a repetition count above " + std::to_string(kMaxRepeat), pos_);
    if (max >= 0 && min > max) fail("a repetition {n,m} with n > m", pos_);
    pos_ = i + 1;
    return true;
  }

  Node quantified(Node atom, size_t start) {
    const char q = peek();
    if (q != '*' && q != '+' && q != '?' && q != '{') return atom;
    const size_t at = pos_;
    int min = 0, max = -1;
    if (q == '{') {
      if (!interval(min, max))
        refuse("{", "a '{' that does not start a repetition {n}, {n,}, {n,m} or {,m}; write \\{ for the character", at);
    } else {
      ++pos_;
      if (q == '+') min = 1;
      if (q == '?') max = 1;
    }
    bool lazy = false, possessive = false;
    if (peek() == '?') lazy = true, ++pos_;
    else if (peek() == '+' && q != '{') possessive = true, ++pos_;
    bool stacked = peek() == '*' || peek() == '+' || peek() == '?';
    if (peek() == '{') {
      int a, b;
      const size_t keep = pos_;
      stacked = interval(a, b);
      pos_ = keep;
    }
    if (stacked)
      refuse(std::string(pat_.substr(at, pos_ - at + 1)),
             "a quantifier after a quantifier; group the inner one, e.g. (?:a{2})+", at);
    if (invalid_repeat_target(atom))
      refuse(std::string(pat_.substr(start, pos_ - start)), "a quantifier on an assertion", start);
    if (max != 1 && nullable(atom))
      refuse(std::string(pat_.substr(start, pos_ - start)),
             "a repetition of something that can match the empty string, e.g. (a*)* or (a|)+", start);
    Node r(Node::kRepeat);
    r.min = min, r.max = max, r.greedy = !lazy;
    r.kids.push_back(std::move(atom));
    if (!possessive) return r;
    Node a(Node::kAtomic);
    a.kids.push_back(std::move(r));
    return a;
  }

  // After '\' for \t \n \r \f \v \a \e \xHH \x{H..} \uHHHH \0oo; -1 if `c` is none of them.
  int64_t char_escape(char32_t c, size_t at) {
    switch (c) {
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'a': return 0x07;
      case 'e': return 0x1B;
      case '0': {
        int64_t v = 0;
        for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k) v = v * 8 + (pat_[pos_++] - '0');
        return v;
      }
      case 'x':
      case 'u': {
        const bool braced = c == 'x' && peek() == '{';
        if (braced) ++pos_;
        const int digits = braced ? 8 : (c == 'u' ? 4 : 2);
        int64_t v = 0;
        int n = 0;
        for (; n < digits && hex_value(peek()) >= 0; ++n) v = v * 16 + hex_value(pat_[pos_++]);
        if (n == 0 || (c == 'u' && n != 4)) fail(std::string("\\") + char(c) + " without its hex digits", at);
        if (braced) {
          if (peek() != '}') fail("\\x{ without its closing '}'", at);
          ++pos_;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail("\\x or \\u: not a Unicode scalar value", at);
        return v;
      }
      default:
        return -1;
    }
  }

  // After '\' for \s \S \d \D \h \H \p{..} \P{..}; false if `c` is none of them.
  bool set_escape(char32_t c, size_t at, CharSet& set) {
    const char lower = char(c | 0x20);
    if (c != 's' && c != 'S' && c != 'd' && c != 'D' && c != 'h' && c != 'H' && c != 'p' && c != 'P') return false;
    if (lower == 's') set.ranges = class_ranges(CharClass::kSpace);
    if (lower == 'd') set.ranges = category_ranges(GeneralCategory::kNd);
    if (lower == 'h') set.ranges = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
    bool negate = c == 'S' || c == 'D' || c == 'H' || c == 'P';
    if (lower == 'p') {
      if (peek() != '{') refuse(std::string("\\") + char(c), "a property needs braces, e.g. \\p{L}", at);
      const size_t close = pat_.find('}', pos_);
      if (close == std::string_view::npos) fail("\\p{ without its closing '}'", at);
      std::string_view name = pat_.substr(pos_ + 1, close - pos_ - 1);
      pos_ = close + 1;
      if (!name.empty() && name[0] == '^') negate = !negate, name.remove_prefix(1);
      const std::string key = property_key(name);
      if (key == "any") {
        set.ranges = {{0, 0x10FFFF}};
      } else {
        const std::vector<GeneralCategory> cats = property_categories(key);
        if (cats.empty())
          refuse(std::string(pat_.substr(at, pos_ - at)),
                 "tmm supports the general categories (e.g. \\p{L}, \\p{Lu}, \\p{N}, \\p{Nd}, \\p{P}, \\p{S}, \\p{Z}, "
                 "\\p{M}, \\p{C}, long names such as \\p{Letter}) and \\p{Any}; not scripts or other properties",
                 at);
        for (const GeneralCategory g : cats) {
          const auto rs = category_ranges(g);
          set.ranges.insert(set.ranges.end(), rs.begin(), rs.end());
        }
      }
    }
    set.finish();
    if (negate) set = set.complement();
    return true;
  }

  [[noreturn]] void refuse_escape(char32_t c, size_t at) {
    std::string why;
    switch (c) {
      case 'w': case 'W': why = "Unicode word characters; spell them out, e.g. [\\p{L}\\p{M}\\p{Nd}\\p{Pc}]"; break;
      case 'b': case 'B': why = "word boundaries"; break;
      case 'k': case 'g': why = "backreferences and subexpression calls"; break;
      case 'G': why = "the search-start anchor"; break;
      case 'K': why = "keep (resetting the match start)"; break;
      case 'R': why = "the linebreak class; write (?>\\r\\n|[\\n\\v\\f\\r\\x{85}\\x{2028}\\x{2029}])"; break;
      case 'X': why = "extended grapheme clusters"; break;
      case 'c': case 'C': case 'M': why = "control and meta characters; write \\xHH"; break;
      default: why = "an escape tmm does not know";
    }
    if (c >= '1' && c <= '9') why = "backreferences";
    std::string construct = "\\";
    append_utf8(construct, c);
    refuse(construct, why, at);
  }

  Node escape(bool fold, size_t at) {
    if (at_end()) fail("a pattern ending in '\\'", at);
    const char32_t c = next();
    switch (c) {
      case 'A': return assertion(Assertion::kTextStart);
      case 'z': return assertion(Assertion::kTextEnd);
      case 'Z': return assertion(Assertion::kTextEndNewline);
      default: break;
    }
    if ((c == 'p' || c == 'P') && fold)
      refuse(std::string("\\") + char(c), "a property inside (?i): case-insensitive classes are not supported", at);
    CharSet set;
    if (set_escape(c, at, set)) {
      Node n(Node::kSet);
      n.set = add_set(std::move(set));
      return n;
    }
    int64_t cp = char_escape(c, at);
    if (cp < 0) {
      if (c < 128 && std::isalnum(static_cast<int>(c))) refuse_escape(c, at);
      cp = c;  // escaped punctuation or a non-ASCII character: itself
    }
    Node n(Node::kChar);
    n.cp = char32_t(cp);
    n.fold = fold;
    return n;
  }

  // One code point of a class at pos_ (after '[' or a range's '-'), or a set
  // escape (then `set` is filled and the result is -1).
  int64_t class_item(CharSet& set) {
    const size_t at = pos_;
    const char32_t c = next();
    if (c == '[')
      refuse("[", "'[' inside a class: nested classes and POSIX brackets such as [[:alpha:]] are not supported; "
                  "write \\[ for the character", at);
    if (c == '&' && peek() == '&') refuse("&&", "class intersection", at);
    if (c != '\\') return c;
    if (at_end()) fail("a pattern ending in '\\'", at);
    const char32_t e = next();
    if (set_escape(e, at, set)) return -1;
    const int64_t cp = char_escape(e, at);
    if (cp >= 0) return cp;
    if (e == 'b') refuse("\\b", "backspace inside a class; write \\x08", at);
    if (e < 128 && std::isalnum(static_cast<int>(e))) refuse_escape(e, at);
    return e;
  }

  CharSet parse_class(size_t open) {
    CharSet set;
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    bool first = true;
    const auto ambiguous_dash = [&](const char* after) {
      if (peek() == '-' && peek(1) != ']')
        refuse("-", std::string("a '-' after ") + after + " in a class; write \\- for the character", pos_);
    };
    while (true) {
      if (at_end()) fail("missing ']' for the class opened", open);
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      CharSet item;
      const int64_t lo = class_item(item);
      if (lo < 0) {
        set.ranges.insert(set.ranges.end(), item.ranges.begin(), item.ranges.end());
        ambiguous_dash("a class escape");
        continue;
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++pos_;
        const size_t at = pos_;
        CharSet none;
        const int64_t hi = class_item(none);
        if (hi < 0) refuse("-", "a range ending in a class escape", at);
        if (hi < lo) fail("a class range out of order", at);
        set.ranges.emplace_back(char32_t(lo), char32_t(hi));
        ambiguous_dash("a range");
        continue;
      }
      set.ranges.emplace_back(char32_t(lo), char32_t(lo));
    }
    set.finish();
    return negate ? set.complement() : set;
  }

  std::string_view pat_;
  size_t pos_ = 0;
  RegexProgram& prog_;
};

class Compiler {
 public:
  explicit Compiler(RegexProgram& program) : prog_(program) {}

  // Compiles `node` into a new sub-program ending in kMatch; returns its index.
  uint32_t sub(const Node& node) {
    const uint32_t index = uint32_t(prog_.subs.size());
    prog_.subs.emplace_back();
    std::vector<Inst> code;
    emit(node, code);
    push(code, {Op::kMatch});
    prog_.subs[index] = std::move(code);
    return index;
  }

 private:
  void push(std::vector<Inst>& code, Inst in) {
    if (++prog_.size > kMaxInstructions)
      throw std::invalid_argument("the pattern is too large: more than " + std::to_string(kMaxInstructions) +
                                  " instructions once its repetitions are expanded");
    code.push_back(in);
  }

  void emit_fold(const std::vector<char32_t>& run, std::vector<Inst>& code) {
    std::vector<char32_t> folded;
    char32_t f[3];
    for (const char32_t cp : run) {
      const int n = case_fold(cp, f);
      folded.insert(folded.end(), f, f + n);
    }
    prog_.folds.push_back(std::move(folded));
    push(code, {Op::kFold, 0, uint32_t(prog_.folds.size() - 1)});
  }

  void emit(const Node& n, std::vector<Inst>& code) {
    switch (n.kind) {
      case Node::kEmpty:
        return;
      case Node::kChar:
        if (n.fold) emit_fold({n.cp}, code);
        else push(code, {Op::kChar, 0, n.cp});
        return;
      case Node::kSet:
        push(code, {Op::kSet, 0, n.set});
        return;
      case Node::kAny:
        push(code, {Op::kAny});
        return;
      case Node::kAssert:
        push(code, {Op::kAssert, static_cast<uint8_t>(n.assertion)});
        return;
      case Node::kGroup:
        emit(n.kids[0], code);
        return;
      case Node::kConcat:
        for (size_t i = 0; i < n.kids.size();) {
          if (n.kids[i].kind == Node::kChar && n.kids[i].fold) {  // a case-insensitive run: one folded string
            std::vector<char32_t> run;
            for (; i < n.kids.size() && n.kids[i].kind == Node::kChar && n.kids[i].fold; ++i) run.push_back(n.kids[i].cp);
            emit_fold(run, code);
          } else {
            emit(n.kids[i++], code);
          }
        }
        return;
      case Node::kAlt: {
        std::vector<size_t> jumps;
        for (size_t i = 0; i + 1 < n.kids.size(); ++i) {
          const size_t split = code.size();
          push(code, {Op::kSplit, 0, uint32_t(split + 1)});
          emit(n.kids[i], code);
          jumps.push_back(code.size());
          push(code, {Op::kJmp});
          code[split].y = uint32_t(code.size());
        }
        emit(n.kids.back(), code);
        for (const size_t j : jumps) code[j].x = uint32_t(code.size());
        return;
      }
      case Node::kRepeat: {
        const Node& body = n.kids[0];
        for (int i = 0; i < n.min; ++i) emit(body, code);
        if (n.max < 0) {  // loop: split (body | exit), body, jump back
          const size_t split = code.size();
          push(code, {Op::kSplit});
          emit(body, code);
          push(code, {Op::kJmp, 0, uint32_t(split)});
          set_split(code[split], uint32_t(split + 1), uint32_t(code.size()), n.greedy);
          return;
        }
        std::vector<size_t> splits;
        for (int i = n.min; i < n.max; ++i) {
          splits.push_back(code.size());
          push(code, {Op::kSplit});
          emit(body, code);
        }
        for (const size_t s : splits) set_split(code[s], uint32_t(s + 1), uint32_t(code.size()), n.greedy);
        return;
      }
      case Node::kLook: {
        const uint32_t s = sub(n.kids[0]);
        push(code, {Op::kLook, uint8_t(n.negate ? 1 : 0), s});
        return;
      }
      case Node::kAtomic: {
        const uint32_t s = sub(n.kids[0]);
        push(code, {Op::kAtomic, 0, s});
        return;
      }
    }
  }

  static void set_split(Inst& in, uint32_t body, uint32_t exit, bool greedy) {
    in.x = greedy ? body : exit;
    in.y = greedy ? exit : body;
  }

  RegexProgram& prog_;
};

}  // namespace

RegexProgram compile_regex(std::string_view pattern) {
  RegexProgram program;
  const Node root = Parser(pattern, program).parse();
  Compiler(program).sub(root);
  return program;
}

RegexProgram compile_literal(std::string_view text) {
  Node cat(Node::kConcat);
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    Node c(Node::kChar);
    c.cp = d.cp == kInvalid ? 0xFFFD : d.cp;
    cat.kids.push_back(c);
    i += d.len;
  }
  RegexProgram program;
  Compiler(program).sub(cat);
  return program;
}

}  // namespace tmm::text::detail
