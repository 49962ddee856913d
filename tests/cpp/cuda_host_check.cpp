// Host check of the CUDA kernels' logic, for machines without a GPU: runs the
// real driver (toeplitz_driver.cuh), the cuFFT path's functors, the
// transposes (transpose.cuh) and the fused block code (fused_fft.cuh)
// sequentially on the CPU and compares y, grad_x and grad_weight with a
// direct float64 reference. Also checks the cuFFT plan pool's policy
// (plan_cache.h) and the fused tiles' shared-memory layout (tile_slot: a
// permutation, and conflict-free FFT stages in a bank model).
//
//   - HostExec stands in for DeviceExec: for_each is a loop over the elements
//     (32-bit or 64-bit index, alternating), for_each_team sums the lanes'
//     partials, r2c/c2r are naive DFTs with cuFFT's time-major layout and
//     unnormalised convention (C2R scribbles over its input, as cuFFT may);
//     every scratch buffer starts as NaN.
//   - HostBlock runs a block's threads one after another between barriers,
//     with each thread's FusedRegs kept across them, shared memory NaN-filled
//     (the fused blocks and the transposes' tiles).
// What it cannot show: warp shuffles, launch configurations, cuFFT itself,
// the device's bf16/fp16 conversions, races (a sequential run has none).
//
// Built and run by CTest where the CUDA kernels are built (the CUDA headers
// only provide cudaStream_t). By hand, with sanitizers:
//   g++ -std=c++17 -O1 -g -fsanitize=address,undefined -Icuda -Icsrc -I/usr/local/cuda/include
//       tests/cpp/cuda_host_check.cpp -o /tmp/host_check && /tmp/host_check
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plan_cache.h"
#include "toeplitz_driver.cuh"

using namespace tmm::cuda;
using tmm::kernels::ToeplitzShape;

static bool g_u32 = true;

struct HostBlock {
  int T;
  std::vector<FusedRegs> regs;
  explicit HostBlock(int t) : T(t), regs(t) {
    for (auto& r : regs)
      for (auto& v : r.v) v = {NAN, NAN};
  }
  int threads() const { return T; }
  void sync() {}
  template <class F>
  void each(F&& f) {
    for (int tid = 0; tid < T; ++tid) f(tid, regs[tid]);
  }
};

struct HostExec {
  std::vector<std::unique_ptr<unsigned char[]>> mem;
  int64_t budget;
  int fused_fwd = 0, fused_bwd = 0;
  template <class U>
  U* alloc(int64_t count) {
    mem.emplace_back(new unsigned char[count * sizeof(U)]);
    unsigned char* p = mem.back().get();
    for (int64_t i = 0; i < int64_t(count * sizeof(U)); ++i) p[i] = 0xff;  // NaN as float and double
    return reinterpret_cast<U*>(p);
  }
  int64_t chunk_bytes() const { return budget; }
  template <class F>
  void for_each(const char*, int64_t count, const F& f) {
    if (count < (int64_t(1) << 31) && g_u32) {
      for (uint32_t e = 0; e < uint32_t(count); ++e) f(e);
    } else {
      for (int64_t e = 0; e < count; ++e) f(e);
    }
  }
  template <class F>
  void for_each_team(const char*, int64_t items, int team, const F& f) {
    for (int64_t it = 0; it < items; ++it) {
      auto sum = f.partial(it, 0, team);
      for (int lane = 1; lane < team; ++lane) sum += f.partial(it, lane, team);
      f.write(it, sum);
    }
  }
  template <class F>
  void transpose(const char*, int64_t rows, int64_t cols, const F& f) {
    TransposeTile<typename F::Value> sm;
    for (int64_t tile = 0; tile < transpose_tiles(rows, cols); ++tile) {
      std::memset(static_cast<void*>(&sm), 0xff, sizeof(sm));  // NaN: a read of an unwritten slot shows
      HostBlock hb(kTransposeThreads);
      transpose_tile(hb, f, rows, cols, tile, sm);
    }
  }
  template <class R>
  void r2c(int64_t n, int64_t batch, R* in, Cx<R>* out) {
    const int64_t half = n / 2 + 1;
    for (int64_t j = 0; j < batch; ++j)
      for (int64_t k = 0; k < half; ++k) {
        std::complex<double> acc = 0;
        for (int64_t t = 0; t < n; ++t)
          acc += double(in[t * batch + j]) * std::polar(1.0, -2 * M_PI * double((k * t) % n) / double(n));
        out[k * batch + j] = {R(acc.real()), R(acc.imag())};
      }
  }
  template <class R>
  void c2r(int64_t n, int64_t batch, Cx<R>* in, R* out) {
    const int64_t half = n / 2 + 1;
    std::vector<double> res(n * batch);
    for (int64_t j = 0; j < batch; ++j)
      for (int64_t t = 0; t < n; ++t) {
        double acc = double(in[j].re);
        for (int64_t k = 1; k < half; ++k) {
          const Cx<R> z = in[k * batch + j];
          std::complex<double> v = std::complex<double>(z.re, z.im) *
                                   std::polar(1.0, 2 * M_PI * double((k * t) % n) / double(n));
          acc += (2 * k == n) ? v.real() : 2 * v.real();
        }
        res[t * batch + j] = acc;
      }
    // C2R may overwrite its input: scribble over it.
    for (int64_t i = 0; i < half * batch; ++i) in[i] = {R(NAN), R(NAN)};
    for (int64_t i = 0; i < n * batch; ++i) out[i] = R(res[i]);
  }
  template <class T>
  void fused_forward(const FusedForwardArgs<T>& a, int64_t B) {
    ++fused_fwd;
    std::vector<Cx<float>> smem(a.geo.smem_bytes / sizeof(Cx<float>));
    for (int64_t blk = 0; blk < B * a.geo.tiles; ++blk) {
      for (auto& v : smem) v = {NAN, NAN};
      HostBlock hb(a.geo.threads);
      fused_forward_block(hb, a, blk, smem.data());
    }
  }
  template <class T>
  void fused_backward(const FusedBackwardArgs<T>& a, int64_t B) {
    ++fused_bwd;
    std::vector<Cx<float>> smem(a.geo.smem_bytes / sizeof(Cx<float>));
    for (int64_t blk = 0; blk < B * a.geo.tiles; ++blk) {
      for (auto& v : smem) v = {NAN, NAN};
      HostBlock hb(a.geo.threads);
      fused_backward_block(hb, a, blk, smem.data());
    }
  }
};

struct Case {
  int64_t B, L, C, G, K, N;
  bool bias, strided;
};

template <class T>
T st(double v) { return from_real<T>(compute_t<T>(v)); }

template <class T>
double err_rel(const std::vector<T>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(to_real(a[i])) - ref[i];
    if (!std::isfinite(double(to_real(a[i])))) return INFINITY;
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

template <class T>
bool run_case(const Case& cs, Algorithm path, int64_t budget, double tol, std::mt19937& rng) {
  ToeplitzShape s;
  s.B = cs.B; s.L = cs.L; s.C = cs.C; s.G = cs.G; s.K = cs.K; s.N = cs.N;
  const int64_t Cg = s.C / s.G, halo = s.K - 1;
  std::normal_distribution<double> nd;
  // Strided: x stored as B x C x L and weight as G x N x K (non-contiguous
  // views); else B x L x C and G x K x N.
  std::vector<T> xs(s.B * s.L * s.C), gys(s.B * s.L * s.C), ws(s.G * s.K * s.N), bs(s.G * s.N);
  for (auto& v : xs) v = st<T>(nd(rng));
  for (auto& v : gys) v = st<T>(nd(rng));
  for (auto& v : ws) v = st<T>(nd(rng) / std::sqrt(double(s.L)));
  for (auto& v : bs) v = st<T>(nd(rng));
  int64_t xst[3], gyst[3];
  if (cs.strided) { xst[0] = s.C * s.L; xst[1] = 1; xst[2] = s.L; } else { xst[0] = s.L * s.C; xst[1] = s.C; xst[2] = 1; }
  gyst[0] = s.L * s.C; gyst[1] = s.C; gyst[2] = 1;
  int64_t wst[3] = {s.K * s.N, s.N, 1};
  if (cs.strided) { wst[1] = 1; wst[2] = s.K; }
  auto X = [&](int64_t b, int64_t t, int64_t c) { return double(to_real(xs[b * xst[0] + t * xst[1] + c * xst[2]])); };
  auto GY = [&](int64_t b, int64_t t, int64_t c) { return double(to_real(gys[b * gyst[0] + t * gyst[1] + c * gyst[2]])); };
  auto Wt = [&](int64_t g, int64_t i, int64_t t) { return double(to_real(ws[g * wst[0] + i * wst[1] + t * wst[2]])); };
  // reference
  std::vector<double> y(s.B * s.L * s.C, 0), gx(s.B * s.L * s.C, 0), gw(s.G * s.K * s.N, 0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      const int64_t g = c / Cg;
      for (int64_t i = 0; i < s.K; ++i) {
        const int64_t src = c - halo + i;
        if (src < g * Cg) continue;
        for (int64_t t = 0; t < s.L; ++t)
          for (int64_t u = 0; u <= t; ++u) {
            y[(b * s.L + t) * s.C + c] += Wt(g, i, t - u) * X(b, u, src);
            gx[(b * s.L + u) * s.C + src] += Wt(g, i, t - u) * GY(b, t, c);
            gw[(g * s.K + i) * s.N + t - u] += GY(b, t, c) * X(b, u, src);
          }
      }
      if (cs.bias)
        for (int64_t t = 0; t < s.L; ++t) y[(b * s.L + t) * s.C + c] += double(to_real(bs[g * s.N + t]));
    }
  HostExec ex;
  ex.budget = budget;
  std::vector<T> yo(y.size(), st<T>(NAN)), gxo(gx.size(), st<T>(NAN)), gwo(gw.size(), st<T>(NAN));
  ToeplitzForwardParams<T> pf;
  pf.shape = s;
  pf.x = xs.data(); for (int d = 0; d < 3; ++d) pf.x_stride[d] = xst[d];
  pf.weight = ws.data(); for (int d = 0; d < 3; ++d) pf.w_stride[d] = wst[d];
  if (cs.bias) { pf.bias = bs.data(); pf.bias_stride[0] = s.N; pf.bias_stride[1] = 1; }
  pf.y = yo.data();
  run_forward(pf, ex, path);
  ToeplitzBackwardParams<T> pb;
  pb.shape = s;
  pb.grad_y = gys.data(); for (int d = 0; d < 3; ++d) pb.gy_stride[d] = gyst[d];
  pb.x = xs.data(); for (int d = 0; d < 3; ++d) pb.x_stride[d] = xst[d];
  pb.weight = ws.data(); for (int d = 0; d < 3; ++d) pb.w_stride[d] = wst[d];
  pb.grad_x = gxo.data(); pb.grad_weight = gwo.data();
  run_backward(pb, ex, path);
  // also: only grad_weight, only grad_x
  std::vector<T> gxo2(gx.size(), st<T>(NAN)), gwo2(gw.size(), st<T>(NAN));
  pb.grad_x = nullptr; pb.grad_weight = gwo2.data();
  run_backward(pb, ex, path);
  pb.grad_x = gxo2.data(); pb.grad_weight = nullptr;
  run_backward(pb, ex, path);
  const double ey = err_rel(yo, y), egx = err_rel(gxo, gx), egw = err_rel(gwo, gw);
  const double egx2 = err_rel(gxo2, gx), egw2 = err_rel(gwo2, gw);
  const bool ok = ey < tol && egx < tol && egw < tol && egx2 < tol && egw2 < tol;
  std::printf("%s %-6s B=%ld L=%ld C=%ld G=%ld K=%ld N=%ld bias=%d strided=%d budget=%ld fused=%d/%d: y %.2e gx %.2e gw %.2e (%.2e %.2e)\n",
              ok ? "ok  " : "FAIL", path == Algorithm::kFused ? "fused" : "cufft", long(s.B), long(s.L), long(s.C),
              long(s.G), long(s.K), long(s.N), cs.bias, cs.strided, long(budget), ex.fused_fwd, ex.fused_bwd, ey,
              egx, egw, egx2, egw2);
  return ok;
}

// ---------------------------------------------------------------- the plan pool's policy
struct IntHash {
  size_t operator()(int k) const { return std::hash<int>()(k); }
};
using TestCache = PlanCache<int, int, IntHash>;

bool expect(bool cond, const char* what) {
  std::printf("%s plan cache: %s\n", cond ? "ok  " : "FAIL", what);
  return cond;
}

bool check_plan_cache() {
  bool ok = true;
  std::vector<int> evicted;
  TestCache::Entry e{};
  TestCache cache(2);
  // Handles 10 + key: keys 1, 2, 3 returned in that order; the bound keeps 2.
  for (int key : {1, 2, 3}) cache.give_back({key, 10 + key, 0, false}, false, evicted);
  ok &= expect(evicted == std::vector<int>{11} && cache.idle() == 2, "the least recently returned plan is evicted");
  ok &= expect(!cache.take(1, e) && cache.take(2, e) && e.handle == 12 && cache.idle() == 1, "take by key");
  cache.give_back(e, false, evicted);  // 2 is now the most recent: 3 goes first
  cache.give_back({4, 14, 0, false}, false, evicted);
  ok &= expect(evicted == std::vector<int>{11, 13}, "a returned plan becomes the most recent");
  // Two idle plans with one key (two callers used it at once).
  evicted.clear();
  TestCache twins(8);
  twins.give_back({5, 51, 0, false}, false, evicted);
  twins.give_back({5, 52, 0, false}, false, evicted);
  TestCache::Entry a{}, b{};
  ok &= expect(twins.take(5, a) && twins.take(5, b) && a.handle + b.handle == 103 && !twins.take(5, e),
               "plans with the same key are each handed out once");
  // Pinned by a capture: never evicted, preferred by take, pinned for good.
  TestCache pins(1);
  pins.give_back({7, 70, 0, false}, false, evicted);
  pins.give_back({8, 80, 0, false}, true, evicted);  // capturing: pinned, nothing evicted
  pins.give_back({9, 90, 0, false}, true, evicted);
  ok &= expect(evicted.empty() && pins.idle() == 1 && pins.pinned_idle() == 2, "a capture pins and evicts nothing");
  pins.give_back({6, 60, 0, false}, true, evicted);
  pins.give_back({10, 100, 0, false}, false, evicted);  // over the bound: 7 goes, the pinned stay
  ok &= expect(evicted == std::vector<int>{70} && pins.idle() == 1 && pins.pinned_idle() == 3,
               "outside a capture the bound applies to unpinned plans only");
  pins.set_max_size(0, evicted);
  pins.clear(evicted);
  ok &= expect(evicted == std::vector<int>{70, 100} && pins.idle() == 0 && pins.pinned_idle() == 3,
               "set_max_size(0) and clear() keep pinned plans");
  ok &= expect(pins.take(8, e) && e.pinned && e.handle == 80 && pins.pinned_idle() == 2, "take finds pinned plans");
  pins.give_back(e, false, evicted);
  ok &= expect(pins.pinned_idle() == 3 && pins.idle() == 0 && evicted.size() == 2, "once pinned, always pinned");
  pins.set_max_size(4, evicted);
  pins.give_back({8, 81, 0, false}, false, evicted);  // a second, unpinned plan with key 8
  ok &= expect(pins.take(8, e) && e.handle == 80, "a pinned plan is preferred over an unpinned one");
  // The environment variable's format.
  size_t n = 7;
  ok &= expect(parse_plan_cache_size("0", n) && n == 0 && parse_plan_cache_size("4096", n) && n == 4096,
               "sizes parse");
  for (const char* bad : {"", "-1", "12a", " 3", "1e3", "99999999999999999999999"}) {
    const std::string what = std::string("'") + bad + "' is refused";
    ok &= expect(!parse_plan_cache_size(bad, n) && n == 4096, what.c_str());
  }
  ok &= expect(!parse_plan_cache_size(nullptr, n), "no value is refused");
  ok &= expect(TestCache(kDefaultPlanCacheMaxSize).max_size() == 4096, "PyTorch's default bound");
  return ok;
}

// ---------------------------------------------------------------- the fused grad_weight reduction
// Slices of the two-level reduction for a case (1: level 1 alone covers the terms).
int64_t reduction_slices(const Case& c) {
  ToeplitzShape s;
  s.B = c.B; s.L = c.L; s.C = c.C; s.G = c.G; s.K = c.K; s.N = c.N;
  FusedGeometry geo;
  if (!fused_geometry(s, 2, geo)) return 0;
  const int64_t terms = partial_terms(s, geo), per = partial_slice_terms(terms);
  return (terms + per - 1) / per;
}

// ---------------------------------------------------------------- shared-memory banks of the fused tiles
// A model of shared memory: 32 banks of 4-byte words; a warp's 8-byte
// accesses are served a half-warp at a time, its 4-byte accesses all at once,
// and a phase takes as many wavefronts as the most distinct words that fall
// in one bank. words[l]: the first word thread l touches, -1 if inactive.
int wavefronts(const std::vector<int>& words, int width) {
  const int per_phase = width == 2 ? 16 : 32;
  int total = 0;
  for (size_t p0 = 0; p0 < words.size(); p0 += per_phase) {
    std::vector<std::vector<int>> bank(32);
    for (size_t l = p0; l < p0 + per_phase && l < words.size(); ++l) {
      if (words[l] < 0) continue;
      for (int w = words[l]; w < words[l] + width; ++w) {
        auto& b = bank[w % 32];
        if (std::find(b.begin(), b.end(), w) == b.end()) b.push_back(w);
      }
    }
    size_t most = 0;
    for (const auto& b : bank) most = b.size() > most ? b.size() : most;
    total += int(most);
  }
  return total;
}

// Wavefronts of every warp access of the FFT stages (fft_stage's reads and
// writes) and of the tile loads and stores (load_tile, the y / grad_x
// stores), against the fewest those accesses can take.
struct BankCount {
  long stages = 0, stages_min = 0, tile = 0, tile_min = 0, split = 0;
};

BankCount count_banks(const FusedGeometry& geo) {
  BankCount c;
  const int T = geo.threads;
  for (int log_ns = 0; log_ns < geo.log_n;) {  // the radix sequence of fft_tile
    const int left = geo.log_n - log_ns, log_r = left >= 3 ? 3 : left, R = 1 << log_r;
    const int log_nr = geo.log_n - log_r, per = kFusedPoints / R;
    for (int q = 0; q < per; ++q)
      for (int r = 0; r < R; ++r)
        for (int w0 = 0; w0 < T; w0 += 32) {
          std::vector<int> rd, wr;
          for (int tid = w0; tid < w0 + 32 && tid < T; ++tid) {
            const int u = tid + q * T, j = u & (geo.P - 1), jj = u >> geo.log_p;
            rd.push_back(2 * tile_slot(geo, stage_read_row(jj, r, log_nr), j));
            wr.push_back(2 * tile_slot(geo, stage_write_row(jj, r, log_ns, log_r), j));
          }
          c.stages += wavefronts(rd, 2) + wavefronts(wr, 2);
          c.stages_min += 2 * int((rd.size() + 15) / 16);
        }
    log_ns += log_r;
  }
  // split_pairs (reported, not required: its rows k and n-k cannot both be aligned).
  const int items = (geo.n / 2 - 1) * geo.P;
  for (int base = 0; base < items; base += T)
    for (int w0 = 0; w0 < T; w0 += 32) {
      std::vector<int> zp, zq;
      for (int tid = w0; tid < w0 + 32 && tid < T; ++tid) {
        const int it = base + tid, j = it & (geo.P - 1), k = (it >> geo.log_p) + 1;
        zp.push_back(it < items ? 2 * tile_slot(geo, k, j) : -1);
        zq.push_back(it < items ? 2 * tile_slot(geo, geo.n - k, j) : -1);
      }
      c.split += 2 * (wavefronts(zp, 2) + wavefronts(zq, 2));  // read and write
    }
  const int total = geo.n * geo.width;
  for (int e0 = 0; e0 < total; e0 += 32) {
    std::vector<int> fl;
    for (int e = e0; e < e0 + 32 && e < total; ++e) fl.push_back(tile_real_slot(geo, e >> geo.log_width, e & (geo.width - 1)));
    c.tile += wavefronts(fl, 1);
    c.tile_min += 1;
  }
  return c;
}

bool check_banks() {
  bool ok = true;
  for (int64_t L : {8, 32, 128, 256, 300, 600, 1500, 4096}) {
    ToeplitzShape s;
    s.B = 1; s.L = L; s.C = 64; s.G = 1; s.K = 1; s.N = L;
    FusedGeometry geo;
    fused_geometry(s, 1, geo);
    FusedGeometry plain = geo;
    plain.swizzle = 0;
    const BankCount c = count_banks(geo), p = count_banks(plain);
    const bool free = c.stages == c.stages_min && c.tile == c.tile_min;
    std::printf("%s banks n=%d P=%d: FFT stages %ld wavefronts (fewest %ld; unswizzled rows %ld), tile loads/stores "
                "%ld (%ld), split_pairs %ld (unswizzled %ld)\n",
                free ? "ok  " : "FAIL", geo.n, geo.P, c.stages, c.stages_min, p.stages, c.tile, c.tile_min, c.split,
                p.split);
    ok &= free;
  }
  return ok;
}

// tile_slot permutes the rows of each lane: a bijection of [0, n*P).
bool check_tile_slots() {
  bool ok = true;
  for (int64_t L : {8, 300, 600, 1500, 2100, 4096}) {
    ToeplitzShape s;
    s.B = 1; s.L = L; s.C = 64; s.G = 1; s.K = 1; s.N = L;
    FusedGeometry geo;
    fused_geometry(s, 1, geo);
    std::vector<int> seen(size_t(geo.n) * geo.P, 0);
    for (int t = 0; t < geo.n; ++t)
      for (int j = 0; j < geo.P; ++j) {
        const int slot = tile_slot(geo, t, j);
        if (slot >= 0 && slot < geo.n * geo.P) ++seen[size_t(slot)];
      }
    const bool bijection = std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; });
    std::printf("%s tile_slot is a permutation for n=%d P=%d\n", bijection ? "ok  " : "FAIL", geo.n, geo.P);
    ok &= bijection;
  }
  return ok;
}

int main() {
  std::mt19937 rng(1234);
  bool all = check_plan_cache();
  all &= check_tile_slots();
  all &= check_banks();
  std::vector<Case> cases = {
      {1, 1, 1, 1, 1, 1, false, false},   {2, 1, 3, 1, 1, 2, true, false},    {2, 5, 4, 1, 1, 7, true, false},
      {2, 7, 6, 2, 2, 9, true, true},     {3, 9, 12, 3, 4, 9, true, false},    {2, 17, 8, 8, 1, 20, true, false},
      {2, 33, 10, 2, 5, 33, false, true}, {1, 64, 40, 4, 3, 70, true, false},  {2, 97, 33, 1, 1, 100, true, true},
      {2, 31, 64, 64, 1, 31, true, false}, {3, 13, 48, 2, 17, 13, true, false}, {2, 129, 20, 5, 4, 130, true, false},
      {1, 200, 9, 1, 9, 200, false, false}, {2, 11, 70, 7, 10, 12, true, true},
  };
  for (const Case& c : cases) {
    all &= run_case<float>(c, Algorithm::kCufft, int64_t(1) << 30, 2e-5, rng);
    all &= run_case<float>(c, Algorithm::kCufft, 1, 2e-5, rng);  // one batch per chunk
    all &= run_case<double>(c, Algorithm::kCufft, 1, 1e-11, rng);
    all &= run_case<float>(c, Algorithm::kFused, int64_t(1) << 30, 2e-5, rng);
    all &= run_case<tmm::kernels::bf16_t>(c, Algorithm::kFused, int64_t(1) << 30, 2e-2, rng);
    g_u32 = !g_u32;
  }
  std::vector<Case> big = {
      {1, 4096, 3, 1, 2, 4100, true, true},  {2, 1000, 9, 3, 2, 1000, true, false},
      {1, 2048, 6, 6, 1, 2048, true, false}, {2, 300, 8, 2, 2, 301, true, true},
      {1, 300, 40, 1, 12, 300, true, false},  // K-1 > P: falls back
  };
  for (const Case& c : big) all &= run_case<float>(c, Algorithm::kFused, int64_t(1) << 30, 2e-5, rng);
  // Many (batch, tile) terms per grad_weight output: the reduction's slices
  // (uneven last slice; groups straddling tiles; one tile, many batches).
  std::vector<Case> many = {
      {5, 20, 200, 1, 1, 20, true, false}, {7, 9, 200, 4, 3, 11, true, true}, {40, 5, 3, 1, 2, 5, false, false},
      {4, 1100, 40, 1, 1, 1100, false, false},
  };
  for (const Case& c : many) {
    const int64_t slices = reduction_slices(c);
    std::printf("%s reduction slices: %ld\n", slices > 1 ? "ok  " : "FAIL", long(slices));
    all &= slices > 1;
    all &= run_case<float>(c, Algorithm::kFused, int64_t(1) << 30, 2e-5, rng);
  }
  std::printf(all ? "ALL OK\n" : "SOME FAILED\n");
  return all ? 0 : 1;
}
