"""torch.optim as PyTorch lays it out: the optimizer module is imported, then its name is
deleted from the package (PyTorch's `del optimizer`), so torch.optim.optimizer is reached
through the import system only."""
from .optimizer import Optimizer, register_optimizer_step_post_hook  # noqa: F401

del optimizer  # noqa: F821 (as PyTorch's torch/optim/__init__.py does)
