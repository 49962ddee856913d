#include "models/distilled_toeplitz.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "tmm/ops.h"

namespace tmm::models {
namespace {

// The modes run in complex128 whatever the model's dtype: a fit's residues
// can be large and cancel, which complex64 loses.
at::ScalarType complex_of(at::ScalarType /*t*/) { return at::kComplexDouble; }

// The prompt's contribution to the modes: h = sum_{s<M} lambda^(M-1-s) x[s]
// for x B x G x M x Cg, in chunks of positions (lambda^j for j <= chunk only),
// in complex128.
at::Tensor prompt_modes(const at::Tensor& x, const at::Tensor& lambda) {
  const int64_t B = x.size(0), G = x.size(1), M = x.size(2), Cg = x.size(3), K = lambda.size(1),
                r = lambda.size(2);
  constexpr int64_t kChunk = 256;
  const int64_t chunk = std::min(kChunk, M);
  // asc[g,k,j,:] = lambda^j, j = 0..chunk
  const at::Tensor l = lambda.reshape({G * K, 1, r});
  const at::Tensor asc =
      at::cat({at::ones({G * K, 1, r}, l.options()), l.expand({G * K, chunk, r})}, 1).cumprod(1).view({G, K, chunk + 1, r});
  at::Tensor h = at::zeros({B, G, K, Cg, r}, l.options());
  for (int64_t start = 0; start < M; start += chunk) {
    const int64_t len = std::min(chunk, M - start);
    const at::Tensor desc = asc.narrow(2, 0, len).flip(2);  // lambda^(len-1-j)
    const at::Tensor xc = x.narrow(2, start, len).to(at::kComplexDouble);
    h = h * asc.select(2, len).reshape({1, G, K, 1, r}) + at::einsum("gkjr,bgjc->bgkcr", {desc, xc});
  }
  return h;
}

}  // namespace

DistilledToeplitz::DistilledToeplitz(const DistilledKernel& kernel, at::Tensor bias, at::ScalarType dtype,
                                     at::Device device, int64_t batch, int64_t channels, int64_t capacity)
    : kernel_(kernel),
      batch_(batch),
      channels_(channels),
      capacity_(capacity),
      groups_(kernel.lambda.size(0)),
      taps_(kernel.lambda.size(1)),
      window_(kernel.taps.size(2)),
      bias_(std::move(bias)) {
  TORCH_CHECK(capacity_ <= kernel_.length, "decode capacity ", capacity_, " exceeds the distilled kernels' ",
              kernel_.length, " positions");
  const int64_t G = groups_, K = taps_, W = window_, Cg = channels_ / G, r = kernel.lambda.size(2);
  const auto real = at::TensorOptions().dtype(dtype).device(device);
  const auto cplx = real.dtype(complex_of(dtype));
  if (W > 0) {
    const at::Tensor flipped = kernel.taps.flip(2).to(real);
    doubled_taps_ = at::cat({flipped, flipped}, 2).unsqueeze(0).contiguous();  // 1 x G x K x 2W
    ring_ = at::zeros({batch, G, W, Cg}, real);
  } else if (kernel.direct.defined()) {
    direct_ = kernel.direct.to(real).view({1, G, K, 1});
  }
  lambda_ = kernel.lambda.to(cplx).view({1, G, K, 1, r});
  residue_ = kernel.residue.to(cplx).view({1, G, K, r, 1});
  modes_ = at::zeros({batch, G, K, Cg, r}, cplx);
}

int64_t DistilledToeplitz::state_bytes() const {
  return int64_t(modes_.nbytes()) + (ring_.defined() ? int64_t(ring_.nbytes()) : 0);
}

at::Tensor DistilledToeplitz::forward(const at::Tensor& x) {
  const int64_t T = x.size(1);
  TORCH_CHECK(position_ + T <= capacity_, "DistilledToeplitz: ", position_, " + ", T, " positions exceed capacity ",
              capacity_);
  if (position_ == 0) return prefill(x);
  TORCH_CHECK(T == 1, "DistilledToeplitz: after the prompt, one position per call, got ", T);
  return step(x.select(1, 0)).unsqueeze(1);
}

at::Tensor DistilledToeplitz::prefill(const at::Tensor& x) {
  const int64_t B = batch_, P = x.size(1), G = groups_, C = channels_, W = window_;
  // The prompt's outputs with the kernel the steps will run (exact taps, then the modes).
  const at::Tensor kernel = kernel_.materialize(P).to(x.options());
  const std::optional<at::Tensor> bias =
      bias_.defined() ? std::optional<at::Tensor>(bias_.narrow(1, 0, P)) : std::nullopt;  // as long as the kernel
  const at::Tensor y = ops::causal_toeplitz(x, kernel, bias);
  const at::Tensor xg = x.reshape({B, P, G, C / G}).permute({0, 2, 1, 3});  // B x G x P x Cg
  // Input s < P - W has left the window: it is in the modes; the rest in the ring.
  for (int64_t s = std::max<int64_t>(0, P - W); s < P; ++s) ring_.select(2, s % W).copy_(xg.select(2, s));
  if (P > W) modes_.copy_(prompt_modes(xg.narrow(2, 0, P - W), kernel_.lambda.to(x.device())));
  position_ = P;
  return y;
}

at::Tensor DistilledToeplitz::step(const at::Tensor& x) {
  const int64_t t = position_, B = batch_, G = groups_, W = window_, Cg = channels_ / G;
  const at::Tensor xg = x.reshape({B, G, Cg});  // B x G x Cg
  at::Tensor z;  // B x G x K x Cg: each kernel's output on each channel
  at::Tensor leaving = xg;  // the input entering the modes: x[t - W]
  if (W > 0) {
    leaving = ring_.select(2, t % W).clone();
    ring_.select(2, t % W).copy_(xg);
    // Slot j holds x[t - ((t - j) mod W)]: the flipped taps rotated by t + 1.
    const at::Tensor taps = doubled_taps_.narrow(3, W - (t + 1) % W, W);  // 1 x G x K x W
    z = at::matmul(taps, ring_);
  }
  modes_.mul_(lambda_).add_(leaving.reshape({B, G, 1, Cg, 1}));
  const at::Tensor tail = at::real(at::matmul(modes_, residue_)).squeeze(-1).to(x.scalar_type());  // back to the model's dtype
  z = z.defined() ? z + tail : tail;
  if (direct_.defined()) z = z + direct_ * xg.unsqueeze(2);
  at::Tensor y = combine_taps(z);
  if (bias_.defined()) y = y.view({B, G, Cg}).add(bias_.select(1, t).view({1, G, 1})).view({B, channels_});
  ++position_;
  return y;
}

std::unique_ptr<OnlineMixer> make_distilled_mixer(const DistilledKernel& kernel, const at::Tensor& weight,
                                                  const at::Tensor& bias, int64_t batch, int64_t channels,
                                                  int64_t capacity) {
  // weight: the exact kernel over at least `capacity` positions (the model's, or Hyena's filter at the capacity).
  TORCH_CHECK(kernel.lambda.size(0) == weight.size(0) && kernel.lambda.size(1) == weight.size(1),
              "decode method \"distilled\": the distillation was fitted for ", kernel.lambda.size(0), " x ",
              kernel.lambda.size(1), " kernels, the model has ", weight.size(0), " x ", weight.size(1));
  if (kernel.taps.size(2) >= capacity)
    return std::make_unique<OnlineToeplitz>(OnlineToeplitz::Kind::Toeplitz, weight, bias, batch, channels, capacity,
                                            /*fast=*/false);
  return std::make_unique<DistilledToeplitz>(kernel, bias, weight.scalar_type(), weight.device(), batch, channels,
                                             capacity);
}

}  // namespace tmm::models
