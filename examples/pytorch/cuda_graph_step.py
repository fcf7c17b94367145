"""A training step captured as a CUDA graph (torch.cuda.graph) and replayed, beside the
same steps run eagerly: a check of the allocator under the program, not a planted bug.

A graph replays its kernels on the addresses they had when it was captured, so the
allocator must keep the memory a capture used for the graph while the graph lives, even
the temporaries the capture freed (PyTorch's private pools; vramguard's graph pools,
docs/decisions.md A7). After the capture the script allocates tensors of the sizes the
step uses, replays the graph, and checks that no replay wrote them and that the graph's
losses equal the eager ones. Exit status 1 if either fails. (--fixed is accepted and
changes nothing: there is no bug to fix.) --compile also trains with the step compiled by
torch.compile(mode="reduce-overhead"), whose CUDA graphs inductor captures (under vramguard
without graph trees, which pluggable allocators cannot serve: docs/decisions.md A7)."""
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

N, D, H, STEPS = 256, 512, 2048, 20


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(),
                                torch.nn.Linear(H, D)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


torch.use_deterministic_algorithms(True)
torch.manual_seed(1)
data = [(torch.randn(N, D, device="cuda"), torch.randn(N, D, device="cuda")) for _ in range(STEPS + 3)]

# Eager.
model, opt = model_and_optimizer()
eager = []
for x, y in data:
    opt.zero_grad(set_to_none=True)
    eager.append(step(model, opt, x, y).item())

# Captured: three warm-up steps on a side stream (as PyTorch's documentation does), then
# one step captured and replayed for the others.
model, opt = model_and_optimizer()
static_x, static_y = data[0][0].clone(), data[0][1].clone()
graphed = []
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for x, y in data[:3]:
        opt.zero_grad(set_to_none=True)
        graphed.append(step(model, opt, x, y).item())
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = step(model, opt, static_x, static_y)

# Tensors made after the capture, of the sizes the step's temporaries had: an allocator
# that gave them the graph's memory would have the replays write over them.
probes = [torch.full((rows, cols), 7.0, device="cuda")
          for rows, cols in ((N, H), (N, D), (H, D), (D, H), (N, 1), (H, 1)) for _ in range(4)]
for x, y in data[3:]:
    static_x.copy_(x)
    static_y.copy_(y)
    graph.replay()
    graphed.append(static_loss.item())
torch.cuda.synchronize()

damaged = sum(1 for p in probes if not bool((p == 7.0).all()))
same = sum(a == b for a, b in zip(eager, graphed))
close = all(abs(a - b) <= 1e-5 * max(1.0, abs(a)) for a, b in zip(eager, graphed))
print(f"graph replays: {STEPS}; losses equal to the eager run's: {same} of {len(eager)} "
      f"bit for bit, all within 1e-5: {close}; tensors written by a replay: {damaged} of "
      f"{len(probes)}")
if "--compile" in sys.argv:
    model, opt = model_and_optimizer()
    loss_of = torch.compile(lambda x, y: torch.nn.functional.mse_loss(model(x), y),
                            mode="reduce-overhead")
    compiled, probes2 = [], []
    for i, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        loss.backward()
        opt.step()
        compiled.append(loss.item())
        probes2.append(torch.full((N, H), float(i), device="cuda"))
    torch.cuda.synchronize()
    damaged += sum(1 for i, p in enumerate(probes2) if not bool((p == float(i)).all()))
    near = all(abs(a - b) <= 1e-3 * max(1.0, abs(a)) for a, b in zip(eager, compiled))
    close = close and near
    print(f"compiled (reduce-overhead): losses within 1e-3 of the eager run's: {near}; "
          f"tensors written by a replay, with the probes above: {damaged}")
reserved = torch.cuda.memory_reserved()
del graph, static_loss
torch.cuda.empty_cache()
print(f"reserved with the graph: {reserved / 2**20:.1f} MiB; after it is destroyed and the "
      f"cache emptied: {torch.cuda.memory_reserved() / 2**20:.1f} MiB")
sys.exit(1 if damaged or not close else 0)
