"""CPU stand-ins for GPU workloads, for recording allocation traces with alloc_log.so.

    VG_ALLOC_LOG=trace.csv LD_PRELOAD=alloc_log.so python3 workloads.py NAME

Each workload seeds torch (torch.manual_seed(0)), uses 2 threads, builds its model,
optimizer and data, then turns logging on (vg_alloc_log_enable(1), exported by the
preloaded shim) and runs its steps; logging is turned off after the last step, before
the process tears down. There are no unlogged warm-up steps: the trace starts at step 1,
as the GPU traces do, and its first steps are the warm-up (gradients and optimizer state
are created there). Blocks live when logging starts (parameters, data) are written at
time 0. Without the shim the script runs the same and logs nothing.

Per-step inputs are made inside the step (torch.randn / torch.randint), standing for
the host-to-device copy a GPU run allocates each step. Names: cnn_train,
cnn_train_eval, unet_train, lstm_lm, gpt_train, gpt_train_accum, gen_small, gen_large,
mixed_batch.
"""
import ctypes
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Log:
    def __init__(self):
        self.fn = getattr(ctypes.CDLL(None), "vg_alloc_log_enable", None)
        self.t = None

    def start(self):
        if self.fn is None:
            print("not under alloc_log.so: not logging", file=sys.stderr)
        elif self.fn(1) != 0:
            sys.exit("vg_alloc_log_enable(1) failed")
        self.t = time.time()

    def stop(self):
        if self.fn is not None:
            self.fn(0)
        print(f"logged section: {time.time() - self.t:.1f} s", file=sys.stderr)


def step_done(i, t):
    print(f"  step {i}: {time.time() - t:.2f} s", file=sys.stderr)


# ---------------------------------------------------------------- ResNet-18 --


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)), inplace=True)


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def image_train(log, model, opt, steps, batch, hw, classes, per_pixel):
    """The training loop of cnn_train and unet_train: random images and labels (one a
    pixel for a segmentation), cross entropy, gradients set to None after each step."""
    log.start()
    for i in range(steps):
        t = time.time()
        x = torch.randn(batch, 3, hw, hw)
        y = torch.randint(0, classes, (batch, hw, hw) if per_pixel else (batch,))
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_done(i, t)
    log.stop()


def cnn_train(log, steps=16, batch=32, hw=96):
    model = ResNet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    image_train(log, model, opt, steps, batch, hw, 1000, per_pixel=False)


def cnn_train_eval(log, steps=30, every=10, batch=32, hw=96, eval_batches=12, eval_batch=64):
    """cnn_train's loop with an evaluation every `every` steps, as most training scripts
    have: the model in eval mode, under torch.no_grad(), on `eval_batches` batches of
    `eval_batch` images (larger than a training batch: no activations are kept)."""
    model = ResNet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    log.start()
    for i in range(steps):
        t = time.time()
        x = torch.randn(batch, 3, hw, hw)
        y = torch.randint(0, 1000, (batch,))
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_done(i, t)
        if (i + 1) % every == 0:
            model.eval()
            with torch.no_grad():
                correct = 0
                for _ in range(eval_batches):
                    x = torch.randn(eval_batch, 3, hw, hw)
                    y = torch.randint(0, 1000, (eval_batch,))
                    correct += int((model(x).argmax(1) == y).sum())
            model.train()
            print(f"  eval after step {i}: {correct} right", file=sys.stderr)
    log.stop()


# --------------------------------------------------------------------- UNet --


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """4 levels down (32..256 channels), a 512-channel bottleneck, 4 levels up whose
    inputs are torch.cat of the upsampled map and the skip connection."""

    def __init__(self, cin=3, classes=4, base=32):
        super().__init__()
        ch = [base * 2**i for i in range(5)]
        self.down = nn.ModuleList([double_conv(cin if i == 0 else ch[i - 1], ch[i]) for i in range(4)])
        self.mid = double_conv(ch[3], ch[4])
        self.up = nn.ModuleList([nn.ConvTranspose2d(ch[i + 1], ch[i], 2, stride=2) for i in reversed(range(4))])
        self.dec = nn.ModuleList([double_conv(2 * ch[i], ch[i]) for i in reversed(range(4))])
        self.head = nn.Conv2d(ch[0], classes, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


def unet_train(log, steps=16, batch=8, hw=128, classes=4):
    model = UNet(classes=classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    image_train(log, model, opt, steps, batch, hw, classes, per_pixel=True)


# ----------------------------------------------------------------- LSTM LM --


class LSTMLM(nn.Module):
    def __init__(self, vocab=10000, emb=512, hidden=1024, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, layers)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x, h):
        y, h = self.rnn(self.emb(x), h)
        return self.out(y), h


def lstm_lm(log, chunks=16, bptt=35, batch=32, vocab=10000):
    """Truncated BPTT as in PyTorch's word_language_model example: the batchified corpus
    is on the device before the loop, the hidden state is detached between chunks."""
    model = LSTMLM(vocab=vocab)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    corpus = torch.randint(0, vocab, (chunks * bptt + 1, batch))
    h = (torch.zeros(2, batch, 1024), torch.zeros(2, batch, 1024))
    log.start()
    for i in range(chunks):
        t = time.time()
        x = corpus[i * bptt:(i + 1) * bptt]
        y = corpus[i * bptt + 1:(i + 1) * bptt + 1]
        h = tuple(s.detach() for s in h)
        logits, h = model(x, h)
        loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_done(i, t)
    log.stop()


# ------------------------------------------------------------- GPT decoder --


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, cache=None):
        """x: (B, T, d). cache: None (training, causal mask over T) or a list [k, v] of
        (B, H, T0, dh) tensors (or [None, None]) that is replaced by the keys and values
        grown by torch.cat."""
        B, T, d = x.shape
        H = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(B, T, H, d // H).transpose(1, 2)
        k = k.view(B, T, H, d // H).transpose(1, 2)
        v = v.view(B, T, H, d // H).transpose(1, 2)
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[0], cache[1] = k, v
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // H))
        if T > 1:
            S = k.shape[2]
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
            att = att.masked_fill(~mask, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, d, layers, heads):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx, caches=None, start=0):
        """With caches (generation), only the last position's logits are computed, as
        nanoGPT does when it has no targets."""
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(start, start + T, device=idx.device))
        for i, b in enumerate(self.blocks):
            x = b(x, None if caches is None else caches[i])
        if caches is not None:
            x = x[:, -1:, :]
        return self.head(self.ln(x))


def lm_train(log, model, batches, ctx, vocab):
    """AdamW on random tokens, one batch size per step."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    log.start()
    for i, batch in enumerate(batches):
        t = time.time()
        tokens = torch.randint(0, vocab, (batch, ctx + 1))
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.view(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_done(i, t)
    log.stop()


def gpt_train(log, steps=16, batch=8, ctx=256, vocab=8192):
    lm_train(log, GPT(vocab, ctx, d=512, layers=6, heads=8), [batch] * steps, ctx, vocab)


def gpt_train_accum(log, steps=4, accum=32, batch=2, ctx=256, vocab=8192):
    """Gradient accumulation, as large models are trained: each AdamW step sums the
    gradients of `accum` micro-batches (the first makes the .grad tensors, the others
    add into them; zero_grad frees them), so the program's step, about 9,700 requests
    here, is longer than the longest step looked for (docs/decisions.md A13). A 4-layer
    GPT (d_model 384) keeps the trace small."""
    model = GPT(vocab, ctx, d=384, layers=4, heads=6)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    log.start()
    for i in range(steps):
        t = time.time()
        for _ in range(accum):
            tokens = torch.randint(0, vocab, (batch, ctx + 1))
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.view(-1, vocab), tokens[:, 1:].reshape(-1))
            (loss / accum).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_done(i, t)
    log.stop()


# ------------------------------------------------------------- generation --


@torch.no_grad()
def generate(model, caches, prompt, new, log, log_from=0, prefill_chunk=None, report=64):
    """Greedy decoding of `new` tokens after `prompt` (B, P): the prompt goes through the
    model in one pass (or in chunks of prefill_chunk tokens), then one token a step;
    each layer's K/V cache grows by torch.cat. Logging starts before step log_from
    (step 0 is the prefill), and ends after the last step."""
    B, P = prompt.shape
    chunk = prefill_chunk or P
    t = time.time()
    for s in range(0, P, chunk):
        if s == 0 and log_from == 0:
            log.start()
        logits = model(prompt[:, s:s + chunk], caches, s)
    print(f"  prefill of {P} tokens: {time.time() - t:.2f} s", file=sys.stderr)
    t = time.time()
    start = P
    idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
    for i in range(1, new):
        if i == log_from:
            log.start()
        logits = model(idx, caches, start)
        start += 1
        idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        if i % report == 0:
            print(f"  tokens {i - report}..{i}: {time.time() - t:.2f} s, ctx {start}",
                  file=sys.stderr)
            t = time.time()
    log.stop()
    return idx


def gen_small(log, layers=4, d=256, heads=4, batch=1, prompt=32, new=416, vocab=8192):
    """The whole generation is logged, the prompt's forward pass (prefill) first. 416
    new tokens (not 480) keep the trace under 3 MB: each token is ~186 events."""
    model = GPT(vocab, prompt + new, d, layers, heads).eval()
    caches = [[None, None] for _ in range(layers)]
    idx = torch.randint(0, vocab, (batch, prompt))
    generate(model, caches, idx, new, log)


def gen_large(log, layers=8, d=1024, heads=16, batch=16, prompt=1792, new=256, window=128,
              vocab=8192):
    """The same decoder at scale: 16 sequences, a 1,792-token prompt (prefilled in chunks
    of 256 tokens), 256 new tokens; only the last `window` decoding steps are logged
    (the caches, parameters and current tokens live then are the trace's time-0
    allocations). At the end the context is prompt + new - 1 = 2,047 tokens and the
    caches hold 2 * layers * batch * ctx * d * 4 bytes = 2.15 GB."""
    model = GPT(vocab, prompt + new, d, layers, heads).eval()
    caches = [[None, None] for _ in range(layers)]
    idx = torch.randint(0, vocab, (batch, prompt))
    generate(model, caches, idx, new, log, log_from=new - window, prefill_chunk=256, report=32)


# ------------------------------------------------------------ mixed batch --


def mixed_batch(log, batches=(8, 32, 16, 48, 24, 40, 12, 56), ctx=128, vocab=8192):
    """A small GPT (4 layers, d_model 256) trained on batches whose size changes every
    step, as when batches are packed from variable-length data."""
    lm_train(log, GPT(vocab, ctx, d=256, layers=4, heads=4), batches, ctx, vocab)


WORKLOADS = {f.__name__: f for f in (cnn_train, cnn_train_eval, unet_train, lstm_lm, gpt_train,
                                     gpt_train_accum, gen_small, gen_large, mixed_batch)}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in WORKLOADS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(WORKLOADS)}}}")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    t = time.time()
    WORKLOADS[sys.argv[1]](Log())
    print(f"{sys.argv[1]}: {time.time() - t:.1f} s in all", file=sys.stderr)
