// safetensors checkpoints: reader and writer.
//
// Layout: an 8-byte little-endian header length n, n bytes of JSON header
// (padded with spaces so the data starts at a multiple of 8), then the tensor
// bytes, little-endian and back to back. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section) plus an optional "__metadata__" string-to-string map.
// Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
//
// The reader trusts nothing: every inconsistency is a c10::Error naming the
// file, the tensor and what was wrong, and nothing is returned half-loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tmm::io {

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;  // CPU, contiguous, own memory
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device, any strides; stored as CPU contiguous copies)
// atomically: a temporary file in the same directory is written, fsynced and
// renamed over `path`, so `path` is either the old file or the complete new
// one. Tensors are laid out by decreasing item size (stable), so each one is
// aligned to its item size in the file, as the safetensors package does.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

SafetensorsFile load_safetensors(const std::string& path);

// The same checks on an in-memory file (for tests and fuzzers).
SafetensorsFile load_safetensors_from_buffer(const uint8_t* data, size_t size);

}  // namespace tmm::io
