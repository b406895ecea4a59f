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

  backward CKPT_DIR OUT_DIR [cpu|cuda]: for an existing HF checkpoint (the committed tiny
      fixture, or a mid checkpoint written above), with PEFT: two adapters as save_pretrained
      writes them (peft_adapter_init/: before any step, lora_B = 0; peft_adapter/: after one
      AdamW step, so lora_B != 0 and every lora_A gradient is non-zero too), and the loss plus
      every LoRA gradient (PEFT name + ".grad") of one forward+backward of the causal-LM loss
      with peft_adapter/ loaded:
        backward.safetensors          fp32, eager, no checkpointing; beside it HF's own bf16 run
                                      of the same step (bf16 base and bf16 adapter, as tprobe's
                                      bf16 engine computes): "<name>.grad_hf_bf16_<attn>" and
                                      "loss_hf_bf16_<attn>", and with PEFT's default fp32 adapter
                                      ("..._fp32adapter")
        backward_ckpt.safetensors     fp32, reentrant gradient checkpointing with input grads on
        backward_ckpt_noinput.safetensors  the same without input grads (the inert-adapter trap:
                                      HF's loss then does not require grad; gradients stored as 0)
        backward_padded.safetensors   fp32, a right-padded batch (attention_mask, labels -100)
        reference.safetensors         the forward reference again (input_ids from CKPT_DIR's
                                      reference.safetensors when it has one) with HF's bf16
                                      logits beside the fp32 ones: logits_hf_bf16_{eager,sdpa}
        summary.json                  versions, losses, HF bf16-vs-fp32 errors, the trap's facts

Usage: make_parity_fixture.py [tiny|mid] OUT_DIR [noref]
  noref (mid): the checkpoint and input_ids only, no forward references (faster).
       make_parity_fixture.py backward CKPT_DIR OUT_DIR [cpu|cuda] [quick]
  quick: adapters and backward.safetensors only (fp32 and HF bf16 with a bf16 adapter).
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


TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def rel_l2(a, b):
    a, b = a.double(), b.double()
    nb = b.norm().item()
    return (a - b).norm().item() / nb if nb > 0 else (0.0 if a.norm().item() == 0 else float("inf"))


def load_base(ckpt_dir, impl, device, dtype):
    from transformers import Gemma4ForCausalLM
    m = Gemma4ForCausalLM.from_pretrained(ckpt_dir, attn_implementation=impl, dtype=dtype).to(device)
    m.config.use_cache = False
    return m


def set_input_grads(base, on, seen):
    """Makes the embedding output's requires_grad exactly `on` (HF's enable_input_require_grads
    when on; no hook at all when off) and records what the embedding really produced in `seen`."""
    emb = base.get_input_embeddings()
    emb._forward_hooks.clear()
    if on:
        base.enable_input_require_grads()

    def record(module, inputs, output):
        seen["embedding_output_requires_grad"] = bool(output.requires_grad)
    emb.register_forward_hook(record)


def peft_step(ckpt_dir, adapter_dir, ids, impl, device, dtype, checkpointing=False, input_grads=True,
              attention_mask=None, labels=None, fp32_adapter=False):
    """One forward+backward of HF's causal-LM loss with the PEFT adapter loaded: (loss, grads by
    PEFT save name + '.grad', facts)."""
    import peft
    base = load_base(ckpt_dir, impl, device, dtype)
    if checkpointing:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model = peft.PeftModel.from_pretrained(base, adapter_dir, is_trainable=True,
                                           autocast_adapter_dtype=fp32_adapter)
    facts = {"impl": impl, "dtype": str(dtype), "device": device, "checkpointing": checkpointing,
             "input_grads": input_grads, "fp32_adapter": fp32_adapter}
    set_input_grads(base, input_grads, facts)
    ids = ids.to(device)
    labels = (ids if labels is None else labels).to(device)
    kw = {} if attention_mask is None else {"attention_mask": attention_mask.to(device)}
    model.eval()  # the same loss without training mode (rules out train-only terms)
    with torch.no_grad():
        facts["loss_eval_mode"] = model(input_ids=ids, labels=labels, **kw).loss.item()
    model.train()
    out = model(input_ids=ids, labels=labels, **kw)
    facts["loss_requires_grad"] = bool(out.loss.requires_grad)
    facts["lora_dtype"] = next(str(p.dtype) for n, p in model.named_parameters() if "lora_" in n)
    if out.loss.requires_grad:
        out.loss.backward()
    else:
        facts["backward"] = "skipped: the loss does not require grad (no path reaches an adapter)"
    grads, undefined = {}, 0
    for n, p in model.named_parameters():
        if "lora_" not in n:
            continue
        name = n.replace(".default", "") + ".grad"
        if p.grad is None:
            undefined += 1
            grads[name] = torch.zeros(p.shape, dtype=torch.float32)
        else:
            grads[name] = p.grad.detach().float().cpu().contiguous()
    facts["lora_tensors"] = len(grads)
    facts["grads_undefined"] = undefined
    facts["grads_all_zero"] = sum(1 for g in grads.values() if g.abs().max().item() == 0)
    facts["loss"] = out.loss.item()
    print(f"step {facts}")
    return out.loss.detach().float().cpu().reshape([1]), grads, facts


def make_adapters(ckpt_dir, out_dir, ids, device, rank, alpha):
    """peft_adapter_init/ (PEFT's init: lora_B = 0) and peft_adapter/ (after one AdamW step)."""
    import peft
    base = load_base(ckpt_dir, "eager", device, torch.float32)
    torch.manual_seed(7)
    cfg = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=TARGETS,
                          task_type="CAUSAL_LM")
    model = peft.get_peft_model(base, cfg)
    model.save_pretrained(os.path.join(out_dir, "peft_adapter_init"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2,
                            weight_decay=0.0)
    out = model(input_ids=ids.to(device), labels=ids.to(device))
    out.loss.backward()
    opt.step()
    model.save_pretrained(os.path.join(out_dir, "peft_adapter"))
    n_b = sum(1 for n, p in model.named_parameters() if "lora_B" in n)
    nz_b = sum(1 for n, p in model.named_parameters() if "lora_B" in n and p.abs().max() > 0)
    print(f"adapters: rank {rank} alpha {alpha}, step loss {out.loss.item():.6f}, "
          f"non-zero lora_B {nz_b}/{n_b}")
    return {"rank": rank, "alpha": alpha, "step_loss": out.loss.item(), "lora_b": n_b,
            "lora_b_nonzero_after_step": nz_b, "optimizer": "AdamW lr 2e-2 weight_decay 0, one step"}


def backward_main(ckpt_dir, out_dir, device, quick=False):
    import peft
    import transformers
    from safetensors.torch import load_file, save_file
    os.makedirs(out_dir, exist_ok=True)
    tiny = device == "cpu"
    summary = {"transformers": transformers.__version__, "peft": peft.__version__,
               "torch": torch.__version__, "device": device, "checkpoint": ckpt_dir}
    print("transformers", transformers.__version__, "peft", peft.__version__, "torch", torch.__version__)
    steps = {}

    def dump():  # after every stage, so a run cut short by a timeout still leaves its facts
        summary["steps"] = steps
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    old_ref = os.path.join(ckpt_dir, "reference.safetensors")
    if os.path.exists(old_ref):
        ids = load_file(old_ref)["input_ids"]
    else:
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        gen = torch.Generator().manual_seed(99)
        ids = torch.randint(3, vocab, (2, 512), generator=gen, dtype=torch.int64)
        ids[:, 0] = 2
    summary["input_ids_shape"] = list(ids.shape)
    rank, alpha = (4, 8) if tiny else (8, 16)
    summary["adapter"] = make_adapters(ckpt_dir, out_dir, ids, device, rank, alpha)
    adapter = os.path.join(out_dir, "peft_adapter")
    saved = set(load_file(os.path.join(adapter, "adapter_model.safetensors")).keys())

    # Forward reference with HF's bf16 logits beside the fp32 ones (issue: bf16 verdict relative
    # to what HF's own bf16 costs on this model).
    fwd = {"input_ids": ids}
    fwd_err = {}
    for impl in (() if quick else ("eager", "sdpa")):
        logits, loss = reference(ckpt_dir, ids, impl, device, torch.float32)
        key = "" if impl == "eager" else "_sdpa"
        fwd["logits" + key], fwd["loss" + key] = logits.contiguous(), loss
    for impl in (() if quick else ("eager", "sdpa")):
        lb, lossb = reference(ckpt_dir, ids, impl, device, torch.bfloat16)
        fwd[f"logits_hf_bf16_{impl}"], fwd[f"loss_hf_bf16_{impl}"] = lb.contiguous(), lossb
        fwd_err[impl] = rel_l2(lb, fwd["logits"])
        print(f"HF bf16 {impl} logits vs HF fp32 eager: rel L2 {fwd_err[impl]:.4e}")
    if not quick:
        summary["hf_bf16_logits_rel_l2"] = fwd_err
        summary["hf_eager_vs_sdpa_fp32_logits_rel_l2"] = rel_l2(fwd["logits_sdpa"], fwd["logits"])
        save_file(fwd, os.path.join(out_dir, "reference.safetensors"))

    dump()
    loss, grads, facts = peft_step(ckpt_dir, adapter, ids, "eager", device, torch.float32)
    names = {k[:-len(".grad")] for k in grads}
    if names != saved:
        print("WARNING: gradient names and saved adapter names differ:",
              sorted(names ^ saved)[:10])
    summary["grad_names_match_adapter"] = names == saved
    steps["fp32_eager"] = facts
    main_file = {"input_ids": ids, "loss": loss, **grads}
    hf_bf16 = {}
    for impl in ("eager", "sdpa"):
        for fp32_adapter in ((False,) if quick else (False, True)):
            tag = impl + ("_fp32adapter" if fp32_adapter else "")
            try:
                lb, gb, fb = peft_step(ckpt_dir, adapter, ids, impl, device, torch.bfloat16,
                                       fp32_adapter=fp32_adapter)
            except Exception as e:  # a failed variant is data, the rest goes on
                print(f"bf16 {tag} failed: {e}")
                steps[f"bf16_{tag}"] = {"error": str(e)}
                continue
            steps[f"bf16_{tag}"] = fb
            main_file[f"loss_hf_bf16_{tag}"] = lb
            per = {}
            num = den = 0.0
            for k, g in gb.items():
                main_file[k + "_hf_bf16_" + tag] = g
                per[k] = rel_l2(g, grads[k])
                num += (g.double() - grads[k].double()).norm().item() ** 2
                den += grads[k].double().norm().item() ** 2
            worst = max(per, key=per.get)
            hf_bf16[tag] = {"global_rel_l2": (num / den) ** 0.5 if den > 0 else None,
                            "worst_tensor": worst, "worst_rel_l2": per[worst],
                            "loss_abs_diff": abs(lb.item() - loss.item())}
            print(f"HF bf16 {tag} grads vs fp32: {hf_bf16[tag]}")
    summary["hf_bf16_grads"] = hf_bf16
    save_file(main_file, os.path.join(out_dir, "backward.safetensors"))
    dump()
    if quick:  # the GPU check needs only the adapter and backward.safetensors
        return

    try:
        lc, gc, fc = peft_step(ckpt_dir, adapter, ids, "eager", device, torch.float32,
                               checkpointing=True)
        steps["fp32_eager_ckpt"] = fc
        summary["ckpt_vs_plain_grads_max_rel_l2"] = max(rel_l2(gc[k], grads[k]) for k in grads)
        summary["ckpt_vs_plain_loss_abs_diff"] = abs(lc.item() - loss.item())
        save_file({"input_ids": ids, "loss": lc, **gc},
                  os.path.join(out_dir, "backward_ckpt.safetensors"))
    except Exception as e:
        print(f"checkpointing reference failed: {e}")
        steps["fp32_eager_ckpt"] = {"error": str(e)}
    dump()

    try:
        ln, gn, fn = peft_step(ckpt_dir, adapter, ids, "eager", device, torch.float32,
                               checkpointing=True, input_grads=False)
        steps["fp32_eager_ckpt_noinput"] = fn
        save_file({"input_ids": ids, "loss": ln, **gn},
                  os.path.join(out_dir, "backward_ckpt_noinput.safetensors"))
    except Exception as e:
        print(f"trap reference failed: {e}")
        steps["fp32_eager_ckpt_noinput"] = {"error": str(e)}

    try:  # right padding: the second row's last quarter is padding (id 0, masked, labels -100)
        pad = max(1, ids.shape[1] // 4)
        pids = ids.clone()
        mask = torch.ones_like(ids)
        pids[1, -pad:] = 0
        mask[1, -pad:] = 0
        labels = pids.clone()
        labels[mask == 0] = -100
        lp, gp, fp = peft_step(ckpt_dir, adapter, pids, "eager", device, torch.float32,
                               attention_mask=mask, labels=labels)
        steps["fp32_eager_padded"] = fp
        save_file({"input_ids": pids, "attention_mask": mask, "labels": labels, "loss": lp, **gp},
                  os.path.join(out_dir, "backward_padded.safetensors"))
    except Exception as e:
        print(f"padded reference failed: {e}")
        steps["fp32_eager_padded"] = {"error": str(e)}
    dump()
    for root, _, files in os.walk(out_dir):
        for f in sorted(files):
            print(os.path.join(root, f), os.path.getsize(os.path.join(root, f)))


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    if kind == "backward":
        return backward_main(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "cpu",
                             quick=len(sys.argv) > 5 and sys.argv[5] == "quick")
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
    elif len(sys.argv) > 3 and sys.argv[3] == "noref":
        print("noref: input_ids only (the backward mode computes its own references)")
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
