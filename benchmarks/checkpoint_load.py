"""Issue 45's checkpoint on the GPU host (run by benchmarks/gpu/operator-inputs.sh PART=load).

  write DIR   a 26B-A4B-shaped Gemma4ForCausalLM with transformers' random init (bf16, on the
              device), saved with save_pretrained (sharded safetensors + index), timed
  hf DIR      transformers' from_pretrained(DIR, dtype=bf16, device_map="cuda") in this process:
              seconds, the peak of RssAnon (sampled every 5 ms), the device's peak allocated
  evict DIR   posix_fadvise(DONTNEED) on every file: the page cache dropped for these files
              without root (clean pages only); prints how much of them is still cached when
              util-linux's fincore is there
Each prints one JSON line.
"""
import json
import os
import subprocess
import sys
import threading
import time


def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return None


class Peak:
    def __init__(self):
        self.peak = rss_anon() or 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            v = rss_anon()
            if v and v > self.peak:
                self.peak = v
            time.sleep(0.005)

    def end(self):
        self.stop = True
        self.t.join()
        v = rss_anon()
        return max(self.peak, v or 0)


def files(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d))


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "evict":
        for p in files(d):
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        cached = None
        try:
            out = subprocess.run(["fincore", "-b", "-n", "-o", "RES"] + files(d), capture_output=True,
                                 text=True, timeout=60).stdout.split()
            cached = sum(int(x) for x in out)
        except Exception:
            pass
        print(json.dumps({"evicted": len(files(d)), "still_cached_bytes": cached}))
        return
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hf_lora_step import config_26b
    from transformers import Gemma4ForCausalLM
    if cmd == "write":
        t0 = time.time()
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda"):
            model = Gemma4ForCausalLM(config_26b("sdpa"))
        torch.set_default_dtype(torch.float32)
        torch.cuda.synchronize()
        built = time.time() - t0
        t1 = time.time()
        model.save_pretrained(d, max_shard_size="5GB")
        os.sync()
        size = sum(os.path.getsize(p) for p in files(d))
        print(json.dumps({"init_s": built, "save_s": time.time() - t1, "bytes": size,
                          "files": len(files(d))}))
        return
    if cmd == "hf":
        peak = Peak()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        model = Gemma4ForCausalLM.from_pretrained(d, dtype=torch.bfloat16, device_map="cuda")
        torch.cuda.synchronize()
        seconds = time.time() - t0
        print(json.dumps({"seconds": seconds, "host_rss_anon_peak_bytes": peak.end(),
                          "device_peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                          "parameters": sum(p.numel() for p in model.parameters())}))
        return
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
