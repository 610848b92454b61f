// Work per operator call from recorded shapes (perfmodel.h). The formulas are the ones written
// out in docs/analyses.md ("Performance model"); keep the two in step.
#include "kernalyse/perfmodel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

namespace kernalyse {
namespace {

using Dims = std::vector<int64_t>;

double numel(const Dims& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(x);
  return n;
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}

// "aten::add_" → "add_"; names without a namespace are kept.
std::string_view base_name(std::string_view op) {
  size_t c = op.rfind("::");
  return c == std::string_view::npos ? op : op.substr(c + 2);
}

// A tensor input with at least one dim. Zero-dim inputs are left out: the profiler records
// Python scalars as dims [] with a type ("double", "long int"), indistinguishable from 0-d
// tensors, and either moves at most 8 bytes.
bool is_tensor(const OpInput& x) {
  return dtype_bytes_of(x.type) > 0 && !x.is_list && !x.dims.empty();
}

// The first n tensor inputs (position order), or fewer when the op has fewer.
std::vector<const OpInput*> tensors(const std::vector<OpInput>& in) {
  std::vector<const OpInput*> t;
  for (const OpInput& x : in)
    if (is_tensor(x)) t.push_back(&x);
  return t;
}

double tensor_bytes(const OpInput& x) {
  return numel(x.dims) * static_cast<double>(dtype_bytes_of(x.type));
}

// Broadcast shape of several dims (numpy rules); empty when they do not broadcast.
std::optional<Dims> broadcast(const std::vector<const Dims*>& ds) {
  size_t rank = 0;
  for (const Dims* d : ds) rank = std::max(rank, d->size());
  Dims out(rank, 1);
  for (const Dims* d : ds)
    for (size_t i = 0; i < d->size(); ++i) {
      int64_t v = (*d)[d->size() - 1 - i];
      int64_t& o = out[rank - 1 - i];
      if (v == o || v == 1) continue;
      if (o != 1) return std::nullopt;
      o = v;
    }
  return out;
}

// A concrete input parsed as a list of ints ("[1, 1]") or one int ("1").
std::optional<Dims> concrete_ints(const std::vector<OpInput>& in, size_t i) {
  if (i >= in.size() || in[i].concrete.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(in[i].concrete, nullptr, false);
  Dims out;
  if (j.is_number_integer()) return Dims{j.get<int64_t>()};
  if (!j.is_array()) return std::nullopt;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return std::nullopt;
    out.push_back(v.get<int64_t>());
  }
  return out;
}

std::optional<bool> concrete_bool(const std::vector<OpInput>& in, size_t i) {
  if (i >= in.size()) return std::nullopt;
  if (in[i].concrete == "True") return true;
  if (in[i].concrete == "False") return false;
  return std::nullopt;
}

OpWork unknown(OpFamily f, std::string why) {
  OpWork w;
  w.family = f;
  w.why = std::move(why);
  return w;
}

// GEMM family: out[batch, M, N] = A[batch, M, K] · B[batch, K, N] (+ bias).
OpWork gemm(std::string_view name, const std::vector<OpInput>& in) {
  auto t = tensors(in);
  OpWork w;
  w.family = OpFamily::Gemm;
  const OpInput *a = nullptr, *b = nullptr, *bias = nullptr;
  double batch = 1, M = 0, N = 0, K = 0;
  if (name == "mm" || name == "_scaled_mm") {
    // _scaled_mm(A, B, scale_a, scale_b, bias?, ...): the scales are tensors too; the bias is
    // the fifth input when recorded with dims.
    if (t.size() < 2 || in[0].dims.size() != 2 || in[1].dims.size() != 2)
      return unknown(w.family, "unexpected shapes");
    a = &in[0], b = &in[1];
    if (name == "_scaled_mm" && in.size() > 4 && is_tensor(in[4]) && !in[4].dims.empty())
      bias = &in[4];
    M = a->dims[0], K = a->dims[1], N = b->dims[1];
  } else if (name == "addmm") {  // addmm(bias, A, B, beta, alpha)
    if (in.size() < 3 || in[1].dims.size() != 2 || in[2].dims.size() != 2)
      return unknown(w.family, "unexpected shapes");
    bias = &in[0], a = &in[1], b = &in[2];
    M = a->dims[0], K = a->dims[1], N = b->dims[1];
  } else if (name == "bmm" || name == "baddbmm") {  // baddbmm(bias, A, B, beta, alpha)
    size_t o = name == "baddbmm" ? 1 : 0;
    if (in.size() < o + 2 || in[o].dims.size() != 3 || in[o + 1].dims.size() != 3)
      return unknown(w.family, "unexpected shapes");
    if (o) bias = &in[0];
    a = &in[o], b = &in[o + 1];
    batch = a->dims[0], M = a->dims[1], K = a->dims[2], N = b->dims[2];
  } else if (name == "linear") {  // linear(input[..., K], weight[N, K], bias[N]?)
    if (in.size() < 2 || in[0].dims.empty() || in[1].dims.size() != 2)
      return unknown(w.family, "unexpected shapes");
    a = &in[0], b = &in[1];
    if (in.size() > 2 && is_tensor(in[2]) && !in[2].dims.empty()) bias = &in[2];
    K = a->dims.back(), N = b->dims[0];
    M = numel(a->dims) / std::max(K, 1.0);
  } else {  // matmul(A, B): 1-D operands promoted, leading dims broadcast as batch
    if (in.size() < 2 || in[0].dims.empty() || in[1].dims.empty())
      return unknown(w.family, "unexpected shapes");
    a = &in[0], b = &in[1];
    Dims da = a->dims, db = b->dims;
    if (da.size() == 1) da.insert(da.begin(), 1);
    if (db.size() == 1) db.push_back(1);
    M = da[da.size() - 2], K = da.back(), N = db.back();
    Dims ba(da.begin(), da.end() - 2), bb(db.begin(), db.end() - 2);
    auto bc = broadcast({&ba, &bb});
    if (!bc) return unknown(w.family, "batch dims do not broadcast");
    batch = numel(*bc);
  }
  const double out = batch * M * N;
  w.flops = 2 * batch * M * N * K + (bias ? out : 0);
  const double es = static_cast<double>(std::max<int64_t>(dtype_bytes_of(a->type), 1));
  // Output in the inputs' type (for _scaled_mm the output is usually bf16: counted at 2 bytes).
  const double out_es = name == "_scaled_mm" ? 2 : es;
  w.bytes = tensor_bytes(*a) + tensor_bytes(*b) + (bias ? tensor_bytes(*bias) : 0) + out * out_es;
  // matmul/linear record the un-broadcast operands: their bytes above are what is read.
  w.dtype = dtype_class(a->type);
  w.known = true;
  return w;
}

// Attention: the two products Q·Kᵀ and P·V; 2·B·H·Sq·Sk·(Dqk + Dv) FLOPs, half when causal.
OpWork attention(std::string_view name, const std::vector<OpInput>& in) {
  OpWork w;
  w.family = OpFamily::Attention;
  if (in.size() < 3 || in[0].dims.size() != 4 || in[1].dims.size() != 4 || in[2].dims.size() != 4)
    return unknown(w.family, "unexpected shapes");
  // _flash_attention_forward / _efficient_attention_forward take [B, S, H, D]; the SDPA entry
  // points take [B, H, S, D].
  const bool bshd = name == "_flash_attention_forward" || name == "_efficient_attention_forward";
  const Dims &q = in[0].dims, &k = in[1].dims, &v = in[2].dims;
  const double B = q[0], H = bshd ? q[2] : q[1], Sq = bshd ? q[1] : q[2], D = q[3];
  const double Sk = bshd ? k[1] : k[2], Dv = v[3];
  std::optional<bool> causal;
  if (name == "_flash_attention_forward") {
    causal = concrete_bool(in, 8);
  } else if (name == "_efficient_attention_forward") {
    auto m = concrete_ints(in, 9);  // custom_mask_type: 0 none, 1/2 causal
    if (m && m->size() == 1) causal = (*m)[0] != 0;
  } else if (name == "_scaled_dot_product_flash_attention") {
    causal = concrete_bool(in, 4);
  } else if (name == "_scaled_dot_product_efficient_attention" ||
             name == "_scaled_dot_product_cudnn_attention") {
    causal = concrete_bool(in, 6);
  } else if (name == "scaled_dot_product_attention") {
    causal = concrete_bool(in, 5);
  }
  if (!causal) return unknown(w.family, "causal flag not recorded");
  w.flops = 2 * B * H * Sq * Sk * (D + Dv) * (*causal ? 0.5 : 1.0);
  const double es = static_cast<double>(std::max<int64_t>(dtype_bytes_of(in[0].type), 1));
  w.bytes = tensor_bytes(in[0]) + tensor_bytes(in[1]) + tensor_bytes(in[2]) + B * H * Sq * Dv * es;
  w.dtype = dtype_class(in[0].type);
  w.known = true;
  return w;
}

// Convolution: 2·N·Cout·prod(out spatial)·(Cin/groups)·prod(kernel) (+ bias: N·Cout·out).
OpWork convolution(std::string_view name, const std::vector<OpInput>& in) {
  OpWork w;
  w.family = OpFamily::Conv;
  if (in.size() < 2 || in[0].dims.size() < 3 || in[1].dims.size() != in[0].dims.size())
    return unknown(w.family, "unexpected shapes");
  // Argument positions of stride, padding, dilation, groups, transposed, and the bias.
  size_t is = 3, ip = 4, id = 5, ig = 6, it = SIZE_MAX, ib = 2;
  if (name == "cudnn_convolution") {  // (self, weight, padding, stride, dilation, groups, ...)
    ip = 2, is = 3, id = 4, ig = 5, ib = SIZE_MAX;
  } else if (name == "convolution" || name == "_convolution") {
    it = 6, ig = 8;
  }
  const size_t sp = in[0].dims.size() - 2;
  // One value per spatial dim; a single value applies to all.
  auto expand = [&](size_t i) -> std::optional<Dims> {
    auto v = concrete_ints(in, i);
    if (!v) return std::nullopt;
    if (v->size() == 1) return Dims(sp, (*v)[0]);
    if (v->size() != sp) return std::nullopt;
    return v;
  };
  auto stride = expand(is), pad = expand(ip), dil = expand(id);
  auto groups = concrete_ints(in, ig);
  if (!stride || !pad || !dil || !groups || groups->size() != 1 || (*groups)[0] < 1)
    return unknown(w.family, "stride/padding/dilation/groups not recorded");
  if (it != SIZE_MAX && concrete_bool(in, it).value_or(false))
    return unknown(w.family, "transposed convolution");
  const Dims &x = in[0].dims, &wt = in[1].dims;
  double out_sp = 1, ksz = 1;
  for (size_t i = 0; i < sp; ++i) {
    // In double: the values come from the trace (a hostile one must not overflow or divide by 0).
    const double st = static_cast<double>((*stride)[i]), dl = static_cast<double>((*dil)[i]);
    if (st < 1 || dl < 1 || (*pad)[i] < 0)
      return unknown(w.family, "invalid stride/padding/dilation");
    const double o =
        std::floor((static_cast<double>(x[2 + i]) + 2.0 * static_cast<double>((*pad)[i]) -
                    dl * (static_cast<double>(wt[2 + i]) - 1) - 1) /
                   st) +
        1;
    if (o <= 0) return unknown(w.family, "empty output");
    out_sp *= o;
    ksz *= static_cast<double>(wt[2 + i]);
  }
  const double N = x[0], Cout = wt[0], CinG = wt[1];
  const bool bias = ib != SIZE_MAX && ib < in.size() && is_tensor(in[ib]) && !in[ib].dims.empty();
  const double out = N * Cout * out_sp;
  w.flops = 2 * out * CinG * ksz + (bias ? out : 0);
  const double es = static_cast<double>(std::max<int64_t>(dtype_bytes_of(in[0].type), 1));
  w.bytes =
      tensor_bytes(in[0]) + tensor_bytes(in[1]) + (bias ? tensor_bytes(in[ib]) : 0) + out * es;
  w.dtype = dtype_class(in[0].type);
  w.known = true;
  return w;
}

// Bytes-only families: every tensor input read once, the output (the inputs' broadcast shape,
// in the first tensor's type) written once; in-place ops (name ending in '_') write their first
// input. FLOPs are not counted (0): these ops are judged against memory bandwidth.
OpWork streaming(OpFamily f, std::string_view name, const std::vector<OpInput>& in) {
  OpWork w;
  w.family = f;
  auto t = tensors(in);
  if (name == "cat" || (!in.empty() && in[0].is_list))
    return unknown(f, "tensor-list element type not recorded");
  if (t.empty()) return unknown(f, "no tensor inputs");
  double read = 0;
  std::vector<const Dims*> ds;
  for (const OpInput* x : t) {
    read += tensor_bytes(*x);
    ds.push_back(&x->dims);
  }
  const double es = static_cast<double>(dtype_bytes_of(t[0]->type));
  double out_elems = 0;
  if (f == OpFamily::Norm || f == OpFamily::Softmax) {
    out_elems = numel(t[0]->dims);  // same shape as the input
  } else if (name == "copy_") {
    out_elems = numel(t[0]->dims);  // copy_(self, src): self written, src read
    read = tensor_bytes(*t.back());
  } else {
    auto bc = broadcast(ds);
    if (!bc) return unknown(f, "inputs do not broadcast");
    out_elems = numel(*bc);
  }
  w.bytes = read + out_elems * es;
  w.dtype = dtype_class(t[0]->type);
  w.known = true;
  return w;
}

}  // namespace

const char* to_string(OpFamily f) {
  switch (f) {
    case OpFamily::Gemm:
      return "gemm";
    case OpFamily::Attention:
      return "attention";
    case OpFamily::Conv:
      return "convolution";
    case OpFamily::Elementwise:
      return "elementwise";
    case OpFamily::Norm:
      return "normalization";
    case OpFamily::Softmax:
      return "softmax";
    case OpFamily::Copy:
      return "copy";
    case OpFamily::Other:
      return "other";
  }
  return "other";
}

OpFamily op_family(std::string_view op) {
  const std::string_view n = base_name(op);
  static constexpr std::array<std::string_view, 7> kGemm = {
      "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm"};
  static constexpr std::array<std::string_view, 7> kAttn = {
      "scaled_dot_product_attention",
      "_scaled_dot_product_flash_attention",
      "_scaled_dot_product_efficient_attention",
      "_scaled_dot_product_cudnn_attention",
      "_flash_attention_forward",
      "_efficient_attention_forward",
      "flash_attn_func"};
  static constexpr std::array<std::string_view, 6> kConv = {
      "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "cudnn_convolution"};
  static constexpr std::array<std::string_view, 9> kNorm = {
      "native_layer_norm", "layer_norm",        "native_group_norm", "group_norm", "rms_norm",
      "_fused_rms_norm",   "native_batch_norm", "cudnn_batch_norm",  "batch_norm"};
  static constexpr std::array<std::string_view, 5> kSoftmax = {
      "_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"};
  static constexpr std::array<std::string_view, 6> kCopy = {"copy_",      "_to_copy", "clone",
                                                            "contiguous", "cat",      "to"};
  static constexpr std::array<std::string_view, 40> kElem = {
      "add",  "add_",  "sub",   "sub_",   "mul",   "mul_",  "div",          "div_",
      "neg",  "exp",   "log",   "pow",    "sqrt",  "rsqrt", "sigmoid",      "tanh",
      "relu", "relu_", "gelu",  "silu",   "silu_", "elu",   "abs",          "sin",
      "cos",  "where", "clamp", "clamp_", "fill_", "zero_", "masked_fill_", "masked_fill",
      "eq",   "ne",    "lt",    "gt",     "le",    "ge",    "maximum",      "minimum"};
  auto in = [&](const auto& set) { return std::find(set.begin(), set.end(), n) != set.end(); };
  if (in(kGemm)) return OpFamily::Gemm;
  if (in(kAttn)) return OpFamily::Attention;
  if (in(kConv)) return OpFamily::Conv;
  if (in(kNorm)) return OpFamily::Norm;
  if (in(kSoftmax)) return OpFamily::Softmax;
  if (in(kCopy)) return OpFamily::Copy;
  if (in(kElem)) return OpFamily::Elementwise;
  return OpFamily::Other;
}

bool parse_op_inputs(std::string_view dims_json, std::string_view types_json,
                     std::string_view concrete_json, std::vector<OpInput>* out) {
  out->clear();
  if (dims_json.empty()) return false;
  auto d = nlohmann::json::parse(dims_json, nullptr, false);
  if (!d.is_array()) return false;
  auto t = nlohmann::json::parse(types_json.empty() ? std::string_view("[]") : types_json, nullptr,
                                 false);
  auto c = nlohmann::json::parse(concrete_json.empty() ? std::string_view("[]") : concrete_json,
                                 nullptr, false);
  for (size_t i = 0; i < d.size(); ++i) {
    OpInput x;
    const auto& di = d[i];
    if (!di.is_array()) return out->clear(), false;
    for (const auto& e : di) {
      if (e.is_number_integer()) {
        x.dims.push_back(e.get<int64_t>());
      } else if (e.is_array()) {  // a tensor list: [[2, 3], [2, 3]]
        x.is_list = true;
        Dims one;
        for (const auto& v : e)
          if (v.is_number_integer()) one.push_back(v.get<int64_t>());
        x.list.push_back(std::move(one));
      }
    }
    if (x.is_list) x.dims.clear();
    for (int64_t v : x.dims)
      if (v < 0) return out->clear(), false;
    if (t.is_array() && i < t.size() && t[i].is_string()) x.type = t[i].get<std::string>();
    if (c.is_array() && i < c.size() && c[i].is_string()) x.concrete = c[i].get<std::string>();
    out->push_back(std::move(x));
  }
  return true;
}

int64_t dtype_bytes_of(std::string_view t) {
  if (starts_with(t, "c10::")) t.remove_prefix(5);
  static const std::pair<std::string_view, int64_t> kSizes[] = {{"float", 4},
                                                                {"double", 8},
                                                                {"BFloat16", 2},
                                                                {"Half", 2},
                                                                {"long int", 8},
                                                                {"int", 4},
                                                                {"short int", 2},
                                                                {"bool", 1},
                                                                {"unsigned char", 1},
                                                                {"signed char", 1},
                                                                {"Float8_e4m3fn", 1},
                                                                {"Float8_e5m2", 1},
                                                                {"Float8_e4m3fnuz", 1},
                                                                {"Float8_e5m2fnuz", 1},
                                                                {"long", 8},
                                                                {"char", 1}};
  for (const auto& [n, s] : kSizes)
    if (t == n) return s;
  return -1;
}

std::string dtype_class(std::string_view t) {
  if (starts_with(t, "c10::")) t.remove_prefix(5);
  if (t == "float") return "fp32";
  if (t == "double") return "fp64";
  if (t == "BFloat16") return "bf16";
  if (t == "Half") return "fp16";
  if (starts_with(t, "Float8")) return "fp8";
  if (t == "signed char" || t == "char" || t == "unsigned char") return "int8";
  return "";
}

OpWork op_work(std::string_view op, const std::vector<OpInput>& in) {
  const OpFamily f = op_family(op);
  if (in.empty()) return unknown(f, "no shapes recorded");
  const std::string_view n = base_name(op);
  // A malformed shape list (wrong arity, strings where ints belong) gives "unexpected shapes",
  // never an exception: the trace is data, not trusted input.
  switch (f) {
    case OpFamily::Gemm:
      return gemm(n, in);
    case OpFamily::Attention:
      return attention(n, in);
    case OpFamily::Conv:
      return convolution(n, in);
    case OpFamily::Elementwise:
    case OpFamily::Norm:
    case OpFamily::Softmax:
    case OpFamily::Copy:
      return streaming(f, n, in);
    case OpFamily::Other:
      break;
  }
  return unknown(f, "no formula for this op");
}

}  // namespace kernalyse
