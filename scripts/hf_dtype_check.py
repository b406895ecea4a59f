import sys, inspect, torch
sys.path.insert(0, 'scripts')
import make_parity_fixture as f
from transformers import Gemma4ForCausalLM
import transformers.models.gemma4.modeling_gemma4 as mm
cfg = f.text_config('tiny'); m = Gemma4ForCausalLM(cfg); m.to(torch.bfloat16).save_pretrained('/tmp/t')
print('keep_fp32', getattr(Gemma4ForCausalLM, '_keep_in_fp32_modules', None), getattr(Gemma4ForCausalLM, '_keep_in_fp32_modules_strict', None))
m2 = Gemma4ForCausalLM.from_pretrained('/tmp/t', dtype=torch.bfloat16)
print('non-bf16:', {n: str(p.dtype) for n, p in list(m2.named_parameters()) + list(m2.named_buffers()) if p.dtype != torch.bfloat16 and 'layers.0.' in n or ('layers' not in n and p.dtype != torch.bfloat16)})
for obj in (type(m2.model.norm), type(m2.model.embed_tokens), type(m2.model.rotary_emb)):
    for name in ('forward', '_norm'):
        fn = getattr(obj, name, None)
        if fn is not None:
            try: print('----', obj.__name__, name, '\n', inspect.getsource(fn)[:1400])
            except Exception as e: print(e)
print(inspect.getsource(mm.apply_rotary_pos_emb)[-600:])
print(inspect.getsource(type(m2).forward)[-1800:])
