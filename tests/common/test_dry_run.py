"""measure_step on models small enough to count by hand: FLOPs, saved activations, backward's largest step."""

import torch
from torch import nn
from torch.nn import functional as F

from common.training import dry_run
from common.training.optim import adamw

B, T, C, V = 32, 16, 8, 64  # batch, time, width, vocabulary: B*T*V*4 bytes dwarf V*C*4


def linear_head():
    """A language model's head alone: fixed features (B, T, C) -> logits (B, T, V) -> cross-entropy."""
    torch.manual_seed(0)
    head = nn.Linear(C, V, bias=False)
    x, y = torch.randn(B, T, C), torch.randint(0, V, (B, T))

    def loss() -> torch.Tensor:
        return F.cross_entropy(head(x).view(-1, V), y.view(-1))

    return head, loss


def step(model: nn.Module, loss, dtype=None) -> dry_run.StepCost:
    return dry_run.measure_step(model, adamw(model, 1e-3, 0.1, (0.9, 0.95), torch.device("cpu")), loss, dtype)


def test_a_linear_heads_step_is_counted_exactly():
    cost = step(*linear_head())
    assert cost.flops == 4 * B * T * C * V  # forward and the weight's gradient: 2BTCV each (x needs none)
    logits, features, targets = B * T * V * 4, B * T * C * 4, B * T * 8
    # the features (for the weight's gradient), the log-probabilities (for log_softmax's), the targets
    assert logits + features + targets <= cost.activation_bytes <= logits + features + targets + 64
    assert cost.backward_bytes == 2 * logits  # log_softmax's backward: the gradient in and the gradient out
    assert cost.parameter_bytes == cost.gradient_bytes == V * C * 4
    assert cost.optimizer_bytes >= 2 * V * C * 4  # two moments, and a step counter
    assert cost.memory_bytes == (cost.parameter_bytes + cost.gradient_bytes + cost.optimizer_bytes
                                 + cost.activation_bytes + cost.backward_bytes)
    assert cost.operations > 10


def test_bf16_saves_smaller_activations():
    assert step(*linear_head(), torch.bfloat16).activation_bytes < step(*linear_head()).activation_bytes


class Attention(nn.Module):
    """Causal self-attention with attention dropout, as chapters 1 and 2 write it."""

    def __init__(self, heads: int = 2):
        super().__init__()
        self.qkv, self.heads = nn.Linear(C, 3 * C), heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).split(C, 2))
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, is_causal=True)  # (B, nh, T, hs)


def test_attention_dropout_is_left_to_the_gpus_kernel_which_saves_no_attention_matrix():
    torch.manual_seed(0)
    long = 128  # a context long enough that the (T, T) matrix outweighs everything else saved
    model, x = Attention(), torch.randn(B, long, C)
    matrix = B * model.heads * long * long  # elements of one (B, nh, T, T) attention matrix

    def loss() -> torch.Tensor:
        return model(x).square().mean()

    assert step(model, loss).activation_bytes >= matrix * 4  # the CPU's fp32 fallback keeps it
    assert step(model, loss, torch.bfloat16).activation_bytes < matrix * 2  # as on a GPU: no matrix at all


def test_a_step_too_small_for_the_gpu_is_timed_by_its_launches():
    cost = step(*linear_head())
    assert cost.laptop_seconds == cost.operations * dry_run.LAUNCH_SECONDS
