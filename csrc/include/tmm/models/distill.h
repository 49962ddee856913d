// Distillation of long convolution kernels into small state-space models
// (Massaroli et al. 2023, "Laughing Hyena Distillery"), for constant-memory
// decoding of TMM and Hyena (decode method "distilled", docs/decoding.md).
//
// Each kernel w[0..N) is split at a window W: taps t < W stay exact (the
// decoder keeps a ring buffer of the last W inputs), the tail is fitted by r
// damped complex exponentials (modes),
//   w[W + t] ~ sum_{i<r} Re(R_i lambda_i^t),   |lambda_i| < 1,  0 <= t < N - W,
// run as the recurrence h_i <- lambda_i h_i + x, out = Re(sum_i R_i h_i):
// O(r) work and memory per channel and token, whatever the context.
//
// The fit: a Hankel-matrix SVD of the tail (Kung's shift-invariance method)
// gives the modes, least squares the residues; gradient steps (Adam on the
// L2 error) then refine both, and the better of the two is kept per kernel.
// Modes on or outside the unit circle are pulled inside (max_radius), so an
// unstable recurrence is never produced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

namespace tmm::models {

struct FitOptions {
  int64_t order = 16;          // r: modes per kernel, >= 1
  int64_t steps = 200;         // gradient refinement steps (0: the Hankel fit only)
  double lr = 1e-2;            // their Adam learning rate
  int64_t hankel_rows = 256;   // at most this many Hankel rows (and 4 x as many columns) in the SVD
  double max_radius = 1 - 1e-6;  // |lambda| is kept <= this
};

// The modal fit of a batch of kernels.
struct ModalFit {
  at::Tensor lambda;   // ... x r complex128: the modes
  at::Tensor residue;  // ... x r complex128
  at::Tensor error;    // ...: relative L2 error ||w - fit|| / ||w|| (0 for a zero kernel)
  at::Tensor abs_error;  // ...: ||w - fit||
};

// Fits every row of `kernels` (... x n, real, n >= 1) with `options.order`
// modes. Errors name the argument (order, steps, lr, max_radius).
ModalFit fit_modal(const at::Tensor& kernels, const FitOptions& options);

// sum_i Re(residue_i lambda_i^t) for t < n: ... x n float64.
at::Tensor modal_kernel(const at::Tensor& lambda, const at::Tensor& residue, int64_t n);

// One long kernel of a model, as causal_toeplitz takes it.
struct LongKernel {
  std::string name;   // its parameter path, e.g. "blocks.0.mixer.weight" ("blocks.0.mixer.filter" for Hyena)
  at::Tensor weight;  // G x K x N (Hyena: d x 1 x max_len with D folded into lag 0)
  at::Tensor direct;  // G x K or undefined: a lag-0 term outside the fit (Hyena's skip D)
};

// A kernel's distilled form: the exact taps t < window and the modes of the tail.
struct DistilledKernel {
  at::Tensor taps;     // G x K x window (the model's dtype)
  at::Tensor direct;   // G x K or undefined (added at lag 0 when window == 0)
  at::Tensor lambda;   // G x K x r complex128
  at::Tensor residue;  // G x K x r complex128
  at::Tensor error;    // G x K float64: relative L2 error of the whole kernel
  int64_t length = 0;  // N: the positions fitted
  // G x K x n, the kernel the decoder runs (exact taps, then the modes), float64.
  at::Tensor materialize(int64_t n) const;
};

struct DistillOptions {
  FitOptions fit;
  int64_t window = 0;  // W: exact taps kept, 0 <= W
};

// Every long kernel of a model, fitted with the same order and window.
struct Distillation {
  int64_t order = 0, window = 0;
  std::map<std::string, DistilledKernel> kernels;  // by LongKernel::name
  const DistilledKernel& kernel(const std::string& name) const;
};

class LanguageModel;

// Fits every long kernel of `model` (an error for a model without any).
std::shared_ptr<Distillation> distill(LanguageModel& model, const DistillOptions& options);

// dir/distilled.json (order, window, per-kernel errors) and
// dir/distilled.safetensors (taps, direct, modes as real and imaginary
// parts), written atomically beside a checkpoint.
void save_distillation(const Distillation& d, const std::string& dir);
// Reads them back; errors name the file and what is wrong.
std::shared_ptr<Distillation> load_distillation(const std::string& dir);
// Whether dir holds a saved distillation.
bool has_distillation(const std::string& dir);

}  // namespace tmm::models
