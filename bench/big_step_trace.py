"""A synthetic training loop with a long step, as RMM CSV: the plan's fit timed where its
packing is largest (issue 37; bench/RESULTS.md, twelfth session).

    python3 bench/big_step_trace.py LAYERS STEPS OUT.csv

Parameters of odd sizes (whole MiB plus 100, 300 or 700 KiB, so their pages have room
beside them: holes), then STEPS steps of LAYERS layers: each forward layer keeps three
activations and makes and frees 24 temporaries; the backward pass makes three gradients
and 12 temporaries a layer and frees the layer's activations. 100 layers: 4,201 requests
a step, 8,402 tensors in the plan. Sizes are drawn once (seed 7), so every step is alike.
"""
import random
import sys


def main(argv):
    layers, steps, path = int(argv[0]), int(argv[1]), argv[2]
    rng = random.Random(7)
    out = open(path, "w")
    out.write("Thread,Time,Action,Pointer,Size,Stream\n")
    state = {"addr": 0x10000000, "t": 0}

    def alloc(size):
        state["addr"] += 0x1000000
        state["t"] += 1
        out.write("1,%d,allocate,%#x,%d,0\n" % (state["t"], state["addr"], size))
        return state["addr"], size

    def free(x):
        state["t"] += 1
        out.write("1,%d,free,%#x,%d,0\n" % (state["t"], x[0], x[1]))

    for _ in range(2 * layers):  # parameters: never freed
        alloc((rng.choice([1, 2, 4, 8]) << 20) + rng.choice([100, 300, 700]) * 1024)
    shapes = [[rng.choice([1, 2, 3, 4, 6, 8]) << 20 for _ in range(3)] for _ in range(layers)]
    temps = [[rng.choice([256 << 10, 512 << 10, 1 << 20, 3 << 20]) for _ in range(24)]
             for _ in range(layers)]
    for _ in range(steps):
        kept = []
        for layer in range(layers):
            acts = [alloc(size) for size in shapes[layer]]
            for size in temps[layer]:
                free(alloc(size))
            kept.append(acts)
        loss = alloc(4096)
        for layer in reversed(range(layers)):
            grads = [alloc(size) for size in shapes[layer]]
            for size in temps[layer][:12]:
                free(alloc(size))
            for x in kept[layer] + grads:
                free(x)
        free(loss)
    out.close()


if __name__ == "__main__":
    main(sys.argv[1:])
