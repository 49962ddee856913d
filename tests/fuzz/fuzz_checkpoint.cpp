// libFuzzer target: model checkpoints, tmm::models::load_checkpoint on a
// folder written from the input: config.json is the text before the first
// NUL byte, model.safetensors the bytes after it.
//
// Contract under test:
//  * any folder either loads or raises c10::Error;
//  * a checkpoint that loads holds the file's tensors: every parameter and
//    buffer equals the file's tensor of its name (converted to the model's
//    dtype), and the file has no other;
//  * it runs: a forward pass on a few tokens gives logits of the right shape.
// Anything else (another exception, a crash, a sanitizer report, a hang) is a
// bug. A valid config of a model above kMaxParams (model_size.h) is skipped:
// the loader builds the model before it reads the weights.
//
// Built and run by tests/fuzz/run.sh.
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <tmm/io/safetensors.h>
#include <tmm/models.h>
#include <tmm/models/checkpoint.h>

#include "model_size.h"

namespace {

std::string g_dir;  // the folder each input is written to

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_checkpoint: %s\n", what.c_str());
  std::abort();
}

void write(const std::string& name, const std::string& bytes) {
  std::ofstream f(g_dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

void check_loaded(tmm::models::LanguageModel& m, const std::string& weights) {
  const auto file = tmm::io::load_safetensors_from_buffer(reinterpret_cast<const uint8_t*>(weights.data()),
                                                         weights.size());
  size_t seen = 0;
  auto same = [&](const std::string& name, const at::Tensor& t) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) fail("the model's '" + name + "' is not in the file");
    const at::Tensor expected = it->second.to(t.scalar_type());
    if (t.sizes() != expected.sizes() || !((t == expected) | (at::isnan(t) & at::isnan(expected))).all().item<bool>())
      fail("'" + name + "' differs from the file's");
    ++seen;
  };
  for (const auto& p : m.named_parameters()) same(p.key(), p.value());
  for (const auto& b : m.named_buffers()) same(b.key(), b.value());
  if (seen != file.tensors.size()) fail("the file has tensors the model does not");
  const auto cfg = nlohmann::json::parse(m.config_json());
  const int64_t V = cfg.at("vocab_size").get<int64_t>(), L = std::min<int64_t>(cfg.at("max_len").get<int64_t>(), 4);
  at::NoGradGuard no_grad;
  m.eval();
  const at::Tensor logits = m.forward(at::arange(L, at::kLong).remainder(V).unsqueeze(0));
  if (logits.sizes() != at::IntArrayRef({1, L, V})) fail("logits of shape " + c10::str(logits.sizes()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  char dir[] = "/tmp/tmm_fuzz_checkpoint_XXXXXX";
  if (!mkdtemp(dir)) fail("cannot make a temporary folder");
  g_dir = dir;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [config, weights] = tmm_fuzz::split_at_nul(data, size);
  const auto params = tmm_fuzz::own_estimate(config);
  if (params && *params > tmm_fuzz::kMaxParams) return 0;
  write("config.json", config);
  write("model.safetensors", weights);
  std::shared_ptr<tmm::models::LanguageModel> m;
  try {
    m = tmm::models::load_checkpoint(g_dir);
  } catch (const c10::Error&) {
    return 0;  // a clean error
  }
  try {
    check_loaded(*m, weights);
  } catch (const c10::Error& e) {
    fail(std::string("a checkpoint that loads does not run: ") + e.what_without_backtrace());
  }
  return 0;
}
