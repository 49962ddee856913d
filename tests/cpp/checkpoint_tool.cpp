// tmm_checkpoint_tool: the C++ side of the cross-language checkpoint tests
// (tests/python/test_checkpoint_parity.py). Not a Catch2 test: Python drives
// it as a subprocess and compares what it writes with what tmm.models gives.
//
//   tmm_checkpoint_tool logits CHECKPOINT_DIR IDS.safetensors OUT.safetensors
//       loads the checkpoint, runs the model (eval mode, no grad) on the
//       tensor "input_ids" of IDS and writes the tensor "logits" to OUT.
//   tmm_checkpoint_tool init CONFIG.json SEED OUT_DIR
//       builds the model of CONFIG.json after at::manual_seed(SEED) and
//       saves it as a checkpoint in OUT_DIR.
//   tmm_checkpoint_tool train CHECKPOINT_DIR IDS.safetensors STEPS OUT_DIR
//       trains STEPS AdamW steps (lr 1e-3) of next-token prediction on the
//       tensor "input_ids" of IDS, printing "step N loss X" per step, and
//       saves the trained model as a checkpoint in OUT_DIR.
//
// Exit status: 0 on success, 1 when a step fails (the message, naming the
// file, goes to stderr), 2 on a usage error.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/optim/adamw.h>

#include "tmm/io/safetensors.h"
#include "tmm/models/checkpoint.h"
#include "tmm/models/language_model.h"

namespace {

constexpr const char* kUsage =
    "usage:\n"
    "  tmm_checkpoint_tool logits CHECKPOINT_DIR IDS.safetensors OUT.safetensors\n"
    "  tmm_checkpoint_tool init CONFIG.json SEED OUT_DIR\n"
    "  tmm_checkpoint_tool train CHECKPOINT_DIR IDS.safetensors STEPS OUT_DIR\n";

struct UsageError {
  std::string message;
};

int64_t parse_int(const std::string& what, const std::string& text, int64_t min_value) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < min_value) {
    throw UsageError{what + ": expected an integer >= " + std::to_string(min_value) + ", got '" + text + "'"};
  }
  return v;
}

at::Tensor read_input_ids(const std::string& path) {
  tmm::io::SafetensorsFile file = tmm::io::load_safetensors(path);
  auto it = file.tensors.find("input_ids");
  TORCH_CHECK(it != file.tensors.end(), "'", path, "': no tensor named 'input_ids'");
  return it->second;
}

int cmd_logits(const std::string& ckpt, const std::string& ids_path, const std::string& out_path) {
  auto model = tmm::models::load_checkpoint(ckpt);
  const at::Tensor ids = read_input_ids(ids_path);
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(ids);
  tmm::io::save_safetensors(out_path, {{"logits", logits}});
  return 0;
}

int cmd_init(const std::string& config_path, int64_t seed, const std::string& out_dir) {
  std::ifstream f(config_path, std::ios::binary);
  TORCH_CHECK(f, "cannot open '", config_path, "': ", std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  at::manual_seed(static_cast<uint64_t>(seed));
  std::shared_ptr<tmm::models::LanguageModel> model;
  try {
    model = tmm::models::build_model(text);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "'", config_path, "': ", e.what_without_backtrace());
  }
  tmm::models::save_checkpoint(*model, out_dir);
  return 0;
}

int cmd_train(const std::string& ckpt, const std::string& ids_path, int64_t steps, const std::string& out_dir) {
  auto model = tmm::models::load_checkpoint(ckpt);
  const at::Tensor ids = read_input_ids(ids_path);
  TORCH_CHECK(ids.dim() == 2 && ids.size(1) >= 2, "'", ids_path,
              "': input_ids must be B x L with L >= 2 for next-token prediction, got shape ", ids.sizes());
  // Position t predicts token t + 1; the last position has no target.
  const at::Tensor labels =
      at::cat({ids.slice(1, 1), at::full({ids.size(0), 1}, -100, ids.options().dtype(at::kLong))}, 1);
  model->train();
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  for (int64_t step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    const at::Tensor loss = model->forward_with(ids, labels).loss;
    loss.backward();
    optimizer.step();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), loss.item<double>());
  }
  std::fflush(stdout);
  tmm::models::save_checkpoint(*model, out_dir);
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2) throw UsageError{"missing command"};
  const std::string cmd = argv[1];
  auto need = [&](int n) {
    if (argc != n + 2) {
      throw UsageError{"'" + cmd + "' takes " + std::to_string(n) + " arguments, got " + std::to_string(argc - 2)};
    }
  };
  if (cmd == "logits") {
    need(3);
    return cmd_logits(argv[2], argv[3], argv[4]);
  }
  if (cmd == "init") {
    need(3);
    return cmd_init(argv[2], parse_int("SEED", argv[3], 0), argv[4]);
  }
  if (cmd == "train") {
    need(4);
    return cmd_train(argv[2], argv[3], parse_int("STEPS", argv[4], 1), argv[5]);
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  throw UsageError{"unknown command '" + cmd + "'"};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tmm_checkpoint_tool: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "tmm_checkpoint_tool: error: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmm_checkpoint_tool: error: %s\n", e.what());
    return 1;
  }
}
