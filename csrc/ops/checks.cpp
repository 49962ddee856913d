#include "ops/checks.h"

#include <c10/core/SymBool.h>
#include <c10/util/Exception.h>

namespace tmm::detail {
namespace {

constexpr const char* kOp = "causal_toeplitz: ";

bool truth(bool b) { return b; }
bool truth(const c10::SymBool& b) { return b.guard_bool(__FILE__, __LINE__); }

c10::ArrayRef<int64_t> sizes_of(const at::Tensor& t, int64_t*) { return t.sizes(); }
c10::SymIntArrayRef sizes_of(const at::Tensor& t, c10::SymInt*) { return t.sym_sizes(); }

template <class Int>
c10::ArrayRef<Int> sizes(const at::Tensor& t) { return sizes_of(t, static_cast<Int*>(nullptr)); }

bool supported_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

template <class Int>
void check_rank(const at::Tensor& t, const char* name, int64_t rank, const char* layout) {
  TORCH_CHECK(t.dim() == rank, kOp, "expected ", name, " to be ", rank, "-D (", layout, "), got a ",
              t.dim(), "-D tensor of shape ", sizes<Int>(t));
}

void check_like_x(const at::Tensor& t, const char* name, const at::Tensor& x) {
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), kOp, "expected ", name, " to have x's dtype ",
              x.scalar_type(), ", got ", t.scalar_type());
  TORCH_CHECK(t.device() == x.device(), kOp, "expected ", name, " on x's device ", x.device(),
              ", got ", t.device());
}

}  // namespace

template <class Int>
Sizes<Int> check_forward_sizes(const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias) {
  check_rank<Int>(x, "x", 3, "B x L x C");
  check_rank<Int>(weight, "weight", 3, "G x K x N");
  TORCH_CHECK(supported_dtype(x.scalar_type()), kOp,
              "expected x to be float32, float64, bfloat16 or float16, got ", x.scalar_type());
  check_like_x(weight, "weight", x);
  const auto xs = sizes<Int>(x), ws = sizes<Int>(weight);
  Sizes<Int> s{xs[0], xs[1], xs[2], ws[0], ws[1], ws[2]};
  TORCH_CHECK(truth(s.G >= 1), kOp, "expected weight's groups G >= 1, got weight of shape ", ws);
  TORCH_CHECK(truth(s.N >= s.L), kOp, "expected weight's length N >= x's sequence length L, got N = ",
              s.N, " < L = ", s.L, " (weight ", ws, ", x ", xs, ")");
  TORCH_CHECK(truth(s.C % s.G == 0), kOp, "expected x's channels C = ", s.C,
              " to be divisible by weight's groups G = ", s.G);
  TORCH_CHECK(truth(s.K >= 1) && (truth(s.K <= s.C / s.G) || truth(s.C == 0)), kOp,
              "expected weight's taps K in [1, C/G = ", s.C / s.G, "], got K = ", s.K, " (weight ", ws, ")");
  if (bias.has_value()) {
    const at::Tensor& b = *bias;
    check_rank<Int>(b, "bias", 2, "G x N");
    const auto bs = sizes<Int>(b);
    TORCH_CHECK(truth(bs[0] == s.G) && truth(bs[1] == s.N), kOp, "expected bias of shape [G, N] = [",
                s.G, ", ", s.N, "], got ", bs);
    check_like_x(b, "bias", x);
  }
  return s;
}

template <class Int>
Sizes<Int> check_backward_sizes(const at::Tensor& grad_y, const at::Tensor& x,
                                const at::Tensor& weight) {
  const Sizes<Int> s = check_forward_sizes<Int>(x, weight, std::nullopt);
  check_rank<Int>(grad_y, "grad_y", 3, "B x L x C");
  const auto gs = sizes<Int>(grad_y);
  TORCH_CHECK(truth(gs[0] == s.B) && truth(gs[1] == s.L) && truth(gs[2] == s.C), kOp,
              "expected grad_y of x's shape ", sizes<Int>(x), ", got ", gs);
  check_like_x(grad_y, "grad_y", x);
  return s;
}

kernels::ToeplitzShape to_shape(const Sizes<int64_t>& s) {
  kernels::ToeplitzShape shape;
  shape.B = s.B; shape.L = s.L; shape.C = s.C;
  shape.G = s.G; shape.K = s.K; shape.N = s.N;
  return shape;
}

template Sizes<int64_t> check_forward_sizes(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&);
template Sizes<c10::SymInt> check_forward_sizes(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&);
template Sizes<int64_t> check_backward_sizes(const at::Tensor&, const at::Tensor&, const at::Tensor&);
template Sizes<c10::SymInt> check_backward_sizes(const at::Tensor&, const at::Tensor&, const at::Tensor&);

}  // namespace tmm::detail
