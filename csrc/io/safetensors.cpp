// safetensors reader and writer (format in tmm/io/safetensors.h).
//
// Reading is split in two: parse_header() validates the JSON header against
// the size of the data section alone, then the tensor bytes are copied out
// either from a buffer (memcpy) or from the file (pread straight into the new
// tensors, so a file is read once and never mapped: a file truncated under us
// is an error, not a SIGBUS).
#include <tmm/io/safetensors.h>

#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>
#include <tuple>

#include <ATen/ops/empty.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O copies tensor bytes as they are: a little-endian host is assumed"
#endif

// Every error names where it happened (`where` must be in scope).
#define ST_CHECK(cond, ...) TORCH_CHECK(cond, "safetensors ", where, ": ", __VA_ARGS__)

namespace tmm::io {
namespace {

using nlohmann::json;

// The reference implementation's limit: a larger header is an attack, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests 3 deep (root, entry, shape); the bound only stops
// pathological input from nesting without end.
constexpr int kMaxDepth = 16;

struct Dtype {
  const char* name;
  at::ScalarType type;
  uint64_t size;
};
constexpr Dtype kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2},
    {"BF16", at::kBFloat16, 2}, {"I64", at::kLong, 8}, {"I32", at::kInt, 4},
    {"I16", at::kShort, 2}, {"I8", at::kChar, 1}, {"U8", at::kByte, 1},
    {"BOOL", at::kBool, 1}};

const Dtype* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const Dtype* dtype_by_type(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return &d;
  return nullptr;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

struct Entry {
  std::string name;
  const Dtype* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // relative to the data section
};

struct Header {
  std::vector<Entry> entries;  // sorted by offset
  std::map<std::string, std::string> metadata;
};

// Header length from the 8-byte prefix, checked against the file size.
uint64_t header_length(const uint8_t prefix[8], uint64_t file_size, const std::string& where) {
  uint64_t n = 0;
  std::memcpy(&n, prefix, 8);  // little-endian host
  ST_CHECK(n <= kMaxHeaderBytes, "header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  ST_CHECK(n <= file_size - 8, "header length ", n, " exceeds the ", file_size - 8,
           " bytes that follow the length field (truncated file?)");
  return n;
}

// nlohmann keeps the last of duplicate keys silently: the parser callback
// tracks the keys of every open object and rejects a repeat.
json parse_json(const char* text, size_t n, const std::string& where) {
  // nlohmann's lexer reads NUL as end of input, so "{}\0junk" would pass.
  const void* nul = std::memchr(text, 0, n);
  ST_CHECK(!nul, "header is not valid JSON: NUL byte at offset ", static_cast<const char*>(nul) - text);
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        ST_CHECK(depth < kMaxDepth, "header JSON nests deeper than ", kMaxDepth, " levels");
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        ST_CHECK(open_objects.back().insert(key).second, "duplicate key '", key, "' in the header");
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, text + n, callback);
  } catch (const json::exception& e) {
    ST_CHECK(false, "header is not valid JSON: ", e.what());
  }
  return {};  // unreachable
}

std::vector<int64_t> parse_shape(const json& v, const std::string& name, const Dtype& dtype,
                                 uint64_t* nbytes, const std::string& where) {
  ST_CHECK(v.is_array(), "tensor '", name, "': shape is not an array");
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& d = v[i];
    // nlohmann stores non-negative integer literals as unsigned.
    ST_CHECK(!d.is_number_integer() || d.is_number_unsigned(), "tensor '", name, "': shape entry ", i,
             " is negative (", d.dump(), ")");
    ST_CHECK(d.is_number_unsigned(), "tensor '", name, "': shape entry ", i, " is not an integer (",
             d.dump(), ")");
    const uint64_t s = d.get<uint64_t>();
    ST_CHECK(s <= uint64_t(INT64_MAX) && !__builtin_mul_overflow(numel, s, &numel) &&
                 numel <= uint64_t(INT64_MAX),
             "tensor '", name, "': shape ", v.dump(), " overflows the element count");
    shape.push_back(int64_t(s));
  }
  ST_CHECK(!__builtin_mul_overflow(numel, dtype.size, nbytes), "tensor '", name, "': shape ",
           v.dump(), " overflows the byte size");
  return shape;
}

Entry parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& where) {
  ST_CHECK(v.is_object(), "tensor '", name, "': entry is not an object");
  for (const auto& [key, _] : v.items())
    ST_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", "tensor '", name,
             "': unexpected key '", key, "' (expected dtype, shape, data_offsets)");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    ST_CHECK(v.contains(key), "tensor '", name, "': missing '", key, "'");

  Entry e{name, nullptr, {}, 0, 0};
  const json& dt = v["dtype"];
  ST_CHECK(dt.is_string(), "tensor '", name, "': dtype is not a string");
  e.dtype = dtype_by_name(dt.get<std::string>());
  ST_CHECK(e.dtype, "tensor '", name, "': unknown dtype '", dt.get<std::string>(),
           "' (supported: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");

  uint64_t nbytes = 0;
  e.shape = parse_shape(v["shape"], name, *e.dtype, &nbytes, where);

  const json& off = v["data_offsets"];
  ST_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
           "tensor '", name, "': data_offsets must be two non-negative integers, got ", off.dump());
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  ST_CHECK(e.begin <= e.end, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] end before they begin");
  ST_CHECK(e.end <= data_size, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end,
           "] out of bounds of the ", data_size, "-byte data section");
  ST_CHECK(e.end - e.begin == nbytes, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] hold ",
           e.end - e.begin, " bytes but ", dt.get<std::string>(), " shape ", v["shape"].dump(), " needs ", nbytes);
  return e;
}

Header parse_header(const char* text, size_t n, uint64_t data_size, const std::string& where) {
  const json j = parse_json(text, n, where);
  ST_CHECK(j.is_object(), "header is not a JSON object");
  Header h;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      ST_CHECK(v.is_object(), "__metadata__ is not an object");
      for (const auto& [key, value] : v.items()) {
        ST_CHECK(value.is_string(), "__metadata__ value of '", key, "' is not a string (", value.dump(), ")");
        h.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(name, v, data_size, where));
  }
  // The tensors must tile the data section: no overlap, no gap, no tail.
  std::sort(h.entries.begin(), h.entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : h.entries) {
    ST_CHECK(e.begin >= expected, "tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
             "] overlap tensor '", prev ? prev->name : "", "' which ends at ", expected);
    ST_CHECK(e.begin == expected, "tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
             "] leave a gap of ", e.begin - expected, " unused bytes before it");
    expected = e.end;
    prev = &e;
  }
  ST_CHECK(expected == data_size, "the data section has ", data_size - expected,
           " trailing bytes not covered by any tensor");
  return h;
}

// torch's bool must hold 0 or 1; other bytes are undefined behaviour later.
void check_bool_bytes(const Entry& e, const at::Tensor& t, const std::string& where) {
  if (e.dtype->type != at::kBool) return;
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  for (uint64_t i = 0; i < e.end - e.begin; ++i)
    ST_CHECK(p[i] <= 1, "tensor '", e.name, "': BOOL byte ", i, " is ", int(p[i]), ", not 0 or 1");
}

at::Tensor empty_for(const Entry& e) {
  return at::empty(e.shape, at::TensorOptions().dtype(e.dtype->type));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& where) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, 1u << 30), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    ST_CHECK(r >= 0, "read failed: ", errno_text(errno));
    ST_CHECK(r > 0, "file ended early (truncated while being read?)");
    p += r, n -= uint64_t(r), offset += uint64_t(r);
  }
}

// Header JSON in the order the data will be written, padded to 8 bytes.
std::string build_header(const std::vector<std::pair<const std::string*, const at::Tensor*>>& order,
                         const std::map<std::string, std::string>& metadata, const std::string& where) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    const uint64_t nbytes = uint64_t(t->numel()) * uint64_t(t->element_size());
    h[*name] = {{"dtype", dtype_by_type(t->scalar_type())->name},
                {"shape", t->sizes().vec()},
                {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {
    ST_CHECK(false, "a tensor name or metadata string is not valid UTF-8: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

SafetensorsFile load_safetensors_from_buffer(const uint8_t* data, size_t size) {
  const std::string where = "buffer";
  ST_CHECK(size >= 8, "only ", size, " bytes; the header length field alone takes 8");
  const uint64_t n = header_length(data, size, where);
  const uint8_t* body = data + 8 + n;
  const Header h = parse_header(reinterpret_cast<const char*>(data + 8), n, size - 8 - n, where);
  SafetensorsFile out;
  for (const Entry& e : h.entries) {
    at::Tensor t = empty_for(e);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), body + e.begin, e.end - e.begin);
    check_bool_bytes(e, t, where);
    out.tensors.emplace(e.name, std::move(t));
  }
  out.metadata = h.metadata;
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = "file '" + path + "'";
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(f.fd >= 0, "cannot open: ", errno_text(errno));
  struct stat st {};
  ST_CHECK(::fstat(f.fd, &st) == 0, "cannot stat: ", errno_text(errno));
  ST_CHECK(S_ISREG(st.st_mode), "not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  ST_CHECK(size >= 8, "only ", size, " bytes; the header length field alone takes 8");
  uint8_t prefix[8];
  pread_all(f.fd, prefix, 8, 0, where);
  const uint64_t n = header_length(prefix, size, where);
  std::string text(n, '\0');
  pread_all(f.fd, text.data(), n, 8, where);
  const Header h = parse_header(text.data(), n, size - 8 - n, where);
  SafetensorsFile out;
  for (const Entry& e : h.entries) {
    at::Tensor t = empty_for(e);
    pread_all(f.fd, t.data_ptr(), e.end - e.begin, 8 + n + e.begin, where);
    check_bool_bytes(e, t, where);
    out.tensors.emplace(e.name, std::move(t));
  }
  out.metadata = h.metadata;
  return out;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string where = "file '" + path + "'";
  std::set<std::string> names;
  std::vector<std::pair<const std::string*, const at::Tensor*>> order;
  for (const auto& [name, t] : tensors) {
    ST_CHECK(name != "__metadata__", "'__metadata__' is reserved and cannot name a tensor");
    ST_CHECK(names.insert(name).second, "tensor '", name, "' is given twice");
    ST_CHECK(t.defined(), "tensor '", name, "' is undefined");
    ST_CHECK(t.layout() == at::kStrided && !t.is_meta(), "tensor '", name,
             "': only dense tensors with data can be saved, got layout ", t.layout(), " on ", t.device());
    ST_CHECK(dtype_by_type(t.scalar_type()), "tensor '", name, "': dtype ", t.scalar_type(),
             " has no safetensors code here (supported: float64/32/16, bfloat16, int64/32/16/8, uint8, bool)");
    order.emplace_back(&name, &t);
  }
  // Largest items first (stable): every tensor then starts at a multiple of
  // its item size, since the data section starts at a multiple of 8.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->element_size() > b.second->element_size();
  });
  const std::string header = build_header(order, metadata, where);

  AtomicFile file(path);
  const uint64_t n = header.size();
  uint8_t prefix[8];
  std::memcpy(prefix, &n, 8);  // little-endian host
  file.write(prefix, 8);
  file.write(header.data(), n);
  for (const auto& [name, t] : order) {
    if (t->numel() == 0) continue;
    // One CPU contiguous copy at a time (a no-op for CPU contiguous tensors).
    const at::Tensor c = t->detach().cpu().resolve_neg().contiguous();
    file.write(c.data_ptr(), c.nbytes());
  }
  file.commit();
}

}  // namespace tmm::io
