"""A stand-in for PyTorch with just what vramguard.enable() touches, so that CI (no GPU,
no PyTorch) can run `python -m vramguard run` end to end. It allocates nothing: the test
scripts allocate through the package's library themselves, as PyTorch's pluggable
allocator would."""
import types


class OutOfMemoryError(RuntimeError):
    pass


class Tensor:
    def record_stream(self, stream):
        pass


class _PluggableAllocator:
    def __init__(self, path, alloc, free):
        self.path, self.alloc, self.free = path, alloc, free
        nothing = lambda fn: None
        self._allocator = types.SimpleNamespace(  # (PyTorch 2.3 and later have these)
            set_begin_allocate_to_pool=nothing, set_end_allocate_to_pool_fn=nothing,
            set_release_pool=nothing)


allocator = []  # what change_current_allocator was given
memory = types.SimpleNamespace(CUDAPluggableAllocator=_PluggableAllocator,
                               change_current_allocator=allocator.append)
cuda = types.SimpleNamespace(
    OutOfMemoryError=OutOfMemoryError, memory=memory, is_initialized=lambda: False,
    memory_allocated=lambda device=None: 0, current_device=lambda: 0,
    empty_cache=lambda: None, set_per_process_memory_fraction=lambda f, device=None: None)

from torch import optim  # noqa: E402 (a package, as PyTorch's is)
