"""What vramguard uses of torch.optim.optimizer: the global step post-hooks, called after
every Optimizer.step() with (optimizer, args, kwargs) as PyTorch calls them."""
_global_optimizer_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _global_optimizer_post_hooks.append(hook)


class Optimizer:
    def step(self, *args, **kwargs):
        for hook in _global_optimizer_post_hooks:
            hook(self, args, kwargs)
