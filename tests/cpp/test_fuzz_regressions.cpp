// Replays the fuzzers' inputs (tests/fuzz) through the function each fuzzer
// calls. A regression (tests/fuzz/regressions/<target>/, an input that once
// crashed a fuzzer or showed a bug of its kind) must raise the specific error
// its fix introduced, listed below beside its file name, so that a replay
// fails without the fix on a normal run too, not only under a sanitizer. The
// seeds (tests/fuzz/corpus/<target>/) are valid inputs: model configs must
// build, run and round-trip, checkpoints and distillations (two files in one
// input, split at the first NUL byte) load; safetensors files load or raise
// c10::Error, tokenizer files load or raise std::invalid_argument. Any other
// exception fails the test, and a crash or sanitizer report ends the run.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <tmm/io/safetensors.h>
#include <tmm/models.h>
#include <tmm/models/checkpoint.h>
#include <tmm/models/distill.h>
#include <tmm/text/tokenizer.h>
#include <tmm/tmm.h>

#include "../fuzz/model_size.h"
#include "repo_paths.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(tmm_test::models_dir()).parent_path() / "tests" / "fuzz";

// The input files of one fuzz target under `kinds` ("regressions", "corpus"),
// sorted, README files left out.
std::vector<fs::path> inputs(const std::string& target,
                             std::initializer_list<const char*> kinds = {"regressions", "corpus"}) {
  std::vector<fs::path> out;
  for (const char* kind : kinds) {
    const fs::path dir = kFuzzDir / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string().rfind("README", 0) != 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What each model_config regression was fixed to raise: a substring of the
// error build_model gives, with the config's "arch" replaced by `arch` when
// set (fuzz_model_config tries every parser on an input, so a misspelt arch
// reached the Transformer's validator; as written, it is an unknown arch).
struct ConfigRegression {
  const char* file;
  const char* arch;
  const char* error;
};
const ConfigRegression kConfigRegressions[] = {
    {"crash-5b89103c-ffn-mult-overflow-any-arch.json", "transformer",
     "key \"ffn_mult\" gives an FFN width 2/3 * ffn_mult * d_model = "},
    {"crash-5b89103c-ffn-mult-overflow-any-arch.json", "", "unknown \"arch\" \"tranmorsefr\""},
    {"transformer-ffn-mult-overflow.json", "", "key \"ffn_mult\" gives an FFN width 2/3 * ffn_mult * d_model = "},
    {"transformer-ffn-width-zero.json", "", "key \"ffn_mult\" gives an FFN width of 0"},
    {"mamba2-d-inner-overflow.json", "", "key \"expand\" makes a size overflow: 4 * 4611686018427387904"},
    {"mamba2-in-proj-width-overflow.json", "", "key \"d_state\" makes a size overflow: 2 * 4611686018427387904"},
    {"hyena-in-proj-overflow.json", "", "key \"d_model\" makes a size overflow: 3 * 4611686018427387904"},
    {"tmm-ffn-overflow.json", "", "key \"ffn_mult\" makes a size overflow: 4611686018427387904 * 4"},
};

// Whether `s` is well-formed UTF-8 (no stray continuation bytes, overlong
// forms, surrogates or code points past U+10FFFF).
bool is_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 0x2) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A temporary folder holding the two files of a fuzz input (split at its first NUL), as the fuzzer writes them.
// (Removed with std::remove and rmdir: fs::remove_all binds to libtorch's copy, which crashes.)
struct InputFolder {
  fs::path dir;
  const char *first, *second;
  InputFolder(const std::string& input, const char* first_name, const char* second_name)
      : first(first_name), second(second_name) {
    char name[] = "/tmp/tmm_fuzz_input_XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    dir = name;
    const auto [a, b] = tmm_fuzz::split_at_nul(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    std::ofstream(dir / first, std::ios::binary) << a;
    std::ofstream(dir / second, std::ios::binary) << b;
  }
  ~InputFolder() {
    std::remove((dir / first).c_str());
    std::remove((dir / second).c_str());
    rmdir(dir.c_str());
  }
};

// What each checkpoint or distillation regression was fixed to raise: a substring of the loader's error.
struct Regression {
  const char* file;
  const char* error;
};
const Regression kCheckpointRegressions[] = {
    {"", ""},  // none so far (the loader survived its runs)
};
const Regression kDistillationRegressions[] = {
    {"crash-a068b934-order-missing.bin", "\"order\" must be an integer >= 1"},  // was nlohmann's out_of_range
    {"format-not-a-string.bin", "is not a tmm-distilled-1 file"},                // was nlohmann's type_error
    {"length-not-an-integer.bin", "kernel 'blocks.0.mixer.weight': \"length\" must be an integer >= 2"},
    {"length-shorter-than-the-window.bin", "kernel 'blocks.0.mixer.weight': \"length\" must be an integer >= 2"},
    {"taps-of-fewer-kernels-than-the-modes.bin", "has modes [2, 1, 2], taps [1, 1, 2]"},
};

// Each regression file of `target` is listed in `table` and raises its error.
template <size_t N>
void check_regressions(const std::string& target, const Regression (&table)[N],
                       const std::function<void(const std::string&)>& load) {
  using Catch::Matchers::Contains;
  for (const auto& p : inputs(target, {"regressions"})) {
    INFO("input " << p.string() << ": a new regression needs its expected error listed");
    const auto* r = std::find_if(std::begin(table), std::end(table), [&](const Regression& x) {
      return p.filename() == x.file;
    });
    REQUIRE(r != std::end(table));
    CHECK_THROWS_WITH(load(read_all(p)), Contains(r->error));
  }
}

}  // namespace

TEST_CASE("fuzz inputs: the safetensors reader loads or raises c10::Error", "[fuzz][safetensors]") {
  const auto files = inputs("safetensors");
  REQUIRE(!files.empty());  // at least the seed corpus
  for (const auto& p : files) {
    INFO("input " << p.string());
    const std::string bytes = read_all(p);
    try {
      const auto f = tmm::io::load_safetensors_from_buffer(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      uint64_t total = 0;
      for (const auto& [name, t] : f.tensors) {
        CHECK(t.is_contiguous());
        total += t.nbytes();
      }
      CHECK(total + 8 <= bytes.size());
    } catch (const c10::Error&) {
      // a clean error
    }
  }
}

TEST_CASE("fuzz regressions: each model config raises the error its fix introduced", "[fuzz][models]") {
  using Catch::Matchers::Contains;
  const auto files = inputs("model_config", {"regressions"});
  REQUIRE(!files.empty());
  for (const auto& p : files) {  // a new regression needs its expected error listed above
    INFO("input " << p.string());
    CHECK(std::any_of(std::begin(kConfigRegressions), std::end(kConfigRegressions),
                      [&](const ConfigRegression& r) { return p.filename() == r.file; }));
  }
  for (const auto& r : kConfigRegressions) {
    const fs::path p = kFuzzDir / "regressions" / "model_config" / r.file;
    INFO("input " << p.string() << (*r.arch ? " as arch " : "") << r.arch);
    REQUIRE(fs::is_regular_file(p));
    auto config = nlohmann::json::parse(read_all(p));
    if (*r.arch) config["arch"] = r.arch;
    CHECK_THROWS_WITH(tmm::models::build_model(config.dump()), Contains(r.error));
  }
}

TEST_CASE("fuzz corpus: the model config seeds build, run and round-trip", "[fuzz][models]") {
  const auto files = inputs("model_config", {"corpus"});
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    INFO("input " << p.string());
    const std::string text = read_all(p);
    std::shared_ptr<tmm::models::LanguageModel> m;
    REQUIRE_NOTHROW(m = tmm::models::build_model(text));
    const auto cfg = nlohmann::json::parse(m->config_json());
    const int64_t V = cfg.at("vocab_size").get<int64_t>();
    const int64_t L = std::min<int64_t>(cfg.at("max_len").get<int64_t>(), 5);
    m->eval();
    at::NoGradGuard no_grad;
    const at::Tensor logits = m->forward(at::arange(L, at::kLong).remainder(V).unsqueeze(0));
    CHECK(logits.sizes() == at::IntArrayRef({1, L, V}));
    CHECK(at::isfinite(logits).all().item<bool>());
    CHECK(tmm::models::build_model(m->config_json())->config_json() == m->config_json());
  }
}

TEST_CASE("fuzz regressions: a tokenizer error message quoting ill-formed UTF-8 is made valid UTF-8",
          "[fuzz][tokenizer]") {
  const fs::path p = kFuzzDir / "regressions" / "tokenizer" / "ill-formed-utf8-in-error-message.json";
  const std::string text = read_all(p);
  REQUIRE_FALSE(is_utf8(text));  // the input itself is not
  std::string message;
  try {
    tmm::text::Tokenizer::from_json_text(text);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  INFO("message: " << message);
  REQUIRE_FALSE(message.empty());  // rejected, with std::invalid_argument
  CHECK(is_utf8(message));
  CHECK(message.find("\xEF\xBF\xBD") != std::string::npos);  // U+FFFD where the ill-formed bytes were
}

TEST_CASE("fuzz inputs: tokenizer.json files load and encode, or raise std::invalid_argument", "[fuzz][tokenizer]") {
  const auto files = inputs("tokenizer");
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    INFO("input " << p.string());
    const std::string text = read_all(p);
    std::optional<tmm::text::Tokenizer> tok;
    try {
      tok = tmm::text::Tokenizer::from_json_text(text);
    } catch (const std::invalid_argument&) {
      continue;  // a clean error
    }
    // As the fuzzer does: the file's own text and a multilingual probe.
    for (const std::string& s : {text, std::string("h\xC3\xA9llo \xE4\xBD\xA0 <|endoftext|> it's \xFF\n")}) {
      const std::vector<int64_t> ids = tok->encode(s);
      for (const int64_t id : ids) CHECK((id >= 0 && id < tok->vocab_size()));
      CHECK_NOTHROW(tok->decode(ids));
    }
  }
}

TEST_CASE("fuzz inputs: the checkpoint seeds load, hold their files' tensors and run", "[fuzz][checkpoint]") {
  const auto files = inputs("checkpoint", {"corpus"});
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    INFO("input " << p.string());
    const InputFolder folder(read_all(p), "config.json", "model.safetensors");
    std::shared_ptr<tmm::models::LanguageModel> m;
    REQUIRE_NOTHROW(m = tmm::models::load_checkpoint(folder.dir.string()));
    const auto file = tmm::io::load_safetensors((folder.dir / "model.safetensors").string());
    size_t seen = 0;
    for (const auto& t : m->named_parameters()) {
      REQUIRE(file.tensors.count(t.key()) == 1);
      CHECK(at::equal(t.value(), file.tensors.at(t.key()).to(t.value().scalar_type())));
      ++seen;
    }
    for (const auto& t : m->named_buffers()) seen += file.tensors.count(t.key());
    CHECK(seen == file.tensors.size());
  }
}

TEST_CASE("fuzz regressions: each checkpoint raises the error its fix introduced", "[fuzz][checkpoint]") {
  check_regressions("checkpoint", kCheckpointRegressions, [](const std::string& input) {
    const InputFolder folder(input, "config.json", "model.safetensors");
    tmm::models::load_checkpoint(folder.dir.string());
  });
}

TEST_CASE("fuzz inputs: the distillation seeds load and materialize", "[fuzz][distillation]") {
  const auto files = inputs("distillation", {"corpus"});
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    INFO("input " << p.string());
    const InputFolder folder(read_all(p), "distilled.json", "distilled.safetensors");
    std::shared_ptr<tmm::models::Distillation> d;
    REQUIRE_NOTHROW(d = tmm::models::load_distillation(folder.dir.string()));
    REQUIRE(!d->kernels.empty());
    for (const auto& [name, k] : d->kernels)
      CHECK(k.materialize(k.length).sizes() == at::IntArrayRef({k.lambda.size(0), k.lambda.size(1), k.length}));
  }
}

TEST_CASE("fuzz regressions: each distillation raises the error its fix introduced", "[fuzz][distillation]") {
  check_regressions("distillation", kDistillationRegressions, [](const std::string& input) {
    const InputFolder folder(input, "distilled.json", "distilled.safetensors");
    tmm::models::load_distillation(folder.dir.string());
  });
}
