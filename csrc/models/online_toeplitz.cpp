#include "models/online_toeplitz.h"

#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "tmm/ops.h"

namespace tmm::models {

OnlineToeplitz::OnlineToeplitz(Kind kind, at::Tensor weight, at::Tensor bias, int64_t batch, int64_t channels,
                               int64_t capacity, bool fast)
    : kind_(kind),
      fast_(fast),
      batch_(batch),
      channels_(channels),
      capacity_(capacity),
      groups_(weight.size(0)),
      taps_(kind == Kind::Matrix ? 1 : weight.size(1)),
      weight_(std::move(weight)),
      bias_(std::move(bias)) {
  TORCH_CHECK(!(fast && kind == Kind::Matrix), "decode method \"fast\" needs a Toeplitz mixer, not a full matrix");
  TORCH_CHECK(batch_ >= 1, "decode batch must be >= 1, got ", batch_);
  TORCH_CHECK(capacity_ >= 1, "decode capacity must be >= 1, got ", capacity_);
  TORCH_CHECK(capacity_ <= weight_.size(-1), "decode capacity ", capacity_, " exceeds the mixer's ", weight_.size(-1),
              " positions");
  const int64_t G = groups_, Cg = channels_ / G;
  inputs_ = at::zeros({batch_, G, capacity_, Cg}, weight_.options());
  if (kind_ == Kind::Toeplitz && !fast_) rows_ = weight_.narrow(2, 0, capacity_).flip(2).contiguous();
}

at::Tensor OnlineToeplitz::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(0) == batch_ && x.size(2) == channels_, "OnlineToeplitz: expected x of shape ",
              batch_, " x T x ", channels_, " (the state's batch and channels), got ", x.sizes());
  const int64_t T = x.size(1);
  TORCH_CHECK(position_ + T <= capacity_, "OnlineToeplitz: ", position_, " + ", T, " positions exceed capacity ",
              capacity_);
  if (position_ == 0) return prefill(x);
  if (T != 1) {  // a block after the prompt: position by position, each step exact
    std::vector<at::Tensor> ys;
    for (int64_t i = 0; i < T; ++i) ys.push_back(forward(x.narrow(1, i, 1)));
    return at::cat(ys, 1);
  }
  const at::Tensor xt = x.select(1, 0);
  inputs_.select(2, position_).copy_(xt.reshape({batch_, groups_, channels_ / groups_}));
  at::Tensor y = fast_ ? step_fast(xt) : step_cached(xt);
  ++position_;
  return y.unsqueeze(1);
}

at::Tensor OnlineToeplitz::prefill(const at::Tensor& x) {
  const int64_t B = batch_, P = x.size(1), G = groups_, C = channels_;
  inputs_.narrow(2, 0, P).copy_(x.reshape({B, P, G, C / G}).permute({0, 2, 1, 3}));
  position_ = prompt_ = P;
  if (kind_ == Kind::Matrix) return ops::causal_matrix_mix(x, weight_, bias_);
  const std::optional<at::Tensor> bias = bias_.defined() ? std::optional<at::Tensor>(bias_) : std::nullopt;
  if (!fast_) return ops::causal_toeplitz(x, weight_, bias);
  // One convolution over the whole capacity: the prompt's outputs, and its
  // contributions (plus bias) to every later position, the initial future.
  const at::Tensor padded = at::cat({x, at::zeros({B, capacity_ - P, C}, x.options())}, 1);
  const at::Tensor y = ops::causal_toeplitz(padded, weight_, bias);
  future_ = y.contiguous();
  return y.narrow(1, 0, P);
}

at::Tensor combine_taps(const at::Tensor& z) {
  const int64_t B = z.size(0), G = z.size(1), K = z.size(2), Cg = z.size(3);
  at::Tensor y;
  if (K == 1) {
    y = z.select(2, 0);
  } else {
    const at::Tensor padded = at::constant_pad_nd(z, {K - 1, 0});  // B x G x K x (Cg + K - 1)
    y = padded.select(2, 0).narrow(2, 0, Cg).clone();
    for (int64_t i = 1; i < K; ++i) y.add_(padded.select(2, i).narrow(2, i, Cg));
  }
  return y.reshape({B, G * Cg});
}

int64_t OnlineToeplitz::state_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&rows_, &inputs_, &future_})
    if (t->defined()) bytes += int64_t(t->nbytes());
  return bytes;
}

at::Tensor OnlineToeplitz::step_cached(const at::Tensor& /*x*/) {
  const int64_t t = position_, G = groups_;
  at::Tensor row;  // G x K x (t+1): the weights of inputs 0..t for output t
  if (kind_ == Kind::Matrix) {
    row = weight_.select(1, t).narrow(1, 0, t + 1).unsqueeze(1);
  } else {
    row = rows_.narrow(2, capacity_ - 1 - t, t + 1);
  }
  const at::Tensor z = at::matmul(row.unsqueeze(0), inputs_.narrow(2, 0, t + 1));  // B x G x K x Cg
  at::Tensor y = combine_taps(z);
  if (bias_.defined()) {
    y = y.view({batch_, G, channels_ / G}).add(bias_.select(1, t).view({1, G, 1})).view({batch_, channels_});
  }
  return y;
}

at::Tensor OnlineToeplitz::step_fast(const at::Tensor& x) {
  const int64_t G = groups_, Cg = channels_ / G;
  // Every earlier input has been flushed to this position; add the lag-0 tap.
  const at::Tensor lag0 = weight_.select(2, 0).view({1, G, taps_, 1});     // 1 x G x K x 1
  const at::Tensor z = lag0 * x.reshape({batch_, G, 1, Cg});                 // B x G x K x Cg
  at::Tensor y = future_.select(1, position_) + combine_taps(z);
  flush(position_ + 1 - prompt_);
  return y;
}

void OnlineToeplitz::flush(int64_t a) {
  const int64_t m = a & -a;  // 2^ctz(a)
  const int64_t first_out = prompt_ + a;
  if (first_out >= capacity_) return;
  const int64_t B = batch_, C = channels_, outputs = std::min(m, capacity_ - first_out);
  // The block's inputs, then zeros: outputs m..2m-1 of a causal convolution
  // of length 2m see exactly the block at lags 1..2m-1.
  const at::Tensor block = inputs_.narrow(2, first_out - m, m).permute({0, 2, 1, 3}).reshape({B, m, C});
  const at::Tensor padded = at::cat({block, at::zeros({B, m, C}, block.options())}, 1);
  at::Tensor taps = weight_.narrow(2, 0, std::min<int64_t>(2 * m, weight_.size(2)));
  if (taps.size(2) < 2 * m) taps = at::constant_pad_nd(taps, {0, 2 * m - taps.size(2)});
  const at::Tensor y = ops::causal_toeplitz(padded, taps, std::nullopt);
  future_.narrow(1, first_out, outputs).add_(y.narrow(1, m, outputs));
}

}  // namespace tmm::models
