// A test oracle for hipDNN's serialized Graph, built from flatc's C++ output for hipDNN's
// UNMODIFIED schemas and a FlatBuffers C++ runtime of the same version (see tests/wire/cpp_oracle.py).
//
//   wire_checker read FILE   verify FILE as hipDNN does (flatbuffers::Verifier, default options,
//                            no identifier; an "HDGP" container is verified with its identifier
//                            and its graph_blob read from a fresh copy) and print every field of
//                            the graph, its tensors and its modelled nodes as one JSON object: strings
//                            as hex of their bytes, floats as their binary32 bits, TensorValue
//                            structs as hex of their bytes, null for absent optionals.
//   wire_checker pack IN OUT read a description (whitespace-separated "key value" tokens, written
//                            by tests/wire/cpp_oracle.py) into the generated object API (GraphT)
//                            and write Finish(Graph::Pack(builder, graphT)) to OUT, as hipDNN's
//                            backend writes every graph; with a leading "hdgp" token, wrap it in
//                            an HDGP container as hipDNN's SerializedGraphContainer does.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "graph_generated.h"
#include "serialized_graph_and_plan_generated.h"

namespace fo = hipdnn_flatbuffers_sdk::data_objects;

// Each SDPA table field once, by kind:
// REQ long | OPTI optional integer | OBOOL optional bool | BOOL bool | OFLOAT optional float |
// ENUM int8 enum | STR string.
#define SDPA_FWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                              \
  REQ(q_tensor_uid) REQ(k_tensor_uid) REQ(v_tensor_uid) REQ(o_tensor_uid)                       \
  OPTI(attn_mask_tensor_uid) OPTI(scale_tensor_uid) OPTI(seq_len_q_tensor_uid)                  \
  OPTI(seq_len_kv_tensor_uid) OPTI(seed_tensor_uid) OPTI(offset_tensor_uid)                     \
  OPTI(dropout_mask_tensor_uid) OPTI(dropout_scale_tensor_uid) OPTI(page_table_k_tensor_uid)    \
  OPTI(page_table_v_tensor_uid) OPTI(block_mask_tensor_uid) OPTI(sink_token_tensor_uid)         \
  OPTI(descale_q_tensor_uid) OPTI(descale_k_tensor_uid) OPTI(descale_v_tensor_uid)              \
  OPTI(descale_s_tensor_uid) OPTI(scale_s_tensor_uid) OPTI(scale_o_tensor_uid)                  \
  OPTI(stats_tensor_uid) OPTI(max_tensor_uid) OPTI(sum_exp_tensor_uid)                          \
  OPTI(rng_dump_tensor_uid) OPTI(amax_s_tensor_uid) OPTI(amax_o_tensor_uid)                     \
  OBOOL(generate_stats) BOOL(alibi_mask) BOOL(padding_mask) BOOL(causal_mask)                   \
  BOOL(causal_mask_bottom_right) OFLOAT(dropout_probability) OFLOAT(attn_scale_value)           \
  OPTI(left_bound) OPTI(right_bound) OPTI(max_seq_len_kv) ENUM(diagonal_alignment)              \
  ENUM(mma_core_mode) ENUM(implementation) STR(umd_flops) STR(umd_bytes)

#define SDPA_BWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                              \
  REQ(q_tensor_uid) REQ(k_tensor_uid) REQ(v_tensor_uid) REQ(o_tensor_uid) REQ(do_tensor_uid)    \
  REQ(stats_tensor_uid) REQ(dq_tensor_uid) REQ(dk_tensor_uid) REQ(dv_tensor_uid)                \
  OPTI(scale_tensor_uid) OPTI(attn_mask_tensor_uid) OPTI(seq_len_q_tensor_uid)                  \
  OPTI(seq_len_kv_tensor_uid) OPTI(seed_tensor_uid) OPTI(offset_tensor_uid)                     \
  OPTI(dropout_mask_tensor_uid) OPTI(dropout_scale_tensor_uid)                                  \
  OPTI(dropout_scale_inv_tensor_uid) OPTI(dbias_tensor_uid) BOOL(alibi_mask)                    \
  BOOL(padding_mask) BOOL(causal_mask) BOOL(causal_mask_bottom_right)                           \
  OFLOAT(dropout_probability) OFLOAT(attn_scale_value) OPTI(left_bound) OPTI(right_bound)       \
  ENUM(diagonal_alignment)

// PointwiseAttributes (hipDNN's pointwise_attributes.fbs).
#define POINTWISE_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                             \
  ENUM(operation) OFLOAT(relu_lower_clip) OFLOAT(relu_upper_clip)                               \
  OFLOAT(relu_lower_clip_slope) OPTI(axis_tensor_uid) REQ(in_0_tensor_uid)                      \
  OPTI(in_1_tensor_uid) OPTI(in_2_tensor_uid) REQ(out_0_tensor_uid) OFLOAT(swish_beta)          \
  OFLOAT(elu_alpha) OFLOAT(softplus_beta)

// MatmulAttributes (hipDNN's matmul_attributes.fbs).
// ReductionAttributes (hipDNN's reduction_attributes.fbs).
#define REDUCTION_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                             \
  ENUM(mode) REQ(in_tensor_uid) REQ(out_tensor_uid) BOOL(is_deterministic)

// RMSNormAttributes (hipDNN's rmsnorm_attributes.fbs).
#define RMSNORM_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                               \
  REQ(x_tensor_uid) REQ(scale_tensor_uid) REQ(epsilon_tensor_uid) REQ(y_tensor_uid)              \
  OPTI(bias_tensor_uid) OPTI(inv_rms_tensor_uid) ENUM(forward_phase)

// LayernormAttributes (hipDNN's layernorm_attributes.fbs).
#define LAYERNORM_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                             \
  REQ(x_tensor_uid) REQ(scale_tensor_uid) REQ(bias_tensor_uid) REQ(epsilon_tensor_uid)           \
  REQ(y_tensor_uid) REQ(normalized_dim_count) OPTI(mean_tensor_uid)                              \
  OPTI(inv_variance_tensor_uid) ENUM(forward_phase)

// BatchnormAttributes (hipDNN's batchnorm_attributes.fbs); VEC a
// vector of int64.
#define BATCHNORM_FIELDS(REQ, OPTI, VEC)                                                        \
  REQ(x_tensor_uid) REQ(scale_tensor_uid) REQ(bias_tensor_uid) REQ(epsilon_tensor_uid)           \
  VEC(peer_stats_tensor_uid) OPTI(prev_running_mean_tensor_uid)                                  \
  OPTI(prev_running_variance_tensor_uid) OPTI(momentum_tensor_uid) REQ(y_tensor_uid)            \
  OPTI(mean_tensor_uid) OPTI(inv_variance_tensor_uid) OPTI(next_running_mean_tensor_uid)         \
  OPTI(next_running_variance_tensor_uid)

// BatchnormInferenceAttributes (batchnorm_inference_attributes.fbs).
#define BATCHNORM_INFERENCE_FIELDS(REQ)                                                         \
  REQ(x_tensor_uid) REQ(mean_tensor_uid) REQ(inv_variance_tensor_uid) REQ(scale_tensor_uid)      \
  REQ(bias_tensor_uid) REQ(y_tensor_uid)

// BatchnormInferenceAttributesVarianceExt.
#define BATCHNORM_INFERENCE_VARIANCE_FIELDS(REQ)                                                \
  REQ(x_tensor_uid) REQ(mean_tensor_uid) REQ(variance_tensor_uid) REQ(scale_tensor_uid)          \
  REQ(bias_tensor_uid) REQ(y_tensor_uid) REQ(epsilon_tensor_uid)

// BatchnormBackwardAttributes; VEC a vector of int64.
#define BATCHNORM_BACKWARD_FIELDS(REQ, OPTI, VEC)                                               \
  REQ(dy_tensor_uid) REQ(x_tensor_uid) OPTI(mean_tensor_uid) OPTI(inv_variance_tensor_uid)       \
  REQ(scale_tensor_uid) VEC(peer_stats_tensor_uid) REQ(dx_tensor_uid) REQ(dscale_tensor_uid)     \
  REQ(dbias_tensor_uid)

// LayernormBackwardAttributes and RMSNormBackwardAttributes.
#define LAYERNORM_BACKWARD_FIELDS(REQ, OPTI)                                                    \
  REQ(dy_tensor_uid) REQ(x_tensor_uid) REQ(scale_tensor_uid) OPTI(mean_tensor_uid)              \
  OPTI(inv_variance_tensor_uid) OPTI(epsilon_tensor_uid) REQ(dx_tensor_uid)                     \
  REQ(dscale_tensor_uid) REQ(dbias_tensor_uid) REQ(normalized_dim_count)
#define RMSNORM_BACKWARD_FIELDS(REQ, OPTI)                                                      \
  REQ(dy_tensor_uid) REQ(x_tensor_uid) REQ(scale_tensor_uid) REQ(inv_rms_tensor_uid)            \
  REQ(dx_tensor_uid) REQ(dscale_tensor_uid) OPTI(dbias_tensor_uid)

// ConvolutionFwdAttributes (hipDNN's convolution_fwd_attributes.fbs; ConvMode from hipDNN's
// convolution_common.fbs). The vectors are listed apart.
#define CONV_FWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                              \
  REQ(x_tensor_uid) REQ(w_tensor_uid) REQ(y_tensor_uid) ENUM(conv_mode) STR(umd_flops)          \
  STR(umd_bytes)
#define CONV_VECTORS(V) V(pre_padding) V(post_padding) V(stride) V(dilation)
// ConvolutionBwdAttributes and ConvolutionWrwAttributes (hipDNN's schemas): the same members.
#define CONV_BWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                              \
  REQ(dy_tensor_uid) REQ(w_tensor_uid) REQ(dx_tensor_uid) ENUM(conv_mode) STR(umd_flops)        \
  STR(umd_bytes)
#define CONV_WRW_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                              \
  REQ(x_tensor_uid) REQ(dy_tensor_uid) REQ(dw_tensor_uid) ENUM(conv_mode) STR(umd_flops)        \
  STR(umd_bytes)

// ResampleFwdAttributes (hipDNN's resample_fwd_attributes.fbs, generate_index optional as its
// forks declare it: schema_copies.py) and ResampleBwdAttributes (resample_bwd_attributes.fbs);
// their enums from resample_common.fbs. The vectors are listed apart.
#define RESAMPLE_FWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                          \
  REQ(x_tensor_uid) REQ(y_tensor_uid) OPTI(index_tensor_uid) ENUM(resample_mode)                \
  ENUM(padding_mode) OBOOL(generate_index)
#define RESAMPLE_BWD_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                          \
  REQ(dy_tensor_uid) REQ(dx_tensor_uid) OPTI(index_tensor_uid) ENUM(resample_mode)              \
  ENUM(padding_mode)
#define RESAMPLE_VECTORS(V) V(pre_padding) V(post_padding) V(stride) V(window)
// BlockScaleQuantizeAttributes and BlockScaleDequantizeAttributes; block_size
// an int32 (REQ) and a vector of int32 (IVEC).
#define BLOCK_SCALE_QUANTIZE_FIELDS(REQ, OPTI, BOOL)                                             \
  REQ(x_tensor_uid) REQ(y_tensor_uid) REQ(scale_tensor_uid) REQ(block_size) OPTI(axis)          \
  BOOL(transpose)
#define BLOCK_SCALE_DEQUANTIZE_FIELDS(REQ, IVEC, BOOL)                                           \
  REQ(x_tensor_uid) REQ(scale_tensor_uid) REQ(y_tensor_uid) IVEC(block_size)                    \
  BOOL(is_negative_scale)

// MoeGroupedMatmulAttributes and MoeGroupedMatmulBwdAttributes (hipDNN's schemas); top_k, an
// int32, is printed and set as ENUM fields are (an integer).
#define MOE_FIELDS(REQ, OPTI, ENUM)                                                             \
  REQ(token_tensor_uid) REQ(weight_tensor_uid) REQ(first_token_offset_tensor_uid)                \
  OPTI(token_index_tensor_uid) OPTI(token_ks_tensor_uid) REQ(output_tensor_uid) ENUM(mode)       \
  ENUM(top_k)
#define MOE_BWD_FIELDS(REQ)                                                                     \
  REQ(doutput_tensor_uid) REQ(token_tensor_uid) REQ(first_token_offset_tensor_uid)               \
  REQ(dweight_tensor_uid)

// CustomOpAttributes (hipDNN's custom_op_attributes.fbs): VEC a vector of int64, BYTES a vector
// of ubyte; test_generation_marker, an int32, as ENUM fields are.
#define CUSTOM_OP_FIELDS(ENUM, STR, VEC, BYTES)                                                 \
  STR(custom_op_id) VEC(input_tensor_uids) VEC(output_tensor_uids) BYTES(data)                   \
  ENUM(test_generation_marker)

#define MATMUL_FIELDS(REQ, OPTI, OBOOL, BOOL, OFLOAT, ENUM, STR)                                \
  REQ(a_tensor_uid) REQ(b_tensor_uid) REQ(c_tensor_uid) STR(umd_flops) STR(umd_bytes)

#define NONE_(x)

// ----- output: one JSON object -----
namespace {

std::string hex(const uint8_t *p, size_t n) {
  static const char *d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

struct Out {
  std::ostringstream s;
  bool first = true;
  void key(const char *k) {
    if (!first) s << ',';
    first = false;
    s << '"' << k << "\":";
  }
  void open(char c) {
    s << c;
    first = true;
  }
  void close(char c) {
    s << c;
    first = false;
  }
  void null() { s << "null"; }
  void i64(int64_t v) { s << v; }
  void b(bool v) { s << (v ? "true" : "false"); }
  void str(const flatbuffers::String *v) {
    if (v == nullptr) {
      null();
    } else {
      s << '"' << hex(reinterpret_cast<const uint8_t *>(v->data()), v->size()) << '"';
    }
  }
  void f32bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    s << u;
  }
  template <class T>
  void opt(const flatbuffers::Optional<T> &v) {
    if (v.has_value()) {
      s << static_cast<int64_t>(*v);
    } else {
      null();
    }
  }
  void optb(const flatbuffers::Optional<bool> &v) {
    if (v.has_value()) {
      b(*v);
    } else {
      null();
    }
  }
  void optf(const flatbuffers::Optional<float> &v) {
    if (v.has_value()) {
      f32bits(*v);
    } else {
      null();
    }
  }
  void bytes(const flatbuffers::Vector<uint8_t> *v) {
    if (v == nullptr) {
      null();
      return;
    }
    s << '[';
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i)
      s << (i ? "," : "") << static_cast<int>(v->Get(i));
    s << ']';
  }
  template <class V>
  void longs(const V *v) {
    if (v == nullptr) {
      null();
      return;
    }
    s << '[';
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) s << (i ? "," : "") << v->Get(i);
    s << ']';
  }
};

#define P_REQ(x) o.key(#x); o.i64(a->x());
#define P_OPTI(x) o.key(#x); o.opt(a->x());
#define P_OBOOL(x) o.key(#x); o.optb(a->x());
#define P_BOOL(x) o.key(#x); o.b(a->x());
#define P_OFLOAT(x) o.key(#x); o.optf(a->x());
#define P_ENUM(x) o.key(#x); o.i64(static_cast<int64_t>(a->x()));
#define P_STR(x) o.key(#x); o.str(a->x());
#define P_VEC(x) o.key(#x); o.longs(a->x());

void print_fwd(Out &o, const fo::SdpaAttributes *a) {
  o.open('{');
  SDPA_FWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_bwd(Out &o, const fo::SdpaBackwardAttributes *a) {
  o.open('{');
  SDPA_BWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_pointwise(Out &o, const fo::PointwiseAttributes *a) {
  o.open('{');
  POINTWISE_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_reduction(Out &o, const fo::ReductionAttributes *a) {
  o.open('{');
  REDUCTION_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_rmsnorm(Out &o, const fo::RMSNormAttributes *a) {
  o.open('{');
  RMSNORM_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_layernorm(Out &o, const fo::LayernormAttributes *a) {
  o.open('{');
  LAYERNORM_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

void print_batchnorm(Out &o, const fo::BatchnormAttributes *a) {
  o.open('{');
  BATCHNORM_FIELDS(P_REQ, P_OPTI, P_VEC)
  o.close('}');
}

void print_batchnorm_inference(Out &o, const fo::BatchnormInferenceAttributes *a) {
  o.open('{');
  BATCHNORM_INFERENCE_FIELDS(P_REQ)
  o.close('}');
}

void print_batchnorm_inference_variance(Out &o,
                                        const fo::BatchnormInferenceAttributesVarianceExt *a) {
  o.open('{');
  BATCHNORM_INFERENCE_VARIANCE_FIELDS(P_REQ)
  o.close('}');
}

void print_layernorm_backward(Out &o, const fo::LayernormBackwardAttributes *a) {
  o.open('{');
  LAYERNORM_BACKWARD_FIELDS(P_REQ, P_OPTI)
  o.close('}');
}

void print_rmsnorm_backward(Out &o, const fo::RMSNormBackwardAttributes *a) {
  o.open('{');
  RMSNORM_BACKWARD_FIELDS(P_REQ, P_OPTI)
  o.close('}');
}

void print_batchnorm_backward(Out &o, const fo::BatchnormBackwardAttributes *a) {
  o.open('{');
  BATCHNORM_BACKWARD_FIELDS(P_REQ, P_OPTI, P_VEC)
  o.close('}');
}

#define P_LONGS(x) o.key(#x); o.longs(a->x());

void print_conv_fwd(Out &o, const fo::ConvolutionFwdAttributes *a) {
  o.open('{');
  CONV_FWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  CONV_VECTORS(P_LONGS)
  o.close('}');
}

void print_conv_bwd(Out &o, const fo::ConvolutionBwdAttributes *a) {
  o.open('{');
  CONV_BWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  CONV_VECTORS(P_LONGS)
  o.close('}');
}

void print_conv_wrw(Out &o, const fo::ConvolutionWrwAttributes *a) {
  o.open('{');
  CONV_WRW_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  CONV_VECTORS(P_LONGS)
  o.close('}');
}

void print_resample_fwd(Out &o, const fo::ResampleFwdAttributes *a) {
  o.open('{');
  RESAMPLE_FWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  RESAMPLE_VECTORS(P_LONGS)
  o.close('}');
}

void print_resample_bwd(Out &o, const fo::ResampleBwdAttributes *a) {
  o.open('{');
  RESAMPLE_BWD_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  RESAMPLE_VECTORS(P_LONGS)
  o.close('}');
}

void print_block_scale_quantize(Out &o, const fo::BlockScaleQuantizeAttributes *a) {
  o.open('{');
  BLOCK_SCALE_QUANTIZE_FIELDS(P_REQ, P_OPTI, P_BOOL)
  o.close('}');
}

void print_block_scale_dequantize(Out &o, const fo::BlockScaleDequantizeAttributes *a) {
  o.open('{');
  BLOCK_SCALE_DEQUANTIZE_FIELDS(P_REQ, P_VEC, P_BOOL)
  o.close('}');
}

void print_matmul(Out &o, const fo::MatmulAttributes *a) {
  o.open('{');
  MATMUL_FIELDS(P_REQ, P_OPTI, P_OBOOL, P_BOOL, P_OFLOAT, P_ENUM, P_STR)
  o.close('}');
}

#define P_BYTES(x) o.key(#x); o.bytes(a->x());
void print_custom_op(Out &o, const fo::CustomOpAttributes *a) {
  o.open('{');
  CUSTOM_OP_FIELDS(P_ENUM, P_STR, P_VEC, P_BYTES)
  o.close('}');
}

void print_moe(Out &o, const fo::MoeGroupedMatmulAttributes *a) {
  o.open('{');
  MOE_FIELDS(P_REQ, P_OPTI, P_ENUM)
  o.close('}');
}

void print_moe_bwd(Out &o, const fo::MoeGroupedMatmulBwdAttributes *a) {
  o.open('{');
  MOE_BWD_FIELDS(P_REQ)
  o.close('}');
}

size_t value_size(fo::TensorValue t) {
  switch (t) {
    case fo::TensorValue::Float32Value: return sizeof(fo::Float32Value);
    case fo::TensorValue::Float16Value: return sizeof(fo::Float16Value);
    case fo::TensorValue::BFloat16Value: return sizeof(fo::BFloat16Value);
    case fo::TensorValue::Float8Value: return sizeof(fo::Float8Value);
    case fo::TensorValue::Int32Value: return sizeof(fo::Int32Value);
    case fo::TensorValue::Float64Value: return sizeof(fo::Float64Value);
    case fo::TensorValue::Int64Value: return sizeof(fo::Int64Value);
    case fo::TensorValue::BoolValue: return sizeof(fo::BoolValue);
    default: return 0;
  }
}

void print_tensor(Out &o, const fo::TensorAttributes *t) {
  o.open('{');
  o.key("uid"); o.i64(t->uid());
  o.key("name"); o.str(t->name());
  o.key("data_type"); o.i64(static_cast<int64_t>(t->data_type()));
  o.key("strides"); o.longs(t->strides());
  o.key("dims"); o.longs(t->dims());
  o.key("virtual"); o.b(t->virtual_());
  o.key("value_type"); o.i64(static_cast<int64_t>(t->value_type()));
  o.key("value");
  const void *v = t->value();
  size_t n = value_size(t->value_type());
  if (v == nullptr || n == 0) {
    o.null();
  } else {  // the struct's bytes, as the generated accessor (value_as_*) sees them
    o.s << '"' << hex(static_cast<const uint8_t *>(v), n) << '"';
  }
  o.key("is_runtime_pass_by_value"); o.b(t->is_runtime_pass_by_value());
  o.key("ragged_offset_tensor_uid"); o.opt(t->ragged_offset_tensor_uid());
  o.key("alignment"); o.i64(t->alignment());
  o.key("ragged_offset_multiplier"); o.i64(t->ragged_offset_multiplier());
  o.close('}');
}

void print_graph(Out &o, const uint8_t *buf, size_t len) {
  flatbuffers::Verifier verifier(buf, len);  // default options: check_alignment on
  bool ok = fo::VerifyGraphBuffer(verifier);
  o.open('{');
  o.key("verified"); o.b(ok);
  if (ok) {
    const fo::Graph *g = fo::GetGraph(buf);
    o.key("name"); o.str(g->name());
    o.key("compute_data_type"); o.i64(static_cast<int64_t>(g->compute_data_type()));
    o.key("intermediate_data_type"); o.i64(static_cast<int64_t>(g->intermediate_data_type()));
    o.key("io_data_type"); o.i64(static_cast<int64_t>(g->io_data_type()));
    o.key("preferred_engine_id"); o.opt(g->preferred_engine_id());
    o.key("is_override_shape_enabled"); o.b(g->is_override_shape_enabled());
    o.key("min_required_engine_api_version");
    if (const fo::EngineApiVersion *e = g->min_required_engine_api_version()) {
      o.s << '[' << e->major() << ',' << e->minor() << ',' << e->patch() << ']';
    } else {
      o.null();
    }
    o.key("id");
    if (const fo::Uuid *id = g->id()) {
      o.s << '"' << hex(id->bytes()->Data(), 16) << '"';
    } else {
      o.null();
    }
    o.key("tensors");
    if (g->tensors() == nullptr) {
      o.null();
    } else {
      o.open('[');
      for (const fo::TensorAttributes *t : *g->tensors()) {
        if (!o.first) o.s << ',';
        o.first = false;
        print_tensor(o, t);
      }
      o.close(']');
    }
    o.key("nodes");
    if (g->nodes() == nullptr) {
      o.null();
    } else {
      o.open('[');
      for (const fo::Node *n : *g->nodes()) {
        if (!o.first) o.s << ',';
        o.first = false;
        o.open('{');
        o.key("name"); o.str(n->name());
        o.key("compute_data_type"); o.i64(static_cast<int64_t>(n->compute_data_type()));
        o.key("attributes_type"); o.i64(static_cast<int64_t>(n->attributes_type()));
        o.key("has_attributes"); o.b(n->attributes() != nullptr);
        o.key("attributes");
        if (const fo::SdpaAttributes *a = n->attributes_as_SdpaAttributes()) {
          print_fwd(o, a);
        } else if (const fo::SdpaBackwardAttributes *a = n->attributes_as_SdpaBackwardAttributes()) {
          print_bwd(o, a);
        } else if (const fo::PointwiseAttributes *a = n->attributes_as_PointwiseAttributes()) {
          print_pointwise(o, a);
        } else if (const fo::MatmulAttributes *a = n->attributes_as_MatmulAttributes()) {
          print_matmul(o, a);
        } else if (const fo::CustomOpAttributes *a = n->attributes_as_CustomOpAttributes()) {
          print_custom_op(o, a);
        } else if (const fo::MoeGroupedMatmulAttributes *a =
                       n->attributes_as_MoeGroupedMatmulAttributes()) {
          print_moe(o, a);
        } else if (const fo::MoeGroupedMatmulBwdAttributes *a =
                       n->attributes_as_MoeGroupedMatmulBwdAttributes()) {
          print_moe_bwd(o, a);
        } else if (const fo::ReductionAttributes *a = n->attributes_as_ReductionAttributes()) {
          print_reduction(o, a);
        } else if (const fo::RMSNormAttributes *a = n->attributes_as_RMSNormAttributes()) {
          print_rmsnorm(o, a);
        } else if (const fo::LayernormAttributes *a = n->attributes_as_LayernormAttributes()) {
          print_layernorm(o, a);
        } else if (const fo::BatchnormAttributes *a = n->attributes_as_BatchnormAttributes()) {
          print_batchnorm(o, a);
        } else if (const fo::BatchnormBackwardAttributes *a =
                       n->attributes_as_BatchnormBackwardAttributes()) {
          print_batchnorm_backward(o, a);
        } else if (const fo::BlockScaleQuantizeAttributes *a =
                       n->attributes_as_BlockScaleQuantizeAttributes()) {
          print_block_scale_quantize(o, a);
        } else if (const fo::BlockScaleDequantizeAttributes *a =
                       n->attributes_as_BlockScaleDequantizeAttributes()) {
          print_block_scale_dequantize(o, a);
        } else if (const fo::BatchnormInferenceAttributes *a =
                       n->attributes_as_BatchnormInferenceAttributes()) {
          print_batchnorm_inference(o, a);
        } else if (const fo::LayernormBackwardAttributes *a =
                       n->attributes_as_LayernormBackwardAttributes()) {
          print_layernorm_backward(o, a);
        } else if (const fo::RMSNormBackwardAttributes *a =
                       n->attributes_as_RMSNormBackwardAttributes()) {
          print_rmsnorm_backward(o, a);
        } else if (const fo::BatchnormInferenceAttributesVarianceExt *a =
                       n->attributes_as_BatchnormInferenceAttributesVarianceExt()) {
          print_batchnorm_inference_variance(o, a);
        } else if (const fo::ResampleFwdAttributes *a =
                       n->attributes_as_ResampleFwdAttributes()) {
          print_resample_fwd(o, a);
        } else if (const fo::ResampleBwdAttributes *a =
                       n->attributes_as_ResampleBwdAttributes()) {
          print_resample_bwd(o, a);
        } else if (const fo::ConvolutionFwdAttributes *a =
                       n->attributes_as_ConvolutionFwdAttributes()) {
          print_conv_fwd(o, a);
        } else if (const fo::ConvolutionBwdAttributes *a =
                       n->attributes_as_ConvolutionBwdAttributes()) {
          print_conv_bwd(o, a);
        } else if (const fo::ConvolutionWrwAttributes *a =
                       n->attributes_as_ConvolutionWrwAttributes()) {
          print_conv_wrw(o, a);
        } else {
          o.null();
        }
        o.close('}');
      }
      o.close(']');
    }
  }
  o.close('}');
}

std::vector<uint8_t> read_file(const char *path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

int do_read(const char *path) {
  std::vector<uint8_t> data = read_file(path);  // heap memory: aligned for any scalar
  Out o;
  if (data.size() >= 8 && std::memcmp(data.data() + 4, "HDGP", 4) == 0) {
    flatbuffers::Verifier verifier(data.data(), data.size());
    bool ok = fo::VerifySerializedGraphAndPlanBuffer(verifier);
    o.open('{');
    o.key("container"); o.b(true);
    o.key("verified"); o.b(ok);
    if (ok) {
      const fo::SerializedGraphAndPlan *c = fo::GetSerializedGraphAndPlan(data.data());
      o.key("plan_blob");
      if (c->plan_blob() == nullptr) {
        o.null();
      } else {
        o.s << '"' << hex(c->plan_blob()->data(), c->plan_blob()->size()) << '"';
      }
      o.key("graph");
      if (c->graph_blob() == nullptr) {
        o.null();
      } else {  // a fresh buffer: offsets and alignment count from its byte 0
        std::vector<uint8_t> inner(c->graph_blob()->begin(), c->graph_blob()->end());
        print_graph(o, inner.data(), inner.size());
      }
    }
    o.close('}');
  } else {
    print_graph(o, data.data(), data.size());
  }
  std::cout << o.s.str() << std::endl;
  return 0;
}

// ----- input: "key value" tokens -----
std::string unhex(const std::string &tok) {  // "-" (absent) or "s:<hex>"
  std::string s;
  if (tok == "-") return s;
  if (tok.compare(0, 2, "s:") != 0) throw std::runtime_error("bad string token " + tok);
  for (size_t i = 2; i + 1 < tok.size(); i += 2) {
    s += static_cast<char>(std::stoul(tok.substr(i, 2), nullptr, 16));
  }
  return s;
}

int64_t to_i64(const std::string &tok) { return static_cast<int64_t>(std::stoll(tok)); }

float to_f32(const std::string &tok) {
  uint32_t u = static_cast<uint32_t>(std::stoul(tok));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
void set_opt(flatbuffers::Optional<T> &field, const std::string &tok) {
  if (tok == "-") {
    field = flatbuffers::nullopt;
  } else {
    field = static_cast<T>(to_i64(tok));
  }
}

void set_optf(flatbuffers::Optional<float> &field, const std::string &tok) {
  if (tok == "-") {
    field = flatbuffers::nullopt;
  } else {
    field = to_f32(tok);
  }
}

std::vector<int64_t> longs(std::istream &in) {
  std::string n;
  in >> n;
  std::vector<int64_t> v;
  if (n == "-") return v;
  for (long i = 0, m = std::stol(n); i < m; ++i) {
    std::string e;
    in >> e;
    v.push_back(to_i64(e));
  }
  return v;
}

#define S_REQ(x) if (k == "a." #x) { a->x = to_i64(val); return true; }
#define S_OPTI(x) if (k == "a." #x) { set_opt(a->x, val); return true; }
#define S_OBOOL(x) if (k == "a." #x) { if (val == "-") a->x = flatbuffers::nullopt; else a->x = val == "1"; return true; }
#define S_BOOL(x) if (k == "a." #x) { a->x = val == "1"; return true; }
#define S_OFLOAT(x) if (k == "a." #x) { set_optf(a->x, val); return true; }
#define S_ENUM(x) if (k == "a." #x) { a->x = static_cast<decltype(a->x)>(to_i64(val)); return true; }
#define S_STR(x) if (k == "a." #x) { a->x = unhex(val); return true; }
#define S_VEC(x) if (k == "a." #x) { a->x = vec_token(val); return true; }

bool set_fwd(fo::SdpaAttributesT *a, const std::string &k, const std::string &val) {
  SDPA_FWD_FIELDS(S_REQ, S_OPTI, S_OBOOL, S_BOOL, S_OFLOAT, S_ENUM, S_STR)
  return false;
}

bool set_bwd(fo::SdpaBackwardAttributesT *a, const std::string &k, const std::string &val) {
  SDPA_BWD_FIELDS(S_REQ, S_OPTI, NONE_, S_BOOL, S_OFLOAT, S_ENUM, S_STR)
  return false;
}

bool set_pointwise(fo::PointwiseAttributesT *a, const std::string &k, const std::string &val) {
  POINTWISE_FIELDS(S_REQ, S_OPTI, NONE_, NONE_, S_OFLOAT, S_ENUM, NONE_)
  return false;
}

bool set_reduction(fo::ReductionAttributesT *a, const std::string &k, const std::string &val) {
  REDUCTION_FIELDS(S_REQ, NONE_, NONE_, S_BOOL, NONE_, S_ENUM, NONE_)
  return false;
}

bool set_rmsnorm(fo::RMSNormAttributesT *a, const std::string &k, const std::string &val) {
  RMSNORM_FIELDS(S_REQ, S_OPTI, NONE_, NONE_, NONE_, S_ENUM, NONE_)
  return false;
}

bool set_layernorm(fo::LayernormAttributesT *a, const std::string &k, const std::string &val) {
  LAYERNORM_FIELDS(S_REQ, S_OPTI, NONE_, NONE_, NONE_, S_ENUM, NONE_)
  return false;
}

// A vector token: "v" then comma-separated int64 values ("v" alone: empty).
std::vector<int64_t> vec_token(const std::string &val) {
  std::vector<int64_t> v;
  std::stringstream in(val.substr(1));
  std::string e;
  while (std::getline(in, e, ',')) v.push_back(to_i64(e));
  return v;
}

bool set_batchnorm(fo::BatchnormAttributesT *a, const std::string &k, const std::string &val) {
  BATCHNORM_FIELDS(S_REQ, S_OPTI, S_VEC)
  return false;
}

bool set_batchnorm_inference(fo::BatchnormInferenceAttributesT *a, const std::string &k,
                             const std::string &val) {
  BATCHNORM_INFERENCE_FIELDS(S_REQ)
  return false;
}

bool set_batchnorm_inference_variance(fo::BatchnormInferenceAttributesVarianceExtT *a,
                                      const std::string &k, const std::string &val) {
  BATCHNORM_INFERENCE_VARIANCE_FIELDS(S_REQ)
  return false;
}

bool set_layernorm_backward(fo::LayernormBackwardAttributesT *a, const std::string &k,
                            const std::string &val) {
  LAYERNORM_BACKWARD_FIELDS(S_REQ, S_OPTI)
  return false;
}

bool set_rmsnorm_backward(fo::RMSNormBackwardAttributesT *a, const std::string &k,
                          const std::string &val) {
  RMSNORM_BACKWARD_FIELDS(S_REQ, S_OPTI)
  return false;
}

bool set_batchnorm_backward(fo::BatchnormBackwardAttributesT *a, const std::string &k,
                            const std::string &val) {
  BATCHNORM_BACKWARD_FIELDS(S_REQ, S_OPTI, S_VEC)
  return false;
}

bool set_conv_fwd(fo::ConvolutionFwdAttributesT *a, const std::string &k, const std::string &val) {
  CONV_FWD_FIELDS(S_REQ, NONE_, NONE_, NONE_, NONE_, S_ENUM, S_STR)
  return false;
}

bool set_conv_bwd(fo::ConvolutionBwdAttributesT *a, const std::string &k, const std::string &val) {
  CONV_BWD_FIELDS(S_REQ, NONE_, NONE_, NONE_, NONE_, S_ENUM, S_STR)
  return false;
}

bool set_conv_wrw(fo::ConvolutionWrwAttributesT *a, const std::string &k, const std::string &val) {
  CONV_WRW_FIELDS(S_REQ, NONE_, NONE_, NONE_, NONE_, S_ENUM, S_STR)
  return false;
}

// a vector member of a convolution table: "a.<field> <count> <values...>" or "a.<field> -"
#define S_LONGS(x) if (k == "a." #x) { a->x = longs(in); return true; }
template <class T>
bool set_conv_vector(T *a, const std::string &k, std::istream &in) {
  CONV_VECTORS(S_LONGS)
  return false;
}

bool set_resample_fwd(fo::ResampleFwdAttributesT *a, const std::string &k,
                      const std::string &val) {
  RESAMPLE_FWD_FIELDS(S_REQ, S_OPTI, S_OBOOL, NONE_, NONE_, S_ENUM, NONE_)
  return false;
}

bool set_resample_bwd(fo::ResampleBwdAttributesT *a, const std::string &k,
                      const std::string &val) {
  RESAMPLE_BWD_FIELDS(S_REQ, S_OPTI, NONE_, NONE_, NONE_, S_ENUM, NONE_)
  return false;
}

template <class T>
bool set_resample_vector(T *a, const std::string &k, std::istream &in) {
  RESAMPLE_VECTORS(S_LONGS)
  return false;
}

#define S_IVEC(x)                                                                                \
  if (k == "a." #x) {                                                                            \
    std::vector<int64_t> v = vec_token(val);                                                     \
    a->x.assign(v.begin(), v.end());                                                             \
    return true;                                                                                 \
  }

bool set_block_scale_quantize(fo::BlockScaleQuantizeAttributesT *a, const std::string &k,
                              const std::string &val) {
  BLOCK_SCALE_QUANTIZE_FIELDS(S_REQ, S_OPTI, S_BOOL)
  return false;
}

bool set_block_scale_dequantize(fo::BlockScaleDequantizeAttributesT *a, const std::string &k,
                                const std::string &val) {
  BLOCK_SCALE_DEQUANTIZE_FIELDS(S_REQ, S_IVEC, S_BOOL)
  return false;
}

bool set_matmul(fo::MatmulAttributesT *a, const std::string &k, const std::string &val) {
  MATMUL_FIELDS(S_REQ, NONE_, NONE_, NONE_, NONE_, NONE_, S_STR)
  return false;
}

#define S_BYTES(x) if (k == "a." #x) { a->x.clear(); for (int64_t v : vec_token(val)) a->x.push_back(static_cast<uint8_t>(v)); return true; }
bool set_custom_op(fo::CustomOpAttributesT *a, const std::string &k, const std::string &val) {
  CUSTOM_OP_FIELDS(S_ENUM, S_STR, S_VEC, S_BYTES)
  return false;
}

bool set_moe(fo::MoeGroupedMatmulAttributesT *a, const std::string &k, const std::string &val) {
  MOE_FIELDS(S_REQ, S_OPTI, S_ENUM)
  return false;
}

bool set_moe_bwd(fo::MoeGroupedMatmulBwdAttributesT *a, const std::string &k,
                 const std::string &val) {
  MOE_BWD_FIELDS(S_REQ)
  return false;
}

void set_value(fo::TensorValueUnion &u, int tag, const std::string &hexbytes) {
  std::string raw = unhex("s:" + hexbytes);
  auto put = [&](auto s) {
    if (raw.size() != sizeof(s)) throw std::runtime_error("bad value size");
    std::memcpy(&s, raw.data(), sizeof(s));  // structs are plain little-endian bytes
    u.Set(s);
  };
  switch (static_cast<fo::TensorValue>(tag)) {
    case fo::TensorValue::Float32Value: put(fo::Float32Value()); break;
    case fo::TensorValue::Float16Value: put(fo::Float16Value()); break;
    case fo::TensorValue::BFloat16Value: put(fo::BFloat16Value()); break;
    case fo::TensorValue::Float8Value: put(fo::Float8Value()); break;
    case fo::TensorValue::Int32Value: put(fo::Int32Value()); break;
    case fo::TensorValue::Float64Value: put(fo::Float64Value()); break;
    case fo::TensorValue::Int64Value: put(fo::Int64Value()); break;
    case fo::TensorValue::BoolValue: put(fo::BoolValue()); break;
    default: throw std::runtime_error("bad value tag");
  }
}

int do_pack(const char *in_path, const char *out_path) {
  std::ifstream in(in_path);
  fo::GraphT g;
  bool container = false;
  std::vector<uint8_t> plan;
  bool has_plan = false;
  std::string k, val;
  while (in >> k) {
    if (k == "hdgp") { container = true; continue; }
    if (k == "tensor") { g.tensors.emplace_back(new fo::TensorAttributesT()); continue; }
    if (k == "node") { g.nodes.emplace_back(new fo::NodeT()); continue; }
    if (k == "t.strides") { g.tensors.back()->strides = longs(in); continue; }
    if (k == "t.dims") { g.tensors.back()->dims = longs(in); continue; }
    if (k.compare(0, 2, "a.") == 0 && !g.nodes.empty()) {
      fo::NodeAttributesUnion &u = g.nodes.back()->attributes;
      if (fo::ConvolutionFwdAttributesT *a = u.AsConvolutionFwdAttributes())
        if (set_conv_vector(a, k, in)) continue;
      if (fo::ConvolutionBwdAttributesT *a = u.AsConvolutionBwdAttributes())
        if (set_conv_vector(a, k, in)) continue;
      if (fo::ConvolutionWrwAttributesT *a = u.AsConvolutionWrwAttributes())
        if (set_conv_vector(a, k, in)) continue;
      if (fo::ResampleFwdAttributesT *a = u.AsResampleFwdAttributes())
        if (set_resample_vector(a, k, in)) continue;
      if (fo::ResampleBwdAttributesT *a = u.AsResampleBwdAttributes())
        if (set_resample_vector(a, k, in)) continue;
    }
    if (!(in >> val)) throw std::runtime_error("missing value for " + k);
    if (k == "plan") {
      std::string raw = unhex(val);
      plan.assign(raw.begin(), raw.end());
      has_plan = true;
    } else if (k == "g.name") {
      g.name = unhex(val);
    } else if (k == "g.compute_data_type") {
      g.compute_data_type = static_cast<fo::DataType>(to_i64(val));
    } else if (k == "g.intermediate_data_type") {
      g.intermediate_data_type = static_cast<fo::DataType>(to_i64(val));
    } else if (k == "g.io_data_type") {
      g.io_data_type = static_cast<fo::DataType>(to_i64(val));
    } else if (k == "g.preferred_engine_id") {
      set_opt(g.preferred_engine_id, val);
    } else if (k == "g.is_override_shape_enabled") {
      g.is_override_shape_enabled = val == "1";
    } else if (k == "g.min_required_engine_api_version") {  // "major.minor.patch"
      unsigned a = 0, b = 0, c = 0;
      if (std::sscanf(val.c_str(), "%u.%u.%u", &a, &b, &c) != 3) throw std::runtime_error("version");
      g.min_required_engine_api_version.reset(new fo::EngineApiVersion(a, b, c));
    } else if (k == "g.id") {  // 32 hex digits
      std::string raw = unhex("s:" + val);
      if (raw.size() != 16) throw std::runtime_error("id");
      const uint8_t *bytes = reinterpret_cast<const uint8_t *>(raw.data());
      g.id.reset(new fo::Uuid(flatbuffers::span<const uint8_t, 16>(bytes, 16)));
    } else if (k.compare(0, 2, "t.") == 0) {
      fo::TensorAttributesT *t = g.tensors.back().get();
      if (k == "t.uid") t->uid = to_i64(val);
      else if (k == "t.name") t->name = unhex(val);
      else if (k == "t.data_type") t->data_type = static_cast<fo::DataType>(to_i64(val));
      else if (k == "t.virtual") t->virtual_ = val == "1";
      else if (k == "t.value") {  // "<tag>:<hex of the struct>"
        size_t colon = val.find(':');
        set_value(t->value, std::stoi(val.substr(0, colon)), val.substr(colon + 1));
      } else if (k == "t.is_runtime_pass_by_value") t->is_runtime_pass_by_value = val == "1";
      else if (k == "t.ragged_offset_tensor_uid") set_opt(t->ragged_offset_tensor_uid, val);
      else if (k == "t.alignment") t->alignment = to_i64(val);
      else if (k == "t.ragged_offset_multiplier") t->ragged_offset_multiplier = to_i64(val);
      else throw std::runtime_error("unknown key " + k);
    } else if (k == "n.name") {
      g.nodes.back()->name = unhex(val);
    } else if (k == "n.compute_data_type") {
      g.nodes.back()->compute_data_type = static_cast<fo::DataType>(to_i64(val));
    } else if (k == "n.kind") {  // 12 Sdpa, 15 SdpaBackward, 2 Pointwise, 9 Matmul, 10 RMSNorm, 11 Layernorm, 4 Batchnorm, 3 BatchnormBackward, 14 BlockScaleQuantize, 13 BlockScaleDequantize, 1 BatchnormInference, 8 BatchnormInferenceVarianceExt, 18 Reduction, 20 LayernormBackward, 17 RMSNormBackward, 16 CustomOp, 22/23 MoE,
      //                           19 ResampleFwd, 21 ResampleBwd
      fo::NodeAttributesUnion &u = g.nodes.back()->attributes;
      int tag = std::stoi(val);
      if (tag == 12) u.Set(fo::SdpaAttributesT());
      else if (tag == 15) u.Set(fo::SdpaBackwardAttributesT());
      else if (tag == 2) u.Set(fo::PointwiseAttributesT());
      else if (tag == 9) u.Set(fo::MatmulAttributesT());
      else if (tag == 18) u.Set(fo::ReductionAttributesT());
      else if (tag == 10) u.Set(fo::RMSNormAttributesT());
      else if (tag == 11) u.Set(fo::LayernormAttributesT());
      else if (tag == 4) u.Set(fo::BatchnormAttributesT());
      else if (tag == 3) u.Set(fo::BatchnormBackwardAttributesT());
      else if (tag == 14) u.Set(fo::BlockScaleQuantizeAttributesT());
      else if (tag == 13) u.Set(fo::BlockScaleDequantizeAttributesT());
      else if (tag == 1) u.Set(fo::BatchnormInferenceAttributesT());
      else if (tag == 8) u.Set(fo::BatchnormInferenceAttributesVarianceExtT());
      else if (tag == 5) u.Set(fo::ConvolutionFwdAttributesT());
      else if (tag == 6) u.Set(fo::ConvolutionBwdAttributesT());
      else if (tag == 7) u.Set(fo::ConvolutionWrwAttributesT());
      else if (tag == 20) u.Set(fo::LayernormBackwardAttributesT());
      else if (tag == 17) u.Set(fo::RMSNormBackwardAttributesT());
      else if (tag == 16) u.Set(fo::CustomOpAttributesT());
      else if (tag == 22) u.Set(fo::MoeGroupedMatmulAttributesT());
      else if (tag == 23) u.Set(fo::MoeGroupedMatmulBwdAttributesT());
      else if (tag == 19) u.Set(fo::ResampleFwdAttributesT());
      else if (tag == 21) u.Set(fo::ResampleBwdAttributesT());
      else throw std::runtime_error("unsupported kind " + val);
    } else if (k.compare(0, 2, "a.") == 0) {
      fo::NodeAttributesUnion &u = g.nodes.back()->attributes;
      bool done = false;
      if (fo::SdpaAttributesT *a = u.AsSdpaAttributes()) done = set_fwd(a, k, val);
      else if (fo::SdpaBackwardAttributesT *a = u.AsSdpaBackwardAttributes()) done = set_bwd(a, k, val);
      else if (fo::PointwiseAttributesT *a = u.AsPointwiseAttributes()) done = set_pointwise(a, k, val);
      else if (fo::MatmulAttributesT *a = u.AsMatmulAttributes()) done = set_matmul(a, k, val);
      else if (fo::CustomOpAttributesT *a = u.AsCustomOpAttributes())
        done = set_custom_op(a, k, val);
      else if (fo::MoeGroupedMatmulAttributesT *a = u.AsMoeGroupedMatmulAttributes())
        done = set_moe(a, k, val);
      else if (fo::MoeGroupedMatmulBwdAttributesT *a = u.AsMoeGroupedMatmulBwdAttributes())
        done = set_moe_bwd(a, k, val);
      else if (fo::ReductionAttributesT *a = u.AsReductionAttributes())
        done = set_reduction(a, k, val);
      else if (fo::RMSNormAttributesT *a = u.AsRMSNormAttributes()) done = set_rmsnorm(a, k, val);
      else if (fo::LayernormAttributesT *a = u.AsLayernormAttributes())
        done = set_layernorm(a, k, val);
      else if (fo::BatchnormAttributesT *a = u.AsBatchnormAttributes())
        done = set_batchnorm(a, k, val);
      else if (fo::BatchnormBackwardAttributesT *a = u.AsBatchnormBackwardAttributes())
        done = set_batchnorm_backward(a, k, val);
      else if (fo::BlockScaleQuantizeAttributesT *a = u.AsBlockScaleQuantizeAttributes())
        done = set_block_scale_quantize(a, k, val);
      else if (fo::BlockScaleDequantizeAttributesT *a = u.AsBlockScaleDequantizeAttributes())
        done = set_block_scale_dequantize(a, k, val);
      else if (fo::BatchnormInferenceAttributesT *a = u.AsBatchnormInferenceAttributes())
        done = set_batchnorm_inference(a, k, val);
      else if (fo::BatchnormInferenceAttributesVarianceExtT *a =
                   u.AsBatchnormInferenceAttributesVarianceExt())
        done = set_batchnorm_inference_variance(a, k, val);
      else if (fo::ConvolutionFwdAttributesT *a = u.AsConvolutionFwdAttributes())
        done = set_conv_fwd(a, k, val);
      else if (fo::ConvolutionBwdAttributesT *a = u.AsConvolutionBwdAttributes())
        done = set_conv_bwd(a, k, val);
      else if (fo::ConvolutionWrwAttributesT *a = u.AsConvolutionWrwAttributes())
        done = set_conv_wrw(a, k, val);
      else if (fo::LayernormBackwardAttributesT *a = u.AsLayernormBackwardAttributes())
        done = set_layernorm_backward(a, k, val);
      else if (fo::RMSNormBackwardAttributesT *a = u.AsRMSNormBackwardAttributes())
        done = set_rmsnorm_backward(a, k, val);
      else if (fo::ResampleFwdAttributesT *a = u.AsResampleFwdAttributes())
        done = set_resample_fwd(a, k, val);
      else if (fo::ResampleBwdAttributesT *a = u.AsResampleBwdAttributes())
        done = set_resample_bwd(a, k, val);
      if (!done) throw std::runtime_error("unknown attribute key " + k);
    } else {
      throw std::runtime_error("unknown key " + k);
    }
  }
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fo::Graph::Pack(fbb, &g));
  std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  if (container) {  // as SerializedGraphContainer: both blobs' data 8-aligned
    flatbuffers::FlatBufferBuilder cb;
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> plan_off;
    if (has_plan) {
      cb.ForceVectorAlignment(plan.size(), sizeof(uint8_t), 8);
      plan_off = cb.CreateVector(plan);
    }
    cb.ForceVectorAlignment(out.size(), sizeof(uint8_t), 8);
    auto graph_off = cb.CreateVector(out);
    fo::FinishSerializedGraphAndPlanBuffer(
        cb, fo::CreateSerializedGraphAndPlan(cb, graph_off, plan_off));
    out.assign(cb.GetBufferPointer(), cb.GetBufferPointer() + cb.GetSize());
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(reinterpret_cast<const char *>(out.data()), static_cast<std::streamsize>(out.size()));
  return f ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "read") return do_read(argv[2]);
    if (argc == 4 && std::string(argv[1]) == "pack") return do_pack(argv[2], argv[3]);
  } catch (const std::exception &e) {
    std::cerr << "wire_checker: " << e.what() << std::endl;
    return 2;
  }
  std::cerr << "usage: wire_checker read FILE | wire_checker pack IN OUT" << std::endl;
  return 2;
}
