#!/usr/bin/env bash
# GPU-host call 1 for `tprobe mask`: reads Hugging Face's own sdpa mask rules out of the installed
# transformers (source of the functions that decide the is_causal skip and build the sliding mask),
# then asks HF's mask builders and a tiny Gemma-4 model what they hand SDPA for the 26B-A4B layer
# layout at a few (width, padding) cases. Python only, no build needed, <= 65 s (one Python
# process: importing transformers takes ~8 s there). Output: $OUT/mask/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=${MASK_HF_OUT:-$OUT/mask}
mkdir -p "$D"
PY=$D/hf_mask_rules.py
cat >"$PY" <<'PYEOF'
# Prints transformers' mask-decision sources and what HF's builders return for 26B-like configs.
import inspect
import json
import sys
import traceback

out_dir = sys.argv[1]
parts = sys.argv[2].split(",")

import torch
import transformers

print("transformers", transformers.__version__, "torch", torch.__version__, flush=True)


def show_source(mod, names, fh):
    for n in names:
        obj = getattr(mod, n, None)
        fh.write("\n" + "#" * 100 + "\n# %s.%s\n" % (mod.__name__, n))
        if obj is None:
            fh.write("# ABSENT in this version\n")
            continue
        try:
            fh.write("# file %s line %d\n" % (inspect.getsourcefile(obj),
                                             inspect.getsourcelines(obj)[1]))
            fh.write(inspect.getsource(obj))
        except Exception as e:  # builtins, partials
            fh.write("# no source: %r (repr %r)\n" % (e, obj))


def part_source():
    import transformers.masking_utils as mu
    import transformers.integrations.sdpa_attention as sa
    with open(out_dir + "/source.txt", "w") as fh:
        fh.write("transformers %s  torch %s\n" % (transformers.__version__, torch.__version__))
        fh.write("masking_utils file: %s\n" % inspect.getsourcefile(mu))
        fh.write("sdpa_attention file: %s\n" % inspect.getsourcefile(sa))
        fns = sorted(n for n, o in vars(mu).items() if inspect.isfunction(o) and o.__module__ == mu.__name__)
        fh.write("masking_utils functions: %s\n" % ", ".join(fns))
        fns2 = sorted(n for n, o in vars(sa).items() if inspect.isfunction(o) and o.__module__ == sa.__name__)
        fh.write("sdpa_attention functions: %s\n" % ", ".join(fns2))
        wanted = ["sdpa_mask", "sdpa_mask_recent_torch", "sdpa_mask_older_torch",
                  "_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa",
                  "allow_is_causal_skip", "causal_mask_function", "sliding_window_overlay",
                  "sliding_window_causal_mask_function", "padding_mask_function",
                  "and_masks", "or_masks", "_preprocess_mask_arguments", "create_causal_mask",
                  "create_sliding_window_causal_mask", "find_packed_sequence_indices",
                  "_vmap_for_bhqkv", "_non_vmap_expansion_sdpa", "prepare_padding_mask",
                  "eager_mask", "flash_attention_mask"]
        # anything else whose name says it decides a skip
        wanted += [n for n in fns if ("ignore" in n or "skip" in n) and n not in wanted]
        show_source(mu, wanted, fh)
        show_source(sa, ["sdpa_attention_forward", "use_gqa_in_sdpa", "repeat_kv",
                         "get_is_causal", "_is_causal"] +
                    [n for n in fns2 if n not in ("sdpa_attention_forward", "use_gqa_in_sdpa",
                                                   "repeat_kv")], fh)
        try:
            import transformers.models.gemma4.modeling_gemma4 as g4
            fh.write("\n# modeling_gemma4 file: %s\n" % inspect.getsourcefile(g4))
            for cls_name in ("Gemma4TextModel", "Gemma4TextAttention"):
                cls = getattr(g4, cls_name, None)
                fh.write("\n" + "#" * 100 + "\n# %s.forward\n" % cls_name)
                if cls is None:
                    fh.write("# ABSENT\n")
                else:
                    fh.write(inspect.getsource(cls.forward))
        except Exception:
            fh.write("# modeling_gemma4: " + traceback.format_exc())
    print("wrote source.txt", flush=True)


def config_26b(attn="sdpa", layers=30, hidden=2816, vocab=262144):
    kw = dict(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=64,
              num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
              num_global_key_value_heads=2, attention_k_eq_v=True,
              layer_types=["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)],
              sliding_window=1024, vocab_size=vocab, enable_moe_block=True, num_experts=4,
              top_k_experts=2, moe_intermediate_size=32, hidden_size_per_layer_input=0,
              num_kv_shared_layers=0, final_logit_softcapping=30.0, tie_word_embeddings=True,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=262144,
              pad_token_id=0, bos_token_id=2, eos_token_id=1,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional",
                                                  "partial_rotary_factor": 0.25, "rope_theta": 1e6}})
    cfg = transformers.Gemma4TextConfig(**kw)
    cfg._attn_implementation = attn
    return cfg


dev = "cuda" if torch.cuda.is_available() else "cpu"
widths = [512, 1023, 1024, 1025, 2048, 16384]
B = 2


def attn_mask_2d(w, case):
    if case == "none":
        return None
    m = torch.ones(B, w, dtype=torch.long, device=dev)
    if case == "right_pad":
        m[1, w // 2:] = 0
    return m


def describe(m, w):
    if m is None:
        return {"mask": "none"}
    d = {"mask": "explicit", "type": type(m).__name__}
    if torch.is_tensor(m):
        d.update(shape=list(m.shape), dtype=str(m.dtype))
        if m.dtype == torch.bool and m.dim() == 4:
            allowed = m[:, 0].sum(-1)  # [B, q]
            d["allowed_last_row"] = [int(x) for x in allowed[:, -1]]
            d["allowed_max"] = int(allowed.max())
            d["rows_fully_masked"] = [int(x) for x in (allowed == 0).sum(-1)]
            q = w - 1
            row = m[0, 0, q].nonzero().flatten()
            if row.numel():
                d["row_last_first_key"] = int(row[0]); d["row_last_last_key"] = int(row[-1])
    return d


def part_builders():
    import transformers.masking_utils as mu
    cfg = config_26b()
    results = []
    for w in widths:
        emb = torch.empty(B, w, 8, dtype=torch.bfloat16, device=dev)  # only shape/dtype/device read
        for case in ("none", "all_ones", "right_pad"):
            am = attn_mask_2d(w, case)
            cache_position = torch.arange(w, device=dev)
            pos = cache_position.unsqueeze(0).expand(B, -1)
            for kind, fn in (("full", mu.create_causal_mask),
                             ("sliding", mu.create_sliding_window_causal_mask)):
                cand = dict(config=cfg, input_embeds=emb, inputs_embeds=emb, attention_mask=am,
                            cache_position=cache_position, past_key_values=None, position_ids=pos)
                params = inspect.signature(fn).parameters
                kw = {k: v for k, v in cand.items() if k in params}
                row = {"width": w, "padding": case, "layer": kind, "kwargs": sorted(kw)}
                try:
                    row.update(describe(fn(**kw), w))
                except Exception as e:
                    row.update(mask="error", error="%s: %s" % (type(e).__name__, e))
                results.append(row)
                print(json.dumps(row), flush=True)
    with open(out_dir + "/builders.json", "w") as fh:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "device": dev, "batch": B, "results": results}, fh, indent=1)
    print("wrote builders.json", flush=True)


def part_model():
    # A 6-layer model with the 26B attention shapes (5 sliding + 1 full, heads 16, kv 8/2,
    # head_dim 256/512, W 1024) and a tiny MLP; SDPA is replaced by a recorder, so this shows
    # exactly what HF's sdpa path hands the kernel, per layer, without computing attention.
    import torch.nn.functional as F
    import transformers.integrations.sdpa_attention as sa
    from transformers import Gemma4ForCausalLM
    cfg = config_26b(layers=6, hidden=64, vocab=512)
    torch.manual_seed(0)
    model = Gemma4ForCausalLM(cfg).to(dev).to(torch.bfloat16).eval()
    model.config.use_cache = False
    print("model attn implementation:", getattr(model.config, "_attn_implementation", "?"), flush=True)
    calls = []
    real = F.scaled_dot_product_attention

    def recorder(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False, **kw):
        calls.append({"q": list(query.shape), "k": list(key.shape), "v": list(value.shape),
                      "attn_mask": None if attn_mask is None else
                      {"shape": list(attn_mask.shape), "dtype": str(attn_mask.dtype)},
                      "is_causal": bool(is_causal), "enable_gqa": bool(enable_gqa),
                      "scale": scale, "extra_kwargs": sorted(kw)})
        return torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)

    patched = [(torch.nn.functional, "scaled_dot_product_attention")]
    if hasattr(sa, "scaled_dot_product_attention"):
        patched.append((sa, "scaled_dot_product_attention"))
    for mod, name in patched:
        setattr(mod, name, recorder)
    results = []
    try:
        for w in (512, 1023, 1024, 2048, 8192):
            for case in ("none", "all_ones", "right_pad"):
                ids = torch.randint(3, 500, (B, w), device=dev)
                am = attn_mask_2d(w, case)
                calls.clear()
                row = {"width": w, "padding": case}
                try:
                    with torch.no_grad():
                        kw = {"input_ids": ids, "use_cache": False}
                        if am is not None:
                            kw["attention_mask"] = am
                        model(**kw)
                    row["layers"] = [dict(c, layer=i, type=cfg.layer_types[i]) for i, c in enumerate(calls)]
                except Exception as e:
                    row["error"] = "%s: %s" % (type(e).__name__, e)
                results.append(row)
                summary = ["L%d %s mask=%s causal=%s gqa=%s k=%s" % (
                    l["layer"], l["type"][:4], "none" if l["attn_mask"] is None else "explicit",
                    l["is_causal"], l["enable_gqa"], l["k"]) for l in row.get("layers", [])]
                print(w, case, row.get("error", ""), "; ".join(summary), flush=True)
    finally:
        for mod, name in patched:
            setattr(mod, name, real)
    with open(out_dir + "/model_calls.json", "w") as fh:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "device": dev, "batch": B, "results": results}, fh, indent=1)
    print("wrote model_calls.json", flush=True)


# One process for every part: importing transformers alone takes ~8 s on the GPU host. Each part
# writes its file when done, so a part cut off by the timeout keeps the earlier ones.
for name in parts:
    print("== part", name, flush=True)
    try:
        {"source": part_source, "model": part_model, "builders": part_builders}[name]()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
PYEOF
# Budget: 60 s for one Python process (call 1 showed ~8 s for importing transformers alone).
echo "== hf mask rules ($(date +%T))"
timeout 60 python3 "$PY" "$D" source,model,builders >"$D/hf_mask_rules.log" 2>&1
rc=$?
tail -n 60 "$D/hf_mask_rules.log"
echo "== summary: hf_mask_rules rc=$rc ($(date +%T)); files: $(ls "$D" | tr '\n' ' ')"
