#!/usr/bin/env python3
"""Writes Gemma-4 checkpoints WITH HUGGING FACE transformers plus HF's reference logits/loss.

Run on a host with transformers >= 5.15 and torch (the GPU host: transformers 5.17, torch 2.11).

  tiny (default): gemma4-tiny's config (tprobe's embedded one) in the per_layer_config form,
      fp32, with random non-trivial norm weights, router scales and layer scalars; reference
      logits/loss from HF in fp32 on the CPU with attn_implementation eager AND sdpa.
      -> tests/fixtures/gemma4-tiny-hf/{config.json, model.safetensors, reference.safetensors}
  mid: a mid-size model with the real head dims (256 sliding / 512 full), bf16 weights, for
      bf16 parity on the GPU: reference logits computed in fp32 (eager, TF32 off) from the
      bf16-rounded weights, plus HF's own bf16 sdpa logits for context.

Usage: make_parity_fixture.py [tiny|mid] OUT_DIR
"""
import inspect
import json
import os
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def text_config(kind):
    import transformers
    cls = transformers.Gemma4TextConfig
    if kind == "tiny":
        kw = dict(hidden_size=64, num_hidden_layers=6, intermediate_size=96, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention",
                               "sliding_attention", "sliding_attention", "full_attention"],
                  sliding_window=8, vocab_size=512, num_experts=8, top_k_experts=2,
                  moe_intermediate_size=32, max_position_embeddings=512)
    else:
        kw = dict(hidden_size=1024, num_hidden_layers=6, intermediate_size=1024, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=256, global_head_dim=512, num_global_key_value_heads=2,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention",
                               "sliding_attention", "sliding_attention", "full_attention"],
                  sliding_window=128, vocab_size=8192, num_experts=16, top_k_experts=4,
                  moe_intermediate_size=256, max_position_embeddings=4096)
    kw.update(attention_k_eq_v=True, enable_moe_block=True, hidden_size_per_layer_input=0,
              num_kv_shared_layers=0, final_logit_softcapping=30.0, tie_word_embeddings=True,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", attention_bias=False,
              pad_token_id=0, bos_token_id=2, eos_token_id=1, use_bidirectional_attention=None,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional",
                                                  "partial_rotary_factor": 0.25,
                                                  "rope_theta": 1000000.0}})
    while True:
        try:
            return cls(**kw)
        except TypeError as e:  # an argument this transformers version does not know
            msg = str(e)
            bad = [k for k in kw if f"'{k}'" in msg]
            if not bad:
                raise
            print(f"config: dropping unsupported argument {bad[0]} ({msg})")
            kw.pop(bad[0])


def perturb(model, gen, embed_std):
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if "inv_freq" in name or "embed_scale" in name:
                continue
            if p.dim() <= 1:  # norm weights, router.scale, per_expert_scale, layer_scalar
                p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float32) + 0.5)
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * embed_std)
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) / fan_in ** 0.5)


def reference(model_dir, ids, impl, device, dtype):
    from transformers import Gemma4ForCausalLM
    m = Gemma4ForCausalLM.from_pretrained(model_dir, attn_implementation=impl, dtype=dtype).to(device)
    m.eval()
    with torch.no_grad():
        out = m(input_ids=ids.to(device), labels=ids.to(device))
    print(f"reference {impl} {dtype}: experts={getattr(m.config, '_experts_implementation', '?')} "
          f"loss={out.loss.item():.8f}")
    return out.logits.float().cpu(), out.loss.float().cpu().reshape(())


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/gemma4-tiny-hf"
    import transformers
    import transformers.models.gemma4 as g4
    from safetensors.torch import save_file
    from transformers import Gemma4ForCausalLM
    print("transformers", transformers.__version__, "torch", torch.__version__)
    print("gemma4 module names:", [n for n in dir(g4) if not n.startswith("_")])
    try:
        from transformers.integrations import sdpa_attention as sa
        for fname in ("use_gqa_in_sdpa", "sdpa_attention_forward"):
            if hasattr(sa, fname):
                print(f"---- {fname} ----\n" + inspect.getsource(getattr(sa, fname))[:2500])
    except Exception as e:  # informative only
        print("could not print sdpa source:", e)

    cfg = text_config(kind)
    gen = torch.Generator().manual_seed(1234 if kind == "tiny" else 4321)
    torch.manual_seed(0)
    model = Gemma4ForCausalLM(cfg).to(torch.float32)
    perturb(model, gen, embed_std=1.0 if kind == "tiny" else 0.5)
    os.makedirs(out_dir, exist_ok=True)
    save_dtype = torch.float32 if kind == "tiny" else torch.bfloat16
    model.to(save_dtype).save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "config.json")) as f:
        print("config.json:", f.read())

    if kind == "tiny":
        batch, seq = 2, 24
    else:
        batch, seq = 2, 512
    ids = torch.randint(3, cfg.vocab_size, (batch, seq), generator=gen, dtype=torch.int64)
    ids[:, 0] = 2  # BOS
    tensors = {"input_ids": ids}
    if kind == "tiny":
        for impl in ("eager", "sdpa"):
            logits, loss = reference(out_dir, ids, impl, "cpu", torch.float32)
            key = "" if impl == "eager" else "_sdpa"
            tensors["logits" + key] = logits.contiguous()
            tensors["loss" + key] = loss
        d = (tensors["logits"] - tensors["logits_sdpa"]).norm() / tensors["logits"].norm()
        print(f"HF eager vs sdpa (fp32, CPU): rel L2 {d.item():.3e}")
    else:
        dev = "cuda"
        logits, loss = reference(out_dir, ids, "eager", dev, torch.float32)
        tensors["logits"], tensors["loss"] = logits.contiguous(), loss
        for impl in ("sdpa", "eager"):
            lb, lossb = reference(out_dir, ids, impl, dev, torch.bfloat16)
            tensors[f"logits_hf_bf16_{impl}"] = lb.contiguous()
            tensors[f"loss_hf_bf16_{impl}"] = lossb
            d = (lb - logits).norm() / logits.norm()
            print(f"HF bf16 {impl} vs HF fp32 eager: rel L2 {d.item():.3e}")
    save_file(tensors, os.path.join(out_dir, "reference.safetensors"))
    for f in sorted(os.listdir(out_dir)):
        print(f, os.path.getsize(os.path.join(out_dir, f)))


if __name__ == "__main__":
    main()
