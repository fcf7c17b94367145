"""S2 in PyTorch: a tensor freed while a side stream still uses it.

x is produced on the default stream and consumed by a long kernel on a side stream; it is
dropped without x.record_stream(side), so the allocator may hand its memory to y while
the side stream is still writing x. (It writes x from another tensor: arithmetic on x
itself would only turn vramguard's NaN poison into the same NaN.) With --fixed,
record_stream is called."""
import sys

import torch

side = torch.cuda.Stream()
x = torch.ones((64 << 20) // 4, device="cuda")
w = torch.ones((64 << 20) // 4, device="cuda")
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    torch.cuda._sleep(4_000_000_000)  # a long kernel on the side stream (~2 s on an H100)
    torch.mul(w, 2, out=x)          # ... that then writes x
if "--fixed" in sys.argv:
    x.record_stream(side)
del x                               # the bug: freed on the default stream only
y = torch.zeros((64 << 20) // 4, device="cuda")
torch.cuda.synchronize()
print("y sum", y.sum().item(), "(0 when nothing overwrote it)")
