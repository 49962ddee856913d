// Tests of tmm::io's safetensors reader and writer: round trips, the exact
// byte layout, every validation error on handcrafted files, atomic writes.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <tmm/tmm.h>

using Catch::Contains;
using tmm::io::load_safetensors;
using tmm::io::load_safetensors_from_buffer;
using tmm::io::save_safetensors;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh directory per test, removed with its files afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tmm_safetensors_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    for (const auto& f : files()) ::unlink((path + "/" + f).c_str());
    ::rmdir(path.c_str());
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.emplace_back(e->d_name);
      closedir(d);
    }
    return out;
  }
};

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A handcrafted file: length field, header text as given, `data_size` data bytes.
Bytes make_file(const std::string& header, size_t data_size = 0, uint64_t length = UINT64_MAX) {
  const uint64_t n = length == UINT64_MAX ? header.size() : length;
  std::string s(8, '\0');
  std::memcpy(&s[0], &n, 8);
  s += header;
  s.append(data_size, '\0');
  return Bytes(s.begin(), s.end());
}

tmm::io::SafetensorsFile load(const Bytes& b) { return load_safetensors_from_buffer(b.data(), b.size()); }

uint64_t length_field(const Bytes& b) {
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  return n;
}

at::Tensor sample(at::ScalarType dtype, at::IntArrayRef shape) {
  if (dtype == at::kBool) return at::randint(0, 2, shape).to(at::kBool);
  if (at::isFloatingType(dtype)) return at::randn(shape, at::kDouble).to(dtype);
  return at::randint(dtype == at::kByte ? 0 : -100, 100, shape).to(dtype);
}

const at::ScalarType kAllDtypes[] = {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong,
                                     at::kInt,    at::kShort, at::kChar, at::kByte,     at::kBool};

}  // namespace

TEST_CASE("safetensors round trip of every dtype and layout", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.path + "/model.safetensors";
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto dtype : kAllDtypes) {
    const std::string d = c10::toString(dtype);
    tensors.emplace_back(d + ".matrix", sample(dtype, {3, 5}));
    tensors.emplace_back(d + ".scalar", sample(dtype, {}));
    tensors.emplace_back(d + ".empty", sample(dtype, {0, 4}));
    tensors.emplace_back(d + ".transposed", sample(dtype, {4, 3}).t());
    tensors.emplace_back(d + ".strided", sample(dtype, {7, 6}).slice(0, 1, 7, 2).slice(1, 0, 6, 3));
  }
  const std::map<std::string, std::string> metadata = {{"config", "{\"d_model\": 8}"}, {"format", "pt"}};
  save_safetensors(path, tensors, metadata);

  const auto from_file = load_safetensors(path);
  const Bytes bytes = read_bytes(path);
  const auto from_buffer = load(bytes);
  for (const auto* loaded : {&from_file, &from_buffer}) {
    CHECK(loaded->metadata == metadata);
    REQUIRE(loaded->tensors.size() == tensors.size());
    for (const auto& [name, t] : tensors) {
      INFO(name);
      const at::Tensor& got = loaded->tensors.at(name);
      CHECK(got.scalar_type() == t.scalar_type());
      CHECK(got.sizes() == t.sizes());
      CHECK(got.is_contiguous());
      CHECK(at::equal(got, t));
    }
  }
  // Loaded tensors own their memory.
  CHECK(from_buffer.tensors.at("Float.matrix").data_ptr() != nullptr);
}

TEST_CASE("safetensors writes the exact byte layout", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.path + "/a.safetensors";
  const at::Tensor a = at::tensor({1.0f, 2.0f});
  const at::Tensor b = at::tensor({7, 8, 9}, at::kByte);
  save_safetensors(path, {{"b", b}, {"a", a}}, {{"k", "v"}});
  const Bytes bytes = read_bytes(path);
  const uint64_t n = length_field(bytes);
  const std::string json =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  CHECK(n % 8 == 0);
  CHECK(n == (json.size() + 7) / 8 * 8);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  CHECK(header == json + std::string(n - json.size(), ' '));  // padded with spaces
  REQUIRE(bytes.size() == 8 + n + 11);
  CHECK(std::memcmp(bytes.data() + 8 + n, a.data_ptr(), 8) == 0);  // F32 little-endian
  CHECK(std::memcmp(bytes.data() + 8 + n + 8, b.data_ptr(), 3) == 0);

  SECTION("no tensors, no metadata") {
    save_safetensors(path, {});
    CHECK(read_bytes(path) == make_file("{}      "));
    CHECK(load_safetensors(path).tensors.empty());
  }
  SECTION("every tensor is aligned to its item size") {
    save_safetensors(path, {{"u", at::zeros({3}, at::kByte)}, {"h", at::zeros({1}, at::kHalf)},
                            {"d", at::zeros({2}, at::kDouble)}, {"i", at::zeros({1}, at::kInt)}});
    const Bytes f = read_bytes(path);
    const uint64_t m = length_field(f);
    const std::string h(f.begin() + 8, f.begin() + 8 + long(m));
    CHECK((8 + m) % 8 == 0);
    CHECK_THAT(h, Contains(R"("d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]})"));
    CHECK_THAT(h, Contains(R"("i":{"dtype":"I32","shape":[1],"data_offsets":[16,20]})"));
    CHECK_THAT(h, Contains(R"("h":{"dtype":"F16","shape":[1],"data_offsets":[20,22]})"));
    CHECK_THAT(h, Contains(R"("u":{"dtype":"U8","shape":[3],"data_offsets":[22,25]})"));
  }
}

TEST_CASE("safetensors rejects corrupt files", "[safetensors]") {
  const std::string ok = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char* what;
    Bytes file;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"truncated length", Bytes(5, 0), "only 5 bytes"},
      {"header past the end", make_file("{" + ok + "}", 8, 1000), "exceeds the"},
      {"header over the limit", make_file("{}", 0, 100'000'001), "exceeds the limit"},
      {"bad JSON", make_file("{\"w\": {", 0), "not valid JSON"},
      {"NUL in header", make_file(std::string("{}\0 ", 4), 0), "NUL byte at offset 2"},
      {"not an object", make_file("[1, 2]"), "not a JSON object"},
      {"entry not an object", make_file(R"({"w": 3})"), "tensor 'w': entry is not an object"},
      {"missing field", make_file(R"({"w":{"dtype":"F32","shape":[2]}})", 8), "tensor 'w': missing 'data_offsets'"},
      {"extra field", make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
       "tensor 'w': unexpected key 'x'"},
      {"dtype not a string", make_file(R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'w': dtype is not a string"},
      {"unknown dtype", make_file(R"({"w":{"dtype":"Q8","shape":[2],"data_offsets":[0,2]}})", 2),
       "tensor 'w': unknown dtype 'Q8'"},
      {"shape not an array", make_file(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
       "tensor 'w': shape is not an array"},
      {"negative shape", make_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "tensor 'w': shape entry 0 is negative"},
      {"fractional shape", make_file(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
       "tensor 'w': shape entry 0 is not an integer"},
      {"numel overflow", make_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "overflows the element count"},
      {"byte size overflow", make_file(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8),
       "overflows the byte size"},
      {"offsets not a pair", make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8),
       "data_offsets must be two non-negative integers"},
      {"negative offset", make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
       "data_offsets must be two non-negative integers"},
      {"end before begin", make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
       "end before they begin"},
      {"out of bounds", make_file("{" + ok + "}", 4), "tensor 'w': data_offsets [0, 8] out of bounds"},
      {"size mismatch", make_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes but F32 shape [3] needs 12"},
      {"overlap", make_file("{" + ok + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
       "tensor 'v': data_offsets [4, 12] overlap tensor 'w'"},
      {"gap", make_file("{" + ok + R"(,"v":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16),
       "leave a gap of 4 unused bytes"},
      {"not starting at 0", make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "leave a gap of 4"},
      {"trailing bytes", make_file("{" + ok + "}", 12), "4 trailing bytes"},
      {"duplicate tensor", make_file("{" + ok + "," + ok + "}", 8), "duplicate key 'w'"},
      {"duplicate field", make_file(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
       "duplicate key 'dtype'"},
      {"metadata not an object", make_file(R"({"__metadata__":["a"]})"), "__metadata__ is not an object"},
      {"metadata value not a string", make_file(R"({"__metadata__":{"n":3}})"), "value of 'n' is not a string"},
      {"bad BOOL byte", Bytes(), "BOOL byte 1 is 2"},
      {"deep nesting", make_file(std::string(100, '[') + std::string(100, ']')), "nests deeper"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Bytes file = c.file;
    if (file.empty()) {  // the BOOL case: a valid header, bytes 0, 2
      file = make_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 2);
      file.back() = 2;
    }
    CHECK_THROWS_WITH(load(file), Contains(c.message) && Contains("safetensors buffer"));
  }
}

TEST_CASE("safetensors file errors name the file", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.path + "/m.safetensors";
  CHECK_THROWS_WITH(load_safetensors(path), Contains(path) && Contains("cannot open"));
  CHECK_THROWS_WITH(load_safetensors(dir.path), Contains("not a regular file"));

  save_safetensors(path, {{"w", at::ones({64})}});
  Bytes full = read_bytes(path);
  full.resize(full.size() - 4);  // truncated data
  write_bytes(path, full);
  CHECK_THROWS_WITH(load_safetensors(path), Contains("file '" + path + "'") && Contains("tensor 'w'") &&
                                                Contains("out of bounds"));
  full.resize(6);
  write_bytes(path, full);
  CHECK_THROWS_WITH(load_safetensors(path), Contains("only 6 bytes"));
}

TEST_CASE("safetensors rejects what it cannot save", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.path + "/m.safetensors";
  const at::Tensor x = at::ones({2});
  CHECK_THROWS_WITH(save_safetensors(path, {{"x", x}, {"x", x}}), Contains("tensor 'x' is given twice"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", x}}), Contains("reserved"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"x", at::Tensor()}}), Contains("tensor 'x' is undefined"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"c", at::ones({2}, at::kComplexFloat)}}),
                    Contains("tensor 'c': dtype ComplexFloat"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"s", x.to_sparse()}}), Contains("only dense tensors"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"x", x}}, {{"bad", "\xff"}}), Contains("not valid UTF-8"));
  CHECK(dir.files().empty());
}

TEST_CASE("safetensors writes are atomic", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.path + "/m.safetensors";
  save_safetensors(path, {{"w", at::ones({4})}});
  save_safetensors(path, {{"w", at::zeros({8})}});  // replaces the old file
  CHECK(dir.files() == std::vector<std::string>{"m.safetensors"});  // no temporary left
  CHECK(at::equal(load_safetensors(path).tensors.at("w"), at::zeros({8})));

  SECTION("a failed save leaves the old file and no temporary") {
    const Bytes before = read_bytes(path);
    CHECK_THROWS(save_safetensors(path, {{"w", at::ones({2}, at::kComplexDouble)}}));
    CHECK(read_bytes(path) == before);
    CHECK(dir.files() == std::vector<std::string>{"m.safetensors"});
  }
  SECTION("a failed rename removes the temporary") {
    const std::string sub = dir.path + "/sub";
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    // Renaming a file over a directory fails after the data is written.
    CHECK_THROWS_WITH(save_safetensors(sub, {{"w", at::ones({4})}}), Contains("cannot rename"));
    CHECK(dir.files().size() == 2);  // m.safetensors and sub, nothing else
    ::rmdir(sub.c_str());
  }
  SECTION("a missing directory is a clear error") {
    CHECK_THROWS_WITH(save_safetensors(dir.path + "/none/m.safetensors", {{"w", at::ones({1})}}),
                      Contains("cannot create the temporary file"));
  }
}
