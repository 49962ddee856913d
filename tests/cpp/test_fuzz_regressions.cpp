// Replays the fuzzers' inputs (tests/fuzz): every file under
// tests/fuzz/regressions/<target>/ (inputs that once crashed a fuzzer) and
// tests/fuzz/corpus/<target>/ (the seeds) goes through the function its
// fuzzer calls, which must succeed or raise c10::Error (std::invalid_argument
// for the tokenizer): any other exception fails the test, and a crash or
// sanitizer report ends the run.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <tmm/models.h>
#include <tmm/text/tokenizer.h>
#include <tmm/tmm.h>

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(TMM_MODELS_DIR).parent_path() / "tests" / "fuzz";

// The input files of one fuzz target, sorted, README files left out.
std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const char* kind : {"regressions", "corpus"}) {
    const fs::path dir = kFuzzDir / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string().rfind("README", 0) != 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
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

TEST_CASE("fuzz inputs: model configs build and run, or raise c10::Error", "[fuzz][models]") {
  const auto files = inputs("model_config");
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    INFO("input " << p.string());
    const std::string text = read_all(p);
    std::shared_ptr<tmm::models::LanguageModel> m;
    try {
      m = tmm::models::build_model(text);
    } catch (const c10::Error&) {
      continue;  // a clean error
    }
    // A config that builds runs a few tokens and round-trips.
    const auto cfg = nlohmann::json::parse(m->config_json());
    const int64_t V = cfg.at("vocab_size").get<int64_t>();
    const int64_t L = std::min<int64_t>(cfg.at("max_len").get<int64_t>(), 5);
    m->eval();
    at::NoGradGuard no_grad;
    const at::Tensor logits = m->forward(at::arange(L, at::kLong).remainder(V).unsqueeze(0));
    CHECK(logits.sizes() == at::IntArrayRef({1, L, V}));
    CHECK(tmm::models::build_model(m->config_json())->config_json() == m->config_json());
  }
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
