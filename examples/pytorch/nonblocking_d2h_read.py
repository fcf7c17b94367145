"""S4 in PyTorch: a non_blocking device-to-host copy read before synchronising.

`t.to("cpu", non_blocking=True)` returns at once into pinned memory; reading it before
torch.cuda.synchronize() may read stale data. With --fixed the stream is synchronised."""
import sys

import torch

t = torch.full((1 << 22,), 7.0, device="cuda")
torch.cuda._sleep(100_000_000)  # the stream is busy
host = t.to("cpu", non_blocking=True)
if "--fixed" in sys.argv:
    torch.cuda.current_stream().synchronize()
print("first value", host[0].item())  # the bug without --fixed: not synchronised
