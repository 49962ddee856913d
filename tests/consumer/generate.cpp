// A minimal application on the installed library (docs/cpp.md): load a
// checkpoint written from Python, tokenize a prompt, generate greedily and
// print the new token ids and the text.
//
//   tmm_generate_example CHECKPOINT_DIR "prompt text" [max_new_tokens]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include <tmm/models/checkpoint.h>
#include <tmm/models/generation.h>
#include <tmm/text/tokenizer.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR PROMPT [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    // config.json + model.safetensors; in training mode, which generate() needs no eval() for.
    auto model = tmm::models::load_checkpoint(dir);
    // The checkpoint's tokenizer.json if it has one, else byte-level.
    const bool has_bpe = std::ifstream(dir + "/tokenizer.json").good();
    const auto tokenizer =
        has_bpe ? tmm::text::Tokenizer::from_file(dir + "/tokenizer.json") : tmm::text::Tokenizer::byte_level();

    tmm::models::GenerateOptions options;
    options.max_new_tokens = argc > 3 ? std::atoi(argv[3]) : 32;
    options.sampling.temperature = 0;  // greedy
    const auto result = tmm::models::generate(*model, {tokenizer.encode(argv[2])}, options);

    for (int64_t id : result.tokens[0]) std::printf("%lld ", static_cast<long long>(id));
    std::printf("\n%s\n", tokenizer.decode(result.tokens[0]).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
