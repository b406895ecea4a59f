#!/usr/bin/env python3
"""GPU host: one with_stack HF + PEFT LoRA training step per transformers decoder family, at tiny
random shapes, for `tprobe kernels`' family fixtures (issue 48; docs/kernels.md, "Families").

    record_family_traces.py OUT_DIR [--families llama,qwen3_moe,mixtral,gpt_oss,gemma3]
    record_family_traces.py OUT_DIR --families qwen3_moe_30b,mixtral_8x7b --real LAYERS [--seq N]

Per family: the model built with transformers' own classes (bf16, cuda), PEFT LoRA on q/k/v/o and
the MLP / expert linears that exist as nn.Linear, non-reentrant gradient checkpointing, HF's own
loss (labels=input_ids), batch 2 x seq 128, one warm-up step, then one step recorded with
torch.profiler (CPU + CUDA, with_stack=True, record_shapes=False). Writes <family>.json.gz (the
trace, gzip), <family>.config.json (model.config.to_json_string()) and <family>.txt (what ran:
versions, module classes, LoRA targets, trace size). One family failing writes a line and the
others go on; the exit status is 0 when at least one family was recorded.
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time
import traceback

import torch

MAX_BYTES = 1_500_000  # per gzipped trace: fewer layers when over


def family_config(name, layers):
    """(model class, config) for a family at tiny shapes; raises ImportError when absent."""
    import transformers as tf
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=1024,
                  max_position_embeddings=512, use_cache=False)
    if name == "llama":
        return tf.LlamaForCausalLM, tf.LlamaConfig(head_dim=16, **common)
    if name == "qwen3_moe":
        # layer 0 dense (mlp_only_layers), the rest MoE: both kinds in one trace
        return tf.Qwen3MoeForCausalLM, tf.Qwen3MoeConfig(
            head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
            decoder_sparse_step=1, mlp_only_layers=[0], norm_topk_prob=True, **common)
    if name == "mixtral":
        return tf.MixtralForCausalLM, tf.MixtralConfig(
            head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
            **common)
    if name == "gpt_oss":
        cls = getattr(tf, "GptOssForCausalLM")  # AttributeError -> skipped with a line
        kw = dict(common)
        kw.update(num_local_experts=4, num_experts_per_tok=2, head_dim=16, sliding_window=64)
        return cls, tf.GptOssConfig(**kw)
    if name == "gemma3":
        return tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(
            head_dim=16, sliding_window=64, **common)  # layer_types: 5 sliding, 1 full
    raise ValueError(f"unknown family {name}")


def real_config(name, layers):
    """(model class, config) at a released model's real widths (issue 48, item 4), fewer layers."""
    import transformers as tf
    if name == "qwen3_moe_30b":  # Qwen3-30B-A3B's config.json widths, 48 layers there
        return tf.Qwen3MoeForCausalLM, tf.Qwen3MoeConfig(
            hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
            num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
            num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
            mlp_only_layers=[], vocab_size=151936, max_position_embeddings=40960,
            rope_theta=1e6, tie_word_embeddings=False, use_cache=False)
    if name == "mixtral_8x7b":  # Mixtral-8x7B's widths, 32 layers there
        return tf.MixtralForCausalLM, tf.MixtralConfig(
            hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
            num_attention_heads=32, num_key_value_heads=8, head_dim=128, num_local_experts=8,
            num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=32768,
            sliding_window=None, rope_theta=1e6, use_cache=False)
    raise ValueError(f"unknown real-width family {name}")


def linear_targets(model):
    """LoRA targets: q/k/v/o and the MLP / expert linears that exist as nn.Linear."""
    want = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
            "w1", "w2", "w3", "gate_up_proj", "fc1", "fc2"}
    found = set()
    for n, m in model.named_modules():
        leaf = n.rsplit(".", 1)[-1]
        if leaf in want and isinstance(m, torch.nn.Linear):
            found.add(leaf)
    return sorted(found)


def record(name, out_dir, layers, log, seq=128, real=False):
    import peft
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    cls, cfg = (real_config if real else family_config)(name, layers)
    cfg._attn_implementation = "eager" if name == "gpt_oss" else "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    model.config.use_cache = False
    targets = linear_targets(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    model = peft.get_peft_model(model, peft.LoraConfig(
        r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=targets))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (2, seq), device="cuda", generator=g)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    step()  # warm-up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                 record_shapes=False) as prof:
        loss = step()
        torch.cuda.synchronize()
    record_s = time.time() - t0
    raw = os.path.join(out_dir, name + ".json")
    prof.export_chrome_trace(raw)
    json_bytes = os.path.getsize(raw)
    path = raw + ".gz"
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    with open(os.path.join(out_dir, name + ".config.json"), "w") as f:
        f.write(model.base_model.model.config.to_json_string())
    classes = sorted({type(m).__name__ for m in model.modules()})
    info = {"family": name, "class": cls.__name__, "layers": layers, "seq": seq,
            "lora_targets": targets, "record_s": record_s,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "loss": float(loss.item()), "trace_bytes": os.path.getsize(path),
            "json_bytes": json_bytes,
            "attn_implementation": cfg._attn_implementation,
            "experts_implementation": str(getattr(cfg, "_experts_implementation", "?")),
            "module_classes": classes}
    with open(os.path.join(out_dir, name + ".txt"), "w") as f:
        json.dump(info, f, indent=1)
    log(f"{name}: {cls.__name__}, {layers} layers, {info['trace_bytes'] / 1e6:.2f} MB, "
        f"loss {info['loss']:.3f}, LoRA on {','.join(targets)}")
    return info["trace_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--families", default="llama,qwen3_moe,mixtral,gpt_oss,gemma3")
    ap.add_argument("--real", type=int, default=0, metavar="LAYERS",
                    help="record --families (qwen3_moe_30b, mixtral_8x7b) at a released model's "
                         "real widths with LAYERS layers, batch 2 x --seq, no size cap")
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    logf = open(os.path.join(a.out_dir, "log.txt"), "a")

    def log(msg):
        print(msg)
        logf.write(msg + "\n")
        logf.flush()

    import peft
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, peft "
        f"{peft.__version__}, {torch.cuda.get_device_name(0)} ({time.strftime('%F %T')})")
    ok = 0
    if a.real:
        for name in a.families.split(","):
            try:
                record(name, a.out_dir, a.real, log, seq=a.seq, real=True)
                ok += 1
            except Exception as e:  # one failing: a line, and the others go on
                log(f"{name}: FAILED at {a.real} layers: {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc()
            finally:
                torch.cuda.empty_cache()
        log(f"{ok} real-width traces recorded")
        return 0 if ok else 1
    for name in a.families.split(","):
        layers = 4
        while layers >= 2:
            try:
                size = record(name, a.out_dir, layers, log)
            except (ImportError, AttributeError) as e:
                log(f"{name}: skipped, not in this transformers ({type(e).__name__}: {e})")
                break
            except Exception as e:  # one family failing: a line, and the others go on
                log(f"{name}: FAILED at {layers} layers: {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc()
                break
            finally:
                torch.cuda.empty_cache()
            if size <= MAX_BYTES:
                ok += 1
                break
            log(f"{name}: {size} bytes over {MAX_BYTES}: again with {layers - 1} layers")
            layers -= 1
    log(f"{ok} families recorded")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
