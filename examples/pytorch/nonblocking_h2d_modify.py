"""S3 in PyTorch: a pinned source modified during a non_blocking host-to-device copy.

The copy reads the pinned buffer later; writing it first sends the new values, the old
ones, or a mix. With --fixed the copy is waited for before the write."""
import sys

import torch

src = torch.ones(1 << 22).pin_memory()
torch.cuda._sleep(100_000_000)  # the stream is busy
dev = src.to("cuda", non_blocking=True)
if "--fixed" in sys.argv:
    torch.cuda.current_stream().synchronize()
src.fill_(2.0)  # the bug without --fixed: the copy may not have read src yet
print("device sum", dev.sum().item(), "(4194304 when the copy saw the old values)")
