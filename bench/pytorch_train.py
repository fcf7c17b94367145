"""A real training loop for comparing allocators side by side on a GPU.

    python bench/pytorch_train.py --alloc ALLOC [--model gpt2|resnet50] [--steps N]
                                  [--json FILE] [--trace FILE]

ALLOC is one of
    default     PyTorch's caching allocator
    expandable  PyTorch's allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    vramguard   vramguard.enable() (fast mode)
    guard       vramguard.enable(mode="guard")
    memcheck    vramguard.enable(mode="memcheck") (run it under `python -m vramguard run
                --mode=memcheck`, which patches the kernels as they load)

gpt2 is GPT-2 small (124M parameters: 12 layers, 12 heads, 768 wide, 1024 tokens, the
50304-token vocabulary) built from code with random weights, trained on random tokens
with AdamW under bf16 autocast; resnet50 is torchvision's ResNet-50 on random images with
SGD. Everything is seeded and deterministic algorithms are on, so the losses of two runs
are the same bit for bit when the allocator changes nothing but addresses. Attention is
written out (no fused attention kernel, whose backward pass adds with atomics).

It prints one JSON object (and writes it to --json): the loss of every step as float
hex strings, the median step time after the warm-up, and peak allocated/reserved bytes
as the allocator in use counts them. --trace records vramguard's allocation trace (RMM CSV);
--reserved-per-step records reserved bytes after every step (outside the timed steps' cost
only approximately: it reads the allocator's statistics once per step).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--alloc", required=True, choices=["default", "expandable", "vramguard", "guard",
                                                       "memcheck"])
ap.add_argument("--model", default="gpt2", choices=["gpt2", "resnet50"])
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--batch", type=int, default=0, help="default: 8 (gpt2), 128 (resnet50)")
ap.add_argument("--json")
ap.add_argument("--trace", help="vramguard only: record the allocation trace (RMM CSV)")
ap.add_argument("--memory-history", metavar="SNAPSHOT.pickle",
                help="PyTorch's allocator only: record its history from the start and dump a "
                     "memory snapshot at the end (for python -m vramguard convert)")
ap.add_argument("--vg-option", action="append", default=[], metavar="KEY=VALUE",
                help="vramguard only: an option of vramguard.enable(), e.g. plan=on")
ap.add_argument("--eval-every", type=int, default=0, metavar="N",
                help="after every N-th step, evaluate: the model in eval mode under "
                     "torch.no_grad(), --eval-batches batches of twice the batch size (its own "
                     "random data: the training losses are those of a run without it)")
ap.add_argument("--eval-batches", type=int, default=8)
ap.add_argument("--accum", type=int, default=1, metavar="N",
                help="gradient accumulation: each step sums the gradients of N micro-batches "
                     "of --batch (its loss, in losses, is the last micro-batch's)")
ap.add_argument("--reserved-per-step", action="store_true",
                help="also record reserved bytes after every step (where the peak is reached)")
args = ap.parse_args()
if args.accum < 1:
    ap.error("--accum: 1 or more micro-batches a step")

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
if args.alloc == "expandable":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch  # noqa: E402  (after the environment above)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

if args.alloc in ("vramguard", "guard", "memcheck"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import vramguard
    opts = {"trace": args.trace} if args.trace else {}
    opts.update(o.split("=", 1) for o in args.vg_option)
    vramguard.enable(mode="fast" if args.alloc == "vramguard" else args.alloc, **opts)

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50304, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


if args.model == "gpt2":
    batch = args.batch or 8
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def data(gen):
        tok = torch.randint(0, 50304, (batch, 1025), device=dev, generator=gen)
        return tok[:, :-1], tok[:, 1:]

    def loss_of(x, y):
        return model(x, y)
else:
    import torchvision
    batch = args.batch or 128
    model = torchvision.models.resnet50(weights=None).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def data(gen):
        x = torch.randn(batch, 3, 224, 224, device=dev, generator=gen)
        return x.to(memory_format=torch.channels_last), torch.randint(0, 1000, (batch,), device=dev,
                                                                       generator=gen)

    def loss_of(x, y):
        return F.cross_entropy(model(x), y)

def reserved_now():
    if args.alloc in ("vramguard", "guard", "memcheck"):
        return vramguard.memory_stats()["reserved_bytes.all.current"]
    return torch.cuda.memory_reserved()


if args.memory_history:
    if args.alloc not in ("default", "expandable"):
        sys.exit("--memory-history records PyTorch's own allocator (--alloc default or expandable)")
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
reserved_steps = []
gen = torch.Generator(device=dev)
gen.manual_seed(1234)
losses = torch.empty(args.steps, device=dev)
eval_gen = torch.Generator(device=dev)
eval_gen.manual_seed(4321)
eval_losses = []
marks = []
host_ms = []  # the host's time to queue each step (≈ the step time when the host is the bound)
torch.cuda.synchronize()
for step in range(args.steps):
    h0 = time.perf_counter()
    if step >= args.warmup and (step - args.warmup) % 10 == 0:
        torch.cuda.synchronize()
        marks.append(time.perf_counter())
    for micro in range(args.accum):
        x, y = data(gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(x, y)
        if micro == 0:  # (after the first forward pass, as without accumulation)
            opt.zero_grad(set_to_none=True)
        (loss if args.accum == 1 else loss / args.accum).backward()
    opt.step()
    losses[step] = loss.detach()
    if step >= args.warmup:
        host_ms.append((time.perf_counter() - h0) * 1e3)
    if args.eval_every and (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for _ in range(args.eval_batches):
                ex, ey = data(eval_gen)
                ex, ey = torch.cat([ex, ex]), torch.cat([ey, ey])  # (twice the batch)
                eval_losses.append(loss_of(ex, ey).detach())
        model.train()
    if args.reserved_per_step:
        reserved_steps.append(reserved_now())
torch.cuda.synchronize()
marks.append(time.perf_counter())
per10 = [(b - a) / 10 for a, b in zip(marks, marks[1:])]

if args.alloc in ("vramguard", "guard", "memcheck"):
    st = vramguard.memory_stats()
    peak_alloc, peak_res = st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"]
    errors = len(vramguard.errors())
else:
    st = torch.cuda.memory_stats()
    peak_alloc, peak_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    errors = 0
counts = {k: st.get(k) for k in ("num_device_alloc", "num_device_free", "num_alloc_retries",
                                  "num_ooms", "segment.all.peak")}
if args.memory_history:
    torch.cuda.memory._dump_snapshot(args.memory_history)
    torch.cuda.memory._record_memory_history(enabled=None)
free, total = torch.cuda.mem_get_info()
out = {
    "model": args.model, "alloc": args.alloc + (
        " (vramguard run)" if args.alloc in ("vramguard", "guard", "memcheck") and vramguard._lib._preloaded()
        else ""),
    "vg_options": args.vg_option, "batch": batch, "steps": args.steps,
    "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
    "step_ms_median": statistics.median(per10) * 1e3 if per10 else None,
    "step_ms_all": [round(t * 1e3, 3) for t in per10],
    "host_ms_median": statistics.median(host_ms) if host_ms else None,
    "peak_allocated": peak_alloc, "peak_reserved": peak_res,
    "device_used_at_end": total - free, "errors": errors, "counts": counts,
    "reserved_per_step": reserved_steps,
    "losses": [float(v).hex() for v in losses.tolist()],
    "accum": args.accum, "eval_every": args.eval_every, "eval_batches": args.eval_batches if args.eval_every else 0,
    "eval_losses": [float(v).hex() for v in eval_losses],
    "final_loss": float(losses[-1]),
}
text = json.dumps(out)
print(text)
if args.json:
    with open(args.json, "w") as f:
        f.write(text + "\n")
