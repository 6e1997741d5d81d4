"""torch glue for the mixnet package: alltoallv over CPU tensors (with
autograd) and gate-id buffers for report_gate. torch is imported on first use.

The extension never sees a torch tensor: this module checks the tensor, makes
it contiguous, and hands the runtime its data_ptr() and byte counts, keeping
the tensors referenced until the (synchronous) call returns. Runs on the
caller's thread (the training loop; autograd's backward for CPU tensors runs
there too).
"""

import math

_torch_module = None
_function_class = None


def _torch():
    global _torch_module
    if _torch_module is None:
        try:
            import torch
        except ImportError as e:
            raise ImportError("mixnet.alltoallv and mixnet.report_gate need PyTorch "
                              "(Debian: apt-get install python3-torch)") from e
        _torch_module = torch
    return _torch_module


def _session():
    from . import _require
    return _require()


def _check_cpu_tensor(t, name):
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mixnet.alltoallv: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"mixnet.alltoallv: {name} is on {t.device}; only CPU tensors are "
                         "supported (GPU tensors: torch.distributed with NCCL and the MixNet "
                         "net plugin)")
    if t.layout != torch.strided or t.is_quantized:
        raise ValueError(f"mixnet.alltoallv: {name} must be a dense (strided) tensor")


def _splits(splits, n, name, rows):
    """Validates dim-0 splits (one per rank); None means equal splits of `rows`."""
    if splits is None:
        if rows is None or rows % n != 0:
            raise ValueError(f"mixnet.alltoallv: {name} not given and dim 0 ({rows}) is not "
                             f"divisible by the world size {n}")
        return [rows // n] * n
    try:
        out = [int(c) for c in splits]
    except (TypeError, ValueError):
        raise TypeError(f"mixnet.alltoallv: {name} must be a sequence of ints") from None
    if len(out) != n:
        raise ValueError(f"mixnet.alltoallv: {name} has {len(out)} entries, world size is {n}")
    if any(c < 0 for c in out):
        raise ValueError(f"mixnet.alltoallv: {name} has a negative entry: {out}")
    if rows is not None and sum(out) != rows:
        raise ValueError(f"mixnet.alltoallv: {name} sum to {sum(out)} but dim 0 of the "
                         f"tensor is {rows}")
    return out


def _plain(t):
    """A contiguous, materialised (no lazy conj/neg bit) view of `t`'s data."""
    t = t.detach()
    if hasattr(t, "resolve_conj"):
        t = t.resolve_conj().resolve_neg()
    return t.contiguous()


def _run(tensor, output_splits, input_splits, out):
    """One runtime Alltoallv on already validated splits."""
    torch = _torch()
    s = _session()
    x = _plain(tensor)
    row_elems = math.prod(x.shape[1:])
    row_bytes = row_elems * x.element_size()
    out_shape = (sum(output_splits),) + tuple(x.shape[1:])
    if out is None:
        out = torch.empty(out_shape, dtype=x.dtype)
    else:
        _check_cpu_tensor(out, "out")
        if out.dtype != x.dtype:
            raise TypeError(f"mixnet.alltoallv: out has dtype {out.dtype}, the tensor {x.dtype}")
        if tuple(out.shape) != out_shape:
            raise ValueError(f"mixnet.alltoallv: out has shape {tuple(out.shape)}, expected "
                             f"{out_shape}")
        if not out.is_contiguous():
            raise ValueError("mixnet.alltoallv: out must be contiguous")
    esize = x.element_size()
    s.alltoallv(x.data_ptr(), x.numel() * esize, [c * row_bytes for c in input_splits],
                out.data_ptr(), out.numel() * esize, [c * row_bytes for c in output_splits])
    return out


def _alltoallv_function():
    """The autograd Function (built on first use, once torch is imported): the
    backward of an all-to-all is the all-to-all of the gradient with the splits
    swapped."""
    global _function_class
    if _function_class is None:
        torch = _torch()

        class _Alltoallv(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, output_splits, input_splits):
                ctx.splits = (output_splits, input_splits)
                return _run(x, output_splits, input_splits, None)

            @staticmethod
            def backward(ctx, grad):
                output_splits, input_splits = ctx.splits
                return _run(grad, input_splits, output_splits, None), None, None

        _function_class = _Alltoallv
    return _function_class


def alltoallv(tensor, output_splits=None, input_splits=None, *, out=None):
    """All-to-all of a CPU tensor along dim 0, like
    torch.distributed.all_to_all_single: rows [sum(input_splits[:j]), +input_splits[j])
    go to rank j; the result holds output_splits[j] rows from rank j, in rank order.

    Splits count dim-0 rows (elements for a 1-D tensor), one per rank; zeros
    are fine. Both None: equal splits. output_splits None with input_splits
    given: the ranks exchange their counts first (one extra small all-to-all;
    every rank must then call it that way).
    Every rank's splits must agree with its peers' (rank i sends rank j what j
    expects), else mixnet.InvalidArgumentError on both naming both.

    Any dtype; the tensor is made contiguous (a copy when it is not). Returns a
    new tensor, or writes into `out` (contiguous CPU tensor of the result's
    shape and dtype) and returns it. Differentiable when the tensor requires
    grad (backward: the all-to-all with the splits swapped, a collective too,
    so every rank must run backward through it; out= not allowed then). Blocks (GIL released) until done or MIXNET_TIMEOUT_MS passes.
    """
    torch = _torch()
    s = _session()
    n = s.world_size
    _check_cpu_tensor(tensor, "tensor")
    if tensor.dim() == 0:
        raise ValueError("mixnet.alltoallv: the tensor needs at least one dimension")
    rows = tensor.shape[0]
    given_input = input_splits is not None
    input_splits = _splits(input_splits, n, "input_splits", rows)
    if output_splits is None and given_input:
        counts = torch.tensor(input_splits, dtype=torch.int64)
        output_splits = [int(c) for c in _run(counts, [1] * n, [1] * n, None).tolist()]
    else:
        output_splits = _splits(output_splits, n, "output_splits",
                                rows if output_splits is None else None)
    if tensor.requires_grad and torch.is_grad_enabled():
        if out is not None:
            raise ValueError("mixnet.alltoallv: out= is not supported for tensors that "
                             "require grad")
        return _alltoallv_function().apply(tensor, tuple(output_splits), tuple(input_splits))
    return _run(tensor, output_splits, input_splits, out)


def gate_ids_buffer(topk_ids):
    """(contiguous CPU int32/int64 tensor, is_int64, k) for report_gate: k is
    the last dimension of a 2-D or higher tensor, 1 for a 1-D one."""
    torch = _torch()
    ids = topk_ids if isinstance(topk_ids, torch.Tensor) else torch.as_tensor(topk_ids)
    ids = ids.detach()
    if ids.device.type != "cpu":
        ids = ids.to("cpu")
    if ids.dtype not in (torch.int32, torch.int64):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"mixnet.report_gate: expert ids must be integers, got {ids.dtype}")
        ids = ids.to(torch.int64)
    if ids.dim() == 0:
        raise ValueError("mixnet.report_gate: expert ids need shape [tokens, k] or [tokens]")
    k = ids.shape[-1] if ids.dim() >= 2 else 1
    ids = ids.contiguous()
    return ids, ids.dtype == torch.int64, int(k)


def counts_buffer(tokens_per_expert):
    """A contiguous CPU int64 tensor of per-expert token counts for report_counts."""
    torch = _torch()
    c = (tokens_per_expert if isinstance(tokens_per_expert, torch.Tensor)
         else torch.as_tensor(tokens_per_expert))
    c = c.detach()
    if c.device.type != "cpu":
        c = c.to("cpu")
    if c.dtype.is_floating_point or c.dtype.is_complex:
        raise TypeError(f"mixnet.report_counts: counts must be integers, got {c.dtype}")
    if c.dim() != 1:
        raise ValueError(f"mixnet.report_counts: counts need shape [num_experts], got "
                         f"{tuple(c.shape)}")
    return c.to(torch.int64).contiguous()
