"""Author decoder_op23: a small Llama-style decoder at opset 23, with onnx.helper.

usage: python make_decoder.py OUT.onnx     (the test venv's python: onnx, numpy)

The model, seeded weights (SEED) with realistic scale (embeddings N(0, 1),
projections N(0, 1/fan_in), RMS scales near 1):
  input_ids [batch, seq] int64 (byte-level tokens, vocabulary 256)
  position_ids [batch, seq] int64 (past_len .. past_len + seq - 1)
  past_key_L, past_value_L [batch, 2, past, 32] float, L = 0, 1 (the KV cache)
  -> Gather (token embedding, d_model 128)
  -> 2 layers of
       RMSNormalization -> Q/K/V MatMul (4 query heads, 2 KV heads: GQA)
       -> RotaryEmbedding (position_ids, cos/sin caches of 512 positions)
       -> Attention (is_causal, past_key/past_value in, present_key/
          present_value out) -> MatMul -> residual
       -> RMSNormalization -> SwiGLU MLP (SiLU as x * Sigmoid(x), 384 wide)
          -> residual
     layer 0 uses the 3-D forms (RotaryEmbedding num_heads, Attention
     q_num_heads/kv_num_heads), layer 1 the 4-D ones (Reshape + Transpose
     to [batch, heads, seq, 32], back after Attention)
  -> RMSNormalization -> LM head MatMul
  -> logits [batch, seq, 256], present_key_L, present_value_L
     [batch, 2, past + seq, 32]
batch, seq and past are symbolic dimensions. Written under a temporary name
and renamed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261204
VOCAB = 256
D = 128
HQ = 4
HKV = 2
HD = D // HQ
FF = 384
LAYERS = 2
MAX_POS = 512
THETA = 10000.0
EPS = 1e-5


class Builder:
    def __init__(self):
        self.rng = np.random.default_rng(SEED)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(self, name, fan_in, shape):
        w = self.rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape).astype(np.float32)
        return self.const(name, w)

    def scale(self, name, n):
        return self.const(name, (1.0 + self.rng.normal(0.0, 0.1, n)).astype(np.float32))

    def op(self, op_type, inputs, n_out=1, outputs=None, **attrs):
        outs = outputs or [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if len(outs) == 1 else outs


def rope_caches():
    inv = 1.0 / THETA ** (np.arange(0, HD, 2, dtype=np.float64) / HD)
    ang = np.arange(MAX_POS, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def layer(b, x, i, four_d):
    p = "layers.%d." % i
    h = b.op("RMSNormalization", [x, b.scale(p + "attn_norm", D)], axis=-1, epsilon=EPS)
    q = b.op("MatMul", [h, b.weight(p + "wq", D, (D, D))])
    k = b.op("MatMul", [h, b.weight(p + "wk", D, (D, HKV * HD))])
    v = b.op("MatMul", [h, b.weight(p + "wv", D, (D, HKV * HD))])
    past_k, past_v = "past_key_%d" % i, "past_value_%d" % i
    pres_k, pres_v = "present_key_%d" % i, "present_value_%d" % i
    if four_d:
        def heads(t, n):
            r = b.op("Reshape", [t, b.const(b.name("shape"), np.array([0, 0, n, HD], np.int64))])
            return b.op("Transpose", [r], perm=[0, 2, 1, 3])
        q4 = b.op("RotaryEmbedding", [heads(q, HQ), "cos_cache", "sin_cache", "position_ids"])
        k4 = b.op("RotaryEmbedding", [heads(k, HKV), "cos_cache", "sin_cache", "position_ids"])
        y4 = b.op("Attention", [q4, k4, heads(v, HKV), "", past_k, past_v],
                  outputs=[b.name("attn"), pres_k, pres_v], is_causal=1)[0]
        t = b.op("Transpose", [y4], perm=[0, 2, 1, 3])
        y = b.op("Reshape", [t, b.const(b.name("shape"), np.array([0, 0, D], np.int64))])
    else:
        q = b.op("RotaryEmbedding", [q, "cos_cache", "sin_cache", "position_ids"], num_heads=HQ)
        k = b.op("RotaryEmbedding", [k, "cos_cache", "sin_cache", "position_ids"], num_heads=HKV)
        y = b.op("Attention", [q, k, v, "", past_k, past_v], outputs=[b.name("attn"), pres_k, pres_v],
                 is_causal=1, q_num_heads=HQ, kv_num_heads=HKV)[0]
    x = b.op("Add", [x, b.op("MatMul", [y, b.weight(p + "wo", D, (D, D))])])
    h = b.op("RMSNormalization", [x, b.scale(p + "mlp_norm", D)], axis=-1, epsilon=EPS)
    gate = b.op("MatMul", [h, b.weight(p + "w_gate", D, (D, FF))])
    up = b.op("MatMul", [h, b.weight(p + "w_up", D, (D, FF))])
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate])])
    down = b.op("MatMul", [b.op("Mul", [silu, up]), b.weight(p + "w_down", FF, (FF, D))])
    return b.op("Add", [x, down])


def build():
    b = Builder()
    cos, sin = rope_caches()
    b.const("cos_cache", cos)
    b.const("sin_cache", sin)
    b.const("embed_tokens", b.rng.normal(0.0, 1.0, (VOCAB, D)).astype(np.float32))
    x = b.op("Gather", ["embed_tokens", "input_ids"], axis=0)
    for i in range(LAYERS):
        x = layer(b, x, i, four_d=(i % 2 == 1))
    x = b.op("RMSNormalization", [x, b.scale("final_norm", D)], axis=-1, epsilon=EPS)
    b.op("MatMul", [x, b.weight("lm_head", D, (D, VOCAB))], outputs=["logits"])

    def kv(name, length):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", HKV, length, HD])

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])]
    for i in range(LAYERS):
        inputs += [kv("past_key_%d" % i, "past"), kv("past_value_%d" % i, "past")]
        outputs += [kv("present_key_%d" % i, "total"), kv("present_value_%d" % i, "total")]
    graph = helper.make_graph(b.nodes, "decoder_op23", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)],
                              producer_name="tandem scripts/models/make_decoder.py")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: make_decoder.py OUT.onnx\n")
        return 2
    out = argv[1]
    tmp = "%s.tmp.%d" % (out, os.getpid())
    onnx.save(build(), tmp)
    os.replace(tmp, out)
    print("models: authored %s" % os.path.basename(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
