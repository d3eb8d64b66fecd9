"""llama.cpp's auto-fit (``--fit``, on by default from b7407): the parameters it changes to fit free device memory.

Read from ggml-org/llama.cpp ``common/fit.cpp`` (``common_params_fit_impl`` and the wrapper ``common_fit_params``;
the same steps were ``llama_params_fit_impl`` in ``src/llama.cpp`` until PR #22171, 2026-04-20, moved them to
libcommon) and ``common/common.cpp`` (``common_init_result``), with the defaults of ``common/common.h``
(``fit_params_target`` 1 GiB per device, ``-fitt``; ``fit_params_min_ctx`` 4096, ``-fitc``):

1. The projected use of every device (model + context + compute buffers, measured with ``n_ctx`` the training
   context x streams when ``-c`` is 0) against its FREE memory (``ggml_backend_dev_memory``, read after the dry run's
   context exists): when every device keeps its target free, nothing changes.
2. With ``-c 0`` only, and a training context above the minimum: the context is interpolated linearly between the
   minimum (measured again) and the maximum, toward the summed free memory less the summed targets (less, over
   several devices, ``(nd + 1) x model bytes per layer / (2 dense | 6 MoE)``), rounded down to ``256 x streams``
   and never below the minimum. One device: done. Target below the minimum context's use: the minimum is kept.
3. Then it moves weights, unless the user placed them: ``-ngl`` given ("n_gpu_layers already set by user to N,
   abort"), ``-ts`` (several devices), ``-sm row`` or ``-sm tensor``, ``-ot``. ``common_fit_params`` catches that
   abort and ``common_init_result`` loads with the parameters as they are then, so the context step 2 reduced is
   kept. Otherwise layers are filled back to front (dense) or, for an MoE model, expert tensors go to system memory
   first ("with only dense weights in device memory there is a total surplus").
"""

from __future__ import annotations

from collections.abc import Callable

from ..._bisect import largest
from ..._record import record
from ...units import GiB, MiB

FIT_MARGIN = GiB  # common/common.h fit_params_target: left free on each device (-fitt MiB)
FIT_MIN_CTX = 4096  # common/common.h fit_params_min_ctx (-fitc)

# Memory a bare card does not report free once a backend context exists on it (the CUDA context, the backend's
# streams and handles), as a share of the card's total: 0.6%, from published logs of cards with nothing else on
# them, where it was 0.55-0.66% (one higher): an RTX 4090 at 24077 MiB free of 24210 (133 MiB, 0.55%; llama.cpp's
# own example, b6895, https://github.com/ggml-org/llama.cpp/blob/master/tools/fit-params/README.md), four L20 with
# ~300 MiB used of 44.5 GiB after a CUDA context (0.66%, CUDA 12.4; https://github.com/ollama/ollama/issues/10146,
# Ollama reads the same cuMemGetInfo) and an RTX 5090 server at 31605 MiB free of 32111 before fitting (506 MiB,
# 1.6%; https://github.com/ggml-org/llama.cpp/pull/25465). A desktop or another process holds more: calibrate on
# the site's logs (kvbudget calibrate LOG --out FILE) and plan with --profile FILE.
BACKEND_CONTEXT_SHARE = 0.006


def backend_context_bytes(total: int) -> int:
    """What a bare card of ``total`` bytes does not show free once llama.cpp's backend context exists."""
    return round(total * BACKEND_CONTEXT_SHARE)


@record
class Fitted:
    """What the auto-fit does: the context it leaves, and what it says and decides after."""

    n_ctx: int  # the context to load with (the one asked for where fit changes nothing)
    free: tuple[int, ...]  # each device's free memory, as fit measures it
    projected: tuple[int, ...]  # each device's projected use with the initial parameters
    target: int
    verdict: str  # "fits" | "context reduced" | "aborted" | "moves weights"
    abort: str = ""  # why step 3 stopped ("n_gpu_layers already set by user to 99")
    lines: tuple[str, ...] = ()  # what it prints (the fit lines of a log)


def fit_context(measure: Callable[[int], tuple[int, ...]], free: tuple[int, ...], target: int, n_ctx: int,
                auto: bool, n_ctx_max: int, min_ctx: int, n_streams: int, model_bytes: int, n_gpu_layers: int,
                moe: bool, abort: str) -> Fitted:
    """Steps 1 and 2 of ``common_params_fit_impl`` and the verdict of step 3. ``measure(n)``: every device's
    projected use (model + context + compute) with context ``n``; ``free``: each device's free memory; ``n_ctx``:
    the context asked for (``n_ctx_max`` when auto); ``model_bytes``: the devices' weights together;
    ``n_gpu_layers``: layers offloaded (for the per-layer deduction); ``abort``: what the user set that stops step
    3 ("" when nothing does)."""
    nd = len(free)
    used = measure(n_ctx)
    lines = [f"projected to use {sum(used) // MiB} MiB of device memory vs. {sum(free) // MiB} MiB of free device memory"]
    if all(f - u >= target for f, u in zip(free, used, strict=True)):
        lines.append(f"will leave {(free[0] - used[0]) // MiB} >= {target // MiB} MiB of free device memory, no changes needed"
                     if nd == 1 else "targets for free memory can be met on all devices, no changes needed")
        return Fitted(n_ctx, free, used, target, "fits", lines=tuple(lines))
    surplus = sum(free) - sum(used) - nd * target
    if surplus < 0:
        lines.append(f"cannot meet free memory target of {target // MiB} MiB, need to reduce device memory by "
                     f"{-surplus // MiB} MiB" if nd == 1 else
                     f"cannot meet free memory targets on all devices, need to use {-surplus // MiB} MiB less in total")
    n = n_ctx
    if surplus < 0 and auto:
        low = min_ctx * n_streams
        if n_ctx_max > low:
            goal = sum(free) - nd * target
            if nd > 1:  # whole layers (dense) or whole tensors (MoE, ~1/3 of a layer) per device: half of one wasted each
                goal -= (nd + 1) * (model_bytes // max(n_gpu_layers, 1)) // (6 if moe else 2)
            used_min = sum(measure(low))
            n = low
            if goal > used_min and sum(used) > used_min:
                n = low + (n_ctx_max - low) * (goal - used_min) // (sum(used) - used_min)
                align = 256 * n_streams  # rounded down for the CUDA backend, divisible by the streams
                n = max(n - n % align, low)
                per_ctx = (sum(used) - used_min) // (n_ctx_max - low)
                lines.append(f"context size reduced from {n_ctx_max} to {n} -> need {(n_ctx_max - n) * per_ctx // MiB} "
                             "MiB less memory in total")
                if nd == 1:
                    lines.append("entire model can be fit by reducing context")
                    return Fitted(n, free, used, target, "context reduced", lines=tuple(lines))
            else:
                lines.append(f"context size reduced from {n_ctx_max} to {n} -> need {(sum(used) - used_min) // MiB} "
                             "MiB less memory in total")
    elif surplus < 0:
        lines.append(f"context size set by user to {n_ctx} -> no change")
    if abort:
        lines.append(f"failed to fit params to free device memory: {abort}, abort")
        return Fitted(n, free, used, target, "aborted", abort, tuple(lines))
    return Fitted(n, free, used, target, "moves weights", lines=tuple(lines))


def user_placement(n_gpu_layers: int, ngl_given: bool, tensor_split: tuple[float, ...], devices: int,
                   split_mode: str, overrides: bool) -> str:
    """What the user set that stops fit's step 3 (common/fit.cpp), as it says it; "" when nothing does."""
    if split_mode == "tensor":
        return "llama_params_fit is not implemented for SPLIT_MODE_TENSOR"
    if ngl_given or n_gpu_layers >= 0:
        return f"n_gpu_layers already set by user to {n_gpu_layers if n_gpu_layers >= 0 else 'all'}"
    if devices > 1 and any(tensor_split):
        return "model_params::tensor_split already set by user"
    if devices > 1 and split_mode == "row":
        return "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented"
    if overrides:
        return "model_params::tensor_buft_overrides already set by user"
    return ""


# common/fit.cpp get_overflow_pattern: what of layer I goes to system memory when it is a partial layer (the first
# partial layer of a device may keep more: ATTN keeps the attention, UP also ffn_up, GATE also ffn_gate; MOE keeps
# everything but the expert tensors)
_OVERFLOW = {"attn": r"\.ffn_(gate|up|gate_up|down).*", "up": r"\.ffn_(gate|gate_up|down).*",
             "gate": r"\.ffn_down.*", "moe": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps"}
_MOE_ALL = r"blk\.\d+\.ffn_(up|down|gate_up|gate)_(ch|)exps"  # fit.cpp pattern_moe_all

Measure = Callable[[int, tuple[tuple[str, str], ...]], int]  # (n_gpu_layers, overrides) -> the device's projected use


@record
class Moved:
    """Step 3 (and 4) on one device: the -ngl and -ot llama.cpp loads with, and what it prints."""

    n_gpu_layers: int  # layers on the GPU, counting the output layer
    partial: int  # of them, layers whose expert tensors (or more, for the first) are in system memory
    overrides: tuple[tuple[str, str], ...]
    used: int  # the device's projected use with them
    lines: tuple[str, ...] = ()


def overflow(n_layer: int, layers: int, partial: int, first: str = "moe") -> tuple[tuple[str, str], ...]:
    """fit.cpp set_ngl_tensor_split_tbo on one device: -ngl ``layers`` (of ``n_layer`` + 1) with the last
    ``partial`` of them partial, the first of those by ``first`` (attn | up | gate | moe), all to the CPU. The
    full layers start at n_layer + 1 - layers (the lowest offloaded ones), so the partial range ends at the output
    layer's index, which has no expert tensors: fit.cpp's count, kept as it is."""
    start = n_layer + 1 - layers + (layers - partial)
    return tuple((rf"blk\.{il}" + _OVERFLOW[first if il == start else "moe"], "CPU")
                 for il in range(start, start + partial))


def fit_weights(mem: Measure, n_layer: int, moe: bool, free: int, target: int, device: str) -> Moved:
    """Steps 3 and 4 of ``common_params_fit_impl`` on one device. Dense: the most layers (filled back to front, the
    output layer first) whose projection stays within free - target. MoE: the same with every offloaded layer's
    expert tensors in system memory (but the lowest one's, as fit.cpp counts); then, when the dense weights alone
    leave a surplus, the partial layers turned back into full ones from the front while they fit, and part of one more
    (its ffn_up, then ffn_gate: the UP and GATE overflow) where it fits. fit.cpp searches by false position; on a
    projection that grows with the layers its answer is the largest count that fits, found here by bisection."""
    budget = free - target
    lines: list[str] = []
    surplus = 0
    if moe:
        surplus = budget - mem(-1, ((_MOE_ALL, "CPU"),))
        lines.append(f"with only dense weights in device memory there is a total surplus of {surplus // MiB} MiB"
                     if surplus > 0 else
                     f"with only dense weights in device memory there is still a total deficit of {-surplus // MiB} MiB")
    lines.append(f"filling dense{'-only' if moe else ''} layers back-to-front:")

    def dense(layers: int) -> tuple[tuple[str, str], ...]:
        return overflow(n_layer, layers, max(layers - 1, 0)) if moe else ()

    top = n_layer + 1
    layers = largest(lambda n: mem(n, dense(n)) <= budget, top)
    ov = dense(layers)
    used = mem(layers, ov)
    lines.append(f"  - {device}: {layers:2d} layers, {used // MiB:6d} MiB used, {(free - used) // MiB:6d} MiB free")
    partial = len(ov)
    if not moe or surplus <= 0:
        return Moved(layers, partial, ov, used, tuple(lines))
    lines.append("converting dense-only layers to full layers and filling them front-to-back with overflow to next "
                 "device/system memory:")
    full = largest(lambda k: mem(layers, overflow(n_layer, layers, layers - k)) <= budget, layers)
    partial = layers - max(full, layers - partial)
    ov = overflow(n_layer, layers, partial)
    used = mem(layers, ov)
    if layers > 1:  # fit one more layer in part: its ffn_up (then also ffn_gate) on the GPU, else only its attention
        for first in ("up", "gate") if mem(layers, overflow(n_layer, layers, partial, "up")) < budget else ("attn",):
            trial = overflow(n_layer, layers, partial, first)
            if (m := mem(layers, trial)) >= budget:
                break
            ov, used = trial, m
    lines.append(f"  - {device}: {layers:2d} layers ({partial:2d} overflowing), {used // MiB:6d} MiB used, "
                 f"{(free - used) // MiB:6d} MiB free")
    return Moved(layers, partial, ov, used, tuple(lines))
