"""A generation loop whose key/value caches grow by torch.cat, for comparing allocators on
a GPU: the workload of bench/traces/gen_large.csv.gz (bench/record/workloads.py), run live.

    python bench/pytorch_generate.py --alloc ALLOC [--tokens N] [--json FILE]
                                     [--vg-option KEY=VALUE ...]

ALLOC is default (PyTorch's caching allocator), expandable (expandable_segments:True) or
vramguard (vramguard.enable(), fast mode; --vg-option plan=on --vg-option verbose=1 to
follow plans, with the step search's and the page moves' figures on stderr at exit).

The model is bench/record/workloads.py's GPT decoder, the one gen_large was recorded
with, with random weights (8 layers, d_model 1024, 16 heads, vocab 8192, fp32); 16
sequences, a 1,792-token prompt prefilled in chunks of 256 tokens, then greedy decoding
of --tokens tokens (256) one at a time; each layer's K and V caches grow by torch.cat
every token (the new copy made, then the old one freed), as Hugging Face's
decoding loops do without a static cache. At the end the caches hold 2.15 GB. There is no
step for plan=on to find: sizes never repeat (docs/decisions.md A13, "settles").

Prints one JSON object (and writes it to --json): the tokens generated for sequence 0 and
a checksum of all of them (the same for every allocator: deterministic algorithms, and the
allocator changes only addresses), the median time per token after the first 32 (timed
over 16-token groups between synchronisations), the prefill's time, the whole run's, and
peak allocated/reserved bytes as the allocator in use counts them. --cpu-smoke runs a tiny
model on the CPU, to check the script where there is no GPU.
"""
import argparse
import json
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--alloc", required=True, choices=["default", "expandable", "vramguard"])
ap.add_argument("--tokens", type=int, default=256)
ap.add_argument("--json")
ap.add_argument("--vg-option", action="append", default=[], metavar="KEY=VALUE",
                help="vramguard only: an option of vramguard.enable(), e.g. plan=on")
ap.add_argument("--cpu-smoke", action="store_true",
                help="run a tiny model on the CPU (no GPU figures): a check of the script itself")
args = ap.parse_args()
if args.cpu_smoke and args.alloc != "default":
    sys.exit("--cpu-smoke runs PyTorch's CPU allocator: --alloc default")

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
if args.alloc == "expandable":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch  # noqa: E402  (after the environment above)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "record"))
from workloads import GPT  # noqa: E402  (the model gen_large's trace was recorded with)

if args.alloc == "vramguard":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import vramguard
    vramguard.enable(mode="fast", **dict(o.split("=", 1) for o in args.vg_option))

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cpu" if args.cpu_smoke else "cuda")
LAYERS, D, HEADS, VOCAB, BATCH, PROMPT, CHUNK, WARM, GROUP = 8, 1024, 16, 8192, 16, 1792, 256, 32, 16
if args.cpu_smoke:
    LAYERS, D, HEADS, VOCAB, BATCH, PROMPT, CHUNK, WARM, GROUP = 2, 64, 4, 512, 2, 48, 16, 4, 4


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def main():
    model = GPT(VOCAB, PROMPT + args.tokens, D, LAYERS, HEADS).to(dev).eval()
    caches = [[None, None] for _ in range(LAYERS)]
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    prompt = torch.randint(0, VOCAB, (BATCH, PROMPT), device=dev, generator=gen)
    sync()
    t0 = time.perf_counter()
    for s in range(0, PROMPT, CHUNK):
        logits = model(prompt[:, s:s + CHUNK], caches, s)
    sync()
    prefill = time.perf_counter() - t0
    idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
    out = [idx]
    marks = []
    for i in range(1, args.tokens):
        if i >= WARM and (i - WARM) % GROUP == 0:
            sync()
            marks.append(time.perf_counter())
        idx = model(idx, caches, PROMPT + i - 1)[:, -1, :].argmax(dim=-1, keepdim=True)
        out.append(idx)
    sync()
    marks.append(time.perf_counter())
    tokens = torch.cat(out, dim=1).cpu()
    per = [(b - a) / GROUP for a, b in zip(marks, marks[1:])]
    return tokens, prefill, time.perf_counter() - t0, per


tokens, prefill, wall, per = main()
if args.alloc == "vramguard":
    st = vramguard.memory_stats()
    peak_alloc, peak_res = st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"]
elif args.cpu_smoke:
    peak_alloc = peak_res = None
else:
    peak_alloc, peak_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
res = {
    "workload": "generate", "alloc": args.alloc, "options": args.vg_option,
    "gpu": None if args.cpu_smoke else torch.cuda.get_device_name(), "torch": torch.__version__, "tokens": args.tokens,
    "tokens_seq0": tokens[0].tolist(), "checksum": int((tokens.long() * torch.arange(
        1, tokens.numel() + 1).view_as(tokens)).sum()),
    "token_ms_median": statistics.median(per) * 1e3 if per else None,
    "token_ms_groups": [round(t * 1e3, 3) for t in per],
    "prefill_s": round(prefill, 3), "wall_s": round(wall, 3),
    "peak_allocated": peak_alloc, "peak_reserved": peak_res,
}
print(json.dumps(res))
if args.json:
    with open(args.json, "w") as f:
        f.write(json.dumps(res) + "\n")
