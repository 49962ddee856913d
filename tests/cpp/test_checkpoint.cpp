// Checkpoint directories (tmm::models::save_checkpoint / load_checkpoint):
// a round trip gives identical tensors and logits; every inconsistency
// between config.json and model.safetensors is an error naming the file and
// the tensor, raised before anything is copied. Uses models/tmm-tiny.json.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "repo_paths.h"
#include "tmm/io/safetensors.h"
#include "tmm/models/checkpoint.h"
#include "tmm/models/language_model.h"
#include "tmm/version.h"

using Catch::Contains;
using tmm::models::LanguageModel;

namespace {

// No std::filesystem here: libtorch.so exports broken copies of some of its
// symbols (remove_all crashed), see csrc/models/checkpoint.cpp.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tmm_checkpoint_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    nftw(path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return std::remove(p); }, 16,
         FTW_DEPTH | FTW_PHYS);
  }
};

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
  }
  return n;
}

std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_text(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// The tiny TMM, its tensors moved off their initial values.
std::shared_ptr<LanguageModel> tiny_model() {
  auto model = tmm::models::build_model(read_text(tmm_test::models_dir() + "/tmm-tiny.json"));
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(at::randn_like(p) * 0.01);
  return model;
}

at::Tensor sample_ids(int64_t vocab) { return at::randint(0, vocab, {2, 12}, at::kLong); }

std::map<std::string, at::Tensor> state(const LanguageModel& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : m.named_parameters()) out[item.key()] = item.value();
  for (const auto& item : m.named_buffers()) out[item.key()] = item.value();
  return out;
}

// A saved tiny checkpoint whose weights file the test rewrites.
struct Checkpoint {
  TempDir tmp;
  std::string dir = tmp.path;
  std::string weights = tmp.path + "/model.safetensors";
  tmm::io::SafetensorsFile file;
  Checkpoint() {
    tmm::models::save_checkpoint(*tiny_model(), dir);
    file = tmm::io::load_safetensors(weights);
  }
  void rewrite() {
    std::vector<std::pair<std::string, at::Tensor>> tensors(file.tensors.begin(), file.tensors.end());
    tmm::io::save_safetensors(weights, tensors, file.metadata);
  }
};

}  // namespace

TEST_CASE("save_checkpoint writes config.json and model.safetensors; load_checkpoint restores them",
          "[checkpoint]") {
  TempDir tmp;
  auto model = tiny_model();
  model->eval();
  const std::string dir = tmp.path + "/nested/ckpt";  // created with its parents
  tmm::models::save_checkpoint(*model, dir);
  CHECK(is_file(dir + "/config.json"));
  CHECK(is_file(dir + "/model.safetensors"));
  CHECK(count_entries(dir) == 2);  // no temporary files left

  const auto config = nlohmann::json::parse(read_text(dir + "/config.json"));
  CHECK(config == nlohmann::json::parse(model->config_json()));
  const auto file = tmm::io::load_safetensors(dir + "/model.safetensors");
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.metadata.at("arch") == "tmm");
  CHECK(file.metadata.at("tmm_version") == TMM_VERSION);

  auto loaded = tmm::models::load_checkpoint(dir);
  loaded->eval();
  CHECK(loaded->config_json() == model->config_json());
  const auto a = state(*model), b = state(*loaded);
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() == file.tensors.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK(at::equal(b.at(name), t));
    CHECK(b.at(name).requires_grad() == t.requires_grad());
  }
  const at::Tensor ids = sample_ids(config.at("vocab_size").get<int64_t>());
  torch::NoGradGuard no_grad;
  CHECK(at::equal(loaded->forward(ids), model->forward(ids)));

  // Saving again replaces both files.
  model->parameters()[0].fill_(0.5);
  tmm::models::save_checkpoint(*model, dir);
  CHECK(at::equal(tmm::models::load_checkpoint(dir)->parameters()[0], model->parameters()[0]));
}

TEST_CASE("load_checkpoint converts dtypes of the same kind", "[checkpoint]") {
  TempDir tmp;
  auto model = tiny_model();
  model->to(at::kDouble);
  tmm::models::save_checkpoint(*model, tmp.path);
  CHECK(tmm::io::load_safetensors(tmp.path + "/model.safetensors").tensors.at("embed.weight").scalar_type() ==
        at::kDouble);
  auto loaded = tmm::models::load_checkpoint(tmp.path);
  for (const auto& [name, t] : state(*model)) {
    INFO(name);
    CHECK(state(*loaded).at(name).scalar_type() == at::kFloat);
    CHECK(at::equal(state(*loaded).at(name), t.to(at::kFloat)));
  }
}

TEST_CASE("load_checkpoint: a missing tensor is an error naming it", "[checkpoint]") {
  Checkpoint c;
  c.file.tensors.erase("blocks.1.mixer.weight");
  c.rewrite();
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir),
                    Contains(c.weights) && Contains("missing tensor 'blocks.1.mixer.weight'"));
}

TEST_CASE("load_checkpoint: an unexpected tensor is an error naming it", "[checkpoint]") {
  Checkpoint c;
  c.file.tensors["blocks.9.extra"] = at::zeros({2});
  c.rewrite();
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir),
                    Contains(c.weights) && Contains("unexpected tensor 'blocks.9.extra'"));
}

TEST_CASE("load_checkpoint: a wrong shape is an error naming the tensor and both shapes", "[checkpoint]") {
  Checkpoint c;
  c.file.tensors["head.weight"] = at::zeros({3, 4});
  c.rewrite();
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir),
                    Contains(c.weights) && Contains("'head.weight' has shape [3, 4]") && Contains("[64, 32]"));
}

TEST_CASE("load_checkpoint: a dtype of another kind is an error", "[checkpoint]") {
  Checkpoint c;
  c.file.tensors["embed.weight"] = c.file.tensors["embed.weight"].to(at::kInt);
  c.rewrite();
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains("'embed.weight' is Int") && Contains("Float"));
}

TEST_CASE("load_checkpoint: weights of another arch are an error", "[checkpoint]") {
  Checkpoint c;
  c.file.metadata["arch"] = "mamba2";
  c.rewrite();
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains("written by a \"mamba2\" model"));
}

TEST_CASE("load_checkpoint: config.json missing, unreadable or invalid", "[checkpoint]") {
  Checkpoint c;
  const std::string config = c.dir + "/config.json";
  const std::string good = read_text(config);
  write_text(config, "{\"arch\": ");
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(config) && Contains("not valid JSON"));
  auto j = nlohmann::json::parse(good);
  j["colour"] = "red";
  write_text(config, j.dump());
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(config) && Contains("\"colour\""));
  j = nlohmann::json::parse(good);
  j["d_model"] = 48;  // a valid config, but not of these weights
  write_text(config, j.dump());
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(c.weights) && Contains("has shape"));
  ::unlink(config.c_str());
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(config) && Contains("does not exist"));
  ::mkdir(config.c_str(), 0777);
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains("not a regular file"));
}

TEST_CASE("load_checkpoint: model.safetensors missing or truncated; not a directory", "[checkpoint]") {
  Checkpoint c;
  const std::string bytes = read_text(c.weights);
  write_text(c.weights, bytes.substr(0, bytes.size() - 16));
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(c.weights));
  ::unlink(c.weights.c_str());
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir), Contains(c.weights) && Contains("cannot open"));
  CHECK_THROWS_WITH(tmm::models::load_checkpoint(c.dir + "/nowhere"), Contains("is not a directory"));
}

TEST_CASE("save_checkpoint: a file in the way is an error", "[checkpoint]") {
  TempDir tmp;
  write_text(tmp.path + "/file", "x");
  CHECK_THROWS_WITH(tmm::models::save_checkpoint(*tiny_model(), tmp.path + "/file"),
                    Contains("cannot create the directory"));
}
