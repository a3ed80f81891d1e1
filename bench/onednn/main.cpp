// onednn-bench: a CPU anchor for `rnnc bench` (results: docs/benchmarks/cpu.md).
// Standalone program; NOT part of the rnnc build and not a dependency of rnnc.
//
// Contract
//   onednn-bench --cell lstm|gru --input I --hidden H --batch B --seq T
//                [--runs N] [--warmup W] [--threads N] [--json]
//   Runs oneDNN's LSTM (lstm_forward / lstm_backward) or linear-before-reset GRU
//   (lbr_gru_forward / lbr_gru_backward, the formulation of torch.nn.GRU): f32, one layer,
//   unidirectional, zero initial state, inputs and weights random with a fixed seed.
//   One training step = the forward in prop_kind::forward_training (writes the workspace),
//   then the backward, computing diff_src_layer and the diff weights and bias from a random
//   diff_dst_layer.
//   Timed, after W warm-up iterations, N runs each: the forward alone, and forward+backward.
//   Reports the median (and min) per iteration in ms, and tokens/s = T*B / fwd+bwd median.
//   Not timed: creating the primitives, reordering the weights once into the layouts the
//   primitives choose (format_tag::any), zeroing the diff weights between steps (oneDNN's
//   backward accumulates into them).
//   Threads: Debian's oneDNN uses OpenMP; --threads N calls omp_set_num_threads(N), otherwise
//   OMP_NUM_THREADS or all cores. The count used is printed.
//   Output: one readable line, or one JSON object with --json (fields: cell, input, hidden,
//   batch, seq, threads, runs, forward_ms_median, forward_ms_min, fwdbwd_ms_median,
//   fwdbwd_ms_min, tokens_per_s, dnnl_version).
//   Exit status: 0 ok; 1 a dnnl error or a non-finite result (message on stderr);
//   2 a bad command line.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

struct Options {
  std::string cell;
  long input = 0, hidden = 0, batch = 0, seq = 0;
  int runs = 20, warmup = 3, threads = 0;
  bool json = false;
};

// Everything a step needs, whichever the cell: the two primitives and the memory descriptors
// their primitive descriptors chose.
struct Prims {
  primitive fwd, bwd;
  memory::desc fwd_wl, fwd_wi, fwd_bias, bwd_wl, bwd_wi, bwd_bias;
  memory::desc diff_wl, diff_wi, diff_bias, workspace;
};

struct Shapes {
  memory::desc src, dst, wl_any, wi_any, bias_any;
};

Shapes shapes(const Options &o, long gates, long bias_gates) {
  const memory::dims src{o.seq, o.batch, o.input}, dst{o.seq, o.batch, o.hidden};
  return {{src, dt::f32, tag::tnc},
          {dst, dt::f32, tag::tnc},
          {{1, 1, o.input, gates, o.hidden}, dt::f32, tag::any},
          {{1, 1, o.hidden, gates, o.hidden}, dt::f32, tag::any},
          {{1, 1, bias_gates, o.hidden}, dt::f32, tag::any}};
}

// An empty descriptor: no initial / final state (zero initial state, final state unused).
const memory::desc none;
const auto fwd_kind = prop_kind::forward_training;
const auto bwd_kind = prop_kind::backward;
const auto dir = rnn_direction::unidirectional_left2right;

template <class FwdPd, class BwdPd>
Prims collect(const FwdPd &f, const BwdPd &b) {
  return {primitive(f), primitive(b), f.weights_layer_desc(), f.weights_iter_desc(),
          f.bias_desc(), b.weights_layer_desc(), b.weights_iter_desc(), b.bias_desc(),
          b.diff_weights_layer_desc(), b.diff_weights_iter_desc(), b.diff_bias_desc(),
          f.workspace_desc()};
}

Prims build_lstm(const Options &o, const engine &eng) {
  const Shapes s = shapes(o, 4, 4);
  lstm_forward::desc fd(fwd_kind, dir, s.src, none, none, s.wl_any, s.wi_any, s.bias_any,
                        s.dst, none, none);
  lstm_forward::primitive_desc fpd(fd, eng);
  lstm_backward::desc bd(bwd_kind, dir, s.src, none, none, s.wl_any, s.wi_any, s.bias_any,
                         s.dst, none, none, s.src, none, none, s.wl_any, s.wi_any,
                         s.bias_any, s.dst, none, none);
  lstm_backward::primitive_desc bpd(bd, eng, fpd);
  return collect(fpd, bpd);
}

// Linear-before-reset GRU: 3 gates in the weights, 4 biases (the candidate's hidden bias
// is kept apart, inside r * (W_hn h + b_hn)), as torch.nn.GRU.
Prims build_gru(const Options &o, const engine &eng) {
  const Shapes s = shapes(o, 3, 4);
  lbr_gru_forward::desc fd(fwd_kind, dir, s.src, none, s.wl_any, s.wi_any, s.bias_any, s.dst,
                           none);
  lbr_gru_forward::primitive_desc fpd(fd, eng);
  lbr_gru_backward::desc bd(bwd_kind, dir, s.src, none, s.wl_any, s.wi_any, s.bias_any, s.dst,
                            none, s.src, none, s.wl_any, s.wi_any, s.bias_any, s.dst, none);
  lbr_gru_backward::primitive_desc bpd(bd, eng, fpd);
  return collect(fpd, bpd);
}

float *data(const memory &m) { return static_cast<float *>(m.get_data_handle()); }
size_t count(const memory &m) { return m.get_desc().get_size() / sizeof(float); }

void fill(const memory &m, std::mt19937 &rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  float *p = data(m);
  for (size_t i = 0, n = count(m); i < n; ++i) p[i] = u(rng);
}

// A memory in the primitive's layout holding the values of `user` (plain layout).
memory in_layout(const memory &user, const memory::desc &want, const engine &eng, stream &s) {
  if (user.get_desc() == want) return user;
  memory m(want, eng);
  reorder(user, m).execute(s, const_cast<memory &>(user), m);
  s.wait();
  return m;
}

bool finite(const memory &m) {
  const float *p = data(m);
  for (size_t i = 0, n = count(m); i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "onednn-bench: %s\nusage: onednn-bench --cell lstm|gru --input I --hidden H "
               "--batch B --seq T [--runs N] [--warmup W] [--threads N] [--json]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") { o.json = true; continue; }
    if (a == "--help" || a == "-h") usage("help");
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char *v = argv[++i];
    char *end = nullptr;
    const long n = std::strtol(v, &end, 10);
    const bool num = *v && !*end;
    if (a == "--cell") o.cell = v;
    else if (!num) usage(("not a number: " + a + " " + v).c_str());
    else if (a == "--input") o.input = n;
    else if (a == "--hidden") o.hidden = n;
    else if (a == "--batch") o.batch = n;
    else if (a == "--seq") o.seq = n;
    else if (a == "--runs") o.runs = int(n);
    else if (a == "--warmup") o.warmup = int(n);
    else if (a == "--threads") o.threads = int(n);
    else usage(("unknown option " + a).c_str());
  }
  if (o.cell != "lstm" && o.cell != "gru") usage("--cell must be lstm or gru");
  if (o.input <= 0 || o.hidden <= 0 || o.batch <= 0 || o.seq <= 0)
    usage("--input, --hidden, --batch and --seq must be positive");
  if (o.runs <= 0 || o.warmup < 0 || o.threads < 0) usage("bad --runs, --warmup or --threads");
  return o;
}

int run(const Options &o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();

  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const Prims p = o.cell == "lstm" ? build_lstm(o, eng) : build_gru(o, eng);

  // Random data, fixed seed; weights and biases U(-1/sqrt(H), 1/sqrt(H)) as torch initializes.
  std::mt19937 rng(12345);
  const long G = o.cell == "lstm" ? 4 : 3, GB = 4;
  const float k = 1.0f / std::sqrt(float(o.hidden));
  memory src({{o.seq, o.batch, o.input}, dt::f32, tag::tnc}, eng);
  memory diff_dst({{o.seq, o.batch, o.hidden}, dt::f32, tag::tnc}, eng);
  memory wl({{1, 1, o.input, G, o.hidden}, dt::f32, tag::ldigo}, eng);
  memory wi({{1, 1, o.hidden, G, o.hidden}, dt::f32, tag::ldigo}, eng);
  memory bias({{1, 1, GB, o.hidden}, dt::f32, tag::ldgo}, eng);
  fill(src, rng, 1.0f);
  fill(diff_dst, rng, 1.0f);
  fill(wl, rng, k);
  fill(wi, rng, k);
  fill(bias, rng, k);

  const memory fwl = in_layout(wl, p.fwd_wl, eng, strm), fwi = in_layout(wi, p.fwd_wi, eng, strm),
               fb = in_layout(bias, p.fwd_bias, eng, strm);
  const memory bwl = in_layout(wl, p.bwd_wl, eng, strm), bwi = in_layout(wi, p.bwd_wi, eng, strm),
               bb = in_layout(bias, p.bwd_bias, eng, strm);
  memory dst(diff_dst.get_desc(), eng), diff_src(src.get_desc(), eng);
  memory ws(p.workspace, eng), dwl(p.diff_wl, eng), dwi(p.diff_wi, eng), db(p.diff_bias, eng);

  const std::unordered_map<int, memory> fwd_args{
      {DNNL_ARG_SRC_LAYER, src}, {DNNL_ARG_WEIGHTS_LAYER, fwl}, {DNNL_ARG_WEIGHTS_ITER, fwi},
      {DNNL_ARG_BIAS, fb},       {DNNL_ARG_DST_LAYER, dst},     {DNNL_ARG_WORKSPACE, ws}};
  const std::unordered_map<int, memory> bwd_args{
      {DNNL_ARG_SRC_LAYER, src},          {DNNL_ARG_WEIGHTS_LAYER, bwl},
      {DNNL_ARG_WEIGHTS_ITER, bwi},       {DNNL_ARG_BIAS, bb},
      {DNNL_ARG_DST_LAYER, dst},          {DNNL_ARG_WORKSPACE, ws},
      {DNNL_ARG_DIFF_DST_LAYER, diff_dst}, {DNNL_ARG_DIFF_SRC_LAYER, diff_src},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl}, {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi},
      {DNNL_ARG_DIFF_BIAS, db}};

  auto forward = [&] { p.fwd.execute(strm, fwd_args); strm.wait(); };
  auto step = [&] {
    forward();
    p.bwd.execute(strm, bwd_args);
    strm.wait();
  };
  auto zero_grads = [&] {
    for (const memory *m : {&dwl, &dwi, &db}) std::memset(data(*m), 0, m->get_desc().get_size());
  };

  std::vector<double> fwd_ms, step_ms;
  for (int i = 0; i < o.warmup; ++i) forward();
  for (int i = 0; i < o.runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    fwd_ms.push_back(ms_since(t0));
  }
  for (int i = 0; i < o.warmup; ++i) { zero_grads(); step(); }
  for (int i = 0; i < o.runs; ++i) {
    zero_grads();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    step_ms.push_back(ms_since(t0));
  }
  for (const memory *m : {&dst, &diff_src, &dwl, &dwi, &db})
    if (!finite(*m)) {
      std::fprintf(stderr, "onednn-bench: non-finite values in a result\n");
      return 1;
    }

  const version_t *v = version();
  char ver[64];
  std::snprintf(ver, sizeof ver, "%d.%d.%d", v->major, v->minor, v->patch);
  const double fmed = median(fwd_ms), fmin = *std::min_element(fwd_ms.begin(), fwd_ms.end());
  const double smed = median(step_ms), smin = *std::min_element(step_ms.begin(), step_ms.end());
  const double tps = double(o.seq * o.batch) / (smed / 1000.0);
  if (o.json)
    std::printf("{\"cell\": \"%s\", \"input\": %ld, \"hidden\": %ld, \"batch\": %ld, \"seq\": %ld, "
                "\"threads\": %d, \"runs\": %d, \"forward_ms_median\": %.4f, "
                "\"forward_ms_min\": %.4f, \"fwdbwd_ms_median\": %.4f, \"fwdbwd_ms_min\": %.4f, "
                "\"tokens_per_s\": %.1f, \"dnnl_version\": \"%s\"}\n",
                o.cell.c_str(), o.input, o.hidden, o.batch, o.seq, threads, o.runs, fmed, fmin,
                smed, smin, tps, ver);
  else
    std::printf("oneDNN %s %s I=%ld H=%ld B=%ld T=%ld threads=%d runs=%d: forward %.3f ms "
                "(min %.3f), fwd+bwd %.3f ms (min %.3f), %.0f tokens/s\n",
                ver, o.cell.c_str(), o.input, o.hidden, o.batch, o.seq, threads, o.runs, fmed,
                fmin, smed, smin, tps);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  try {
    return run(o);
  } catch (const dnnl::error &e) {
    std::fprintf(stderr, "onednn-bench: dnnl error %d: %s\n", int(e.status), e.what());
    return 1;
  }
}
