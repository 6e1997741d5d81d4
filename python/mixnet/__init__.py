"""MixNet from Python: the runtime's all-to-all for CPU tensors, gate reports
that drive the MixNet controller, and topology inspection.

One session per process (like ``torch.distributed``)::

    import mixnet
    mixnet.init(rank, world_size, store="file:/tmp/run1")   # or tcp://HOST:PORT
    out = mixnet.alltoallv(x, output_splits, input_splits)  # CPU tensor, dim-0 splits
    mixnet.report_gate(layer, topk_ids, num_experts=8, hidden=512)
    mixnet.step()                                            # after each forward pass
    print(mixnet.epoch(), mixnet.topology())
    mixnet.finalize()

Threads: call it from one thread per process (the training loop). The
runtime's own threads (transport progress, the worker agent) never call back
into Python. Collectives release the GIL while they wait; every wait ends at
the runtime's timeouts (MIXNET_TIMEOUT_MS, MIXNET_CONNECT_TIMEOUT_MS).

Errors from the runtime are ``mixnet.Error`` (a RuntimeError; ``.code`` is the
status code name such as ``"INVALID_ARGUMENT"``); ``InvalidArgumentError`` is
also a ValueError, ``DeadlineExceededError`` a TimeoutError and
``UnavailableError`` a ConnectionError. Bad arguments caught in Python raise
ValueError / TypeError directly. After a collective fails the session is
aborted: every later collective raises the first error (finalize and init
again to recover).

torch is imported lazily: ``import mixnet`` works without it (inspection,
``controller_status``); ``alltoallv`` and ``report_gate`` need it.
"""

import atexit
import warnings

from . import _C
from ._tensor import alltoallv, counts_buffer, gate_ids_buffer

Error = _C.Error
InvalidArgumentError = _C.InvalidArgumentError
DeadlineExceededError = _C.DeadlineExceededError
UnavailableError = _C.UnavailableError

__all__ = [
    "init", "finalize", "is_initialized", "rank", "world_size", "local_rank", "host", "host_of",
    "alltoallv", "barrier", "report_gate", "report_counts", "gate_hook", "step", "iteration",
    "epoch", "topology", "stats", "warm_paths", "controller_status", "Error", "InvalidArgumentError",
    "DeadlineExceededError", "UnavailableError",
]

_session = None
_iteration = 0
_moe_defaults = {}
_warned_no_controller = False
_local_rank = None


def _require():
    if _session is None:
        raise RuntimeError("mixnet is not initialised: call mixnet.init(...) first")
    return _session


def init(rank=None, world_size=None, store=None, spec=None, host=None, controller=None, *,
         job="mixnet-python", timeout_ms=0, connect_timeout_ms=0, num_experts=None,
         hidden=None, element_bytes=None, expert_ranks=None):
    """Joins the job: rendezvous, connections to every rank, and (when a
    controller is configured) registration with mixnet-controller.

    rank, world_size: default to what the launcher set: torchrun or
        torch.distributed's env:// (RANK, WORLD_SIZE, optionally LOCAL_RANK,
        and MASTER_ADDR/MASTER_PORT when no store is given), Slurm's srun
        (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or Open MPI's mpirun
        (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK); only one of a launcher's
        rank and world size set raises InvalidArgumentError naming the other.
    store: "file:DIR" (a directory every rank sees; use a fresh one per run) or
        "tcp://HOST:PORT" (rank 0 serves it on HOST:PORT). Default: MIXNET_STORE,
        else a TCP store on the launcher's master host (MASTER_ADDR; Slurm: the
        step's first node; mpirun on one host: 127.0.0.1) at MIXNET_STORE_PORT,
        else MASTER_PORT + 1, else 29501.
    Explicit arguments win over the environment (with store given, no
    master host is needed). local_rank() is the launcher's local rank, or,
    when it gives none, this rank's index among the ranks on its machine.
    spec: cluster spec YAML path (default MIXNET_CLUSTER_SPEC; without one, every
        rank is on one host and talks over loopback / MIXNET_SOCKET_IFNAME).
    host: this rank's host in the spec (default MIXNET_HOST).
    controller: mixnet-controller address, "host:port" or "unix:/path" (default
        MIXNET_CONTROLLER; empty: no controller, report_gate only counts).
    timeout_ms, connect_timeout_ms: 0 takes MIXNET_TIMEOUT_MS and
        MIXNET_CONNECT_TIMEOUT_MS (init waits at most the connect timeout).
    num_experts, hidden, element_bytes, expert_ranks: defaults for report_gate.

    Blocks until every rank has joined (GIL released). Raises mixnet.Error
    subclasses (e.g. DeadlineExceededError when a rank never shows up).
    """
    global _session, _iteration, _moe_defaults, _warned_no_controller
    if _session is not None:
        raise RuntimeError("mixnet is already initialised in this process (call finalize first)")
    global _local_rank
    _local_rank = None
    if rank is None or world_size is None or store is None:
        launch = _C.launch_from_environment(need_store=store is None)
        if launch is not None:
            _, env_rank, env_world, env_local_rank, env_store = launch
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
            store = env_store if store is None else store
            _local_rank = env_local_rank if env_local_rank >= 0 else None
    if rank is None or world_size is None:
        raise ValueError("mixnet.init: give rank and world_size (or start under a launcher: "
                         "torchrun, srun, mpirun)")
    if not isinstance(store, str) or not store:
        raise ValueError("mixnet.init: store must be 'file:DIR' or 'tcp://HOST:PORT' (or start "
                         "under a launcher, or set MIXNET_STORE)")
    _session = _C.Session(int(rank), int(world_size), store, spec or "", host or "",
                          controller or "", job, int(timeout_ms), int(connect_timeout_ms))
    if _local_rank is None:
        _local_rank = _session.local_rank
    _iteration = 0
    _warned_no_controller = False
    _moe_defaults = {k: v for k, v in (("num_experts", num_experts), ("hidden", hidden),
                                       ("element_bytes", element_bytes),
                                       ("expert_ranks", expert_ranks)) if v is not None}


def finalize():
    """Stops the worker agent and closes every connection. Does not wait for
    the other ranks (call barrier() first for an orderly end). Idempotent."""
    global _session
    s, _session = _session, None
    if s is not None:
        s.close()


atexit.register(finalize)


def is_initialized():
    return _session is not None


def rank():
    return _require().rank


def world_size():
    return _require().world_size


def local_rank():
    """The launcher's local rank of this process; when the launcher gives
    none (or there is none), this rank's index among the ranks on its
    machine, found at init."""
    _require()
    return _local_rank


def host():
    """This rank's host name (from the spec, or "localhost" without one)."""
    return _require().host


def host_of(rank):
    return _require().host_of(int(rank))


def barrier():
    """Waits for every rank (bounded by MIXNET_TIMEOUT_MS)."""
    _require().barrier()


def report_gate(layer, topk_ids, *, num_experts=None, hidden=None, element_bytes=None,
                iteration=None, micro_batch=0, expert_ranks=None):
    """Reports one gate output of this rank: ``topk_ids`` is the [tokens, k]
    (or [tokens]) tensor of expert ids the router picked (int32 or int64; other
    integer types are converted; a GPU tensor is copied to the CPU).

    The ids go through the runtime's LocalityCollector (ids checked: in
    [0, num_experts), no repeat within a token) and become this host's bytes to
    each host of its region for dispatch all-to-all ``layer``:
    tokens-per-expert x hidden x element_bytes, experts placed in contiguous
    blocks over the ranks (rank r holds experts [r*E/N, (r+1)*E/N)) unless
    ``expert_ranks`` (expert -> global rank) says otherwise. With a controller
    the row is queued for it (never blocks); reports of the same layer within
    one iteration add up. Without a controller nothing is sent (a warning, once).

    iteration: defaults to the step counter (see step()); every rank must use
    the same numbering. num_experts / hidden / element_bytes / expert_ranks
    default to what init() was given (element_bytes: 2).

    Returns {"layer", "micro_batch", "iteration", "bytes": {host: bytes}, "sent"}.
    """
    ids, is_int64, k = gate_ids_buffer(topk_ids)  # `ids` stays alive across the call
    return _report(layer, ids, is_int64, k, False, num_experts, hidden, element_bytes,
                   iteration, micro_batch, expert_ranks)


def report_counts(layer, tokens_per_expert, *, num_experts=None, hidden=None,
                  element_bytes=None, iteration=None, micro_batch=0, expert_ranks=None):
    """Like report_gate, from this rank's token count per expert (a
    [num_experts] tensor or sequence, e.g. ``routing_map.sum(0)`` of a boolean
    [tokens, num_experts] routing map). num_experts defaults to its length."""
    counts = counts_buffer(tokens_per_expert)
    if num_experts is None and "num_experts" not in _moe_defaults:
        num_experts = counts.numel()
    return _report(layer, counts, True, 1, True, num_experts, hidden, element_bytes, iteration,
                   micro_batch, expert_ranks)


def _report(layer, buf, is_int64, k, counts, num_experts, hidden, element_bytes, iteration,
            micro_batch, expert_ranks):
    global _warned_no_controller
    s = _require()
    num_experts = num_experts if num_experts is not None else _moe_defaults.get("num_experts")
    hidden = hidden if hidden is not None else _moe_defaults.get("hidden")
    element_bytes = (element_bytes if element_bytes is not None
                     else _moe_defaults.get("element_bytes", 2))
    expert_ranks = (expert_ranks if expert_ranks is not None
                    else _moe_defaults.get("expert_ranks"))
    if num_experts is None or hidden is None:
        raise ValueError("mixnet.report_gate: num_experts and hidden are needed "
                         "(pass them here or to mixnet.init)")
    row = s.report_gate(int(layer), buf.data_ptr(), is_int64, buf.numel(), k, int(num_experts),
                        int(hidden), int(element_bytes), int(micro_batch),
                        int(_iteration if iteration is None else iteration),
                        [int(r) for r in expert_ranks] if expert_ranks is not None else [],
                        counts)
    if not s.has_agent and not _warned_no_controller:
        _warned_no_controller = True
        warnings.warn("mixnet.report_gate: no controller configured (controller= or "
                      "MIXNET_CONTROLLER), so gate outputs are counted but sent nowhere",
                      RuntimeWarning, stacklevel=3)
    return row


def gate_hook(layer, select=None, **kwargs):
    """A forward hook for a gate / router module that reports its top-k ids:
    ``gate.register_forward_hook(mixnet.gate_hook(layer, num_experts=8, hidden=512))``.

    select(module, inputs, output) -> tensor picks the routing out of the
    output; by default the output itself when it is a tensor, else its last
    element (e.g. a (weights, ids) tuple). An integer tensor is top-k ids
    (report_gate); a boolean [tokens, num_experts] routing map is reduced to
    tokens per expert (report_counts). Reports only while the module is
    training unless report_eval=True is passed. kwargs go to report_gate.
    """
    report_eval = kwargs.pop("report_eval", False)

    def hook(module, inputs, output):
        if not module.training and not report_eval:
            return None
        if select is not None:
            ids = select(module, inputs, output)
        elif isinstance(output, (tuple, list)):
            ids = output[-1]
        else:
            ids = output
        if getattr(ids, "dtype", None) is not None and str(ids.dtype) == "torch.bool":
            report_counts(layer, ids.reshape(-1, ids.shape[-1]).sum(dim=0), **kwargs)
        else:
            report_gate(layer, ids, **kwargs)
        return None

    return hook


def step(n=1):
    """Advances the iteration counter report_gate uses: call it after every
    forward pass of the model (every micro-batch), on every rank, so all ranks
    number their reports alike. Returns the new value."""
    global _iteration
    _iteration += int(n)
    return _iteration


def iteration():
    return _iteration


def record_trace(path):
    """Appends, per iteration, the token counts the locality collector took
    from this rank's report_gate / report_counts calls (every layer) to `path`
    as one TrafficReport JSON line, written when the next iteration's first
    report comes and at finalize(). The files of all ranks concatenated are a
    trace that `mixnet-demo --trace FILE --placement contiguous` replays (the
    experts numbered as report_gate places them: contiguous blocks per rank,
    unless expert_ranks says otherwise)."""
    _require().record_trace(str(path))


def epoch():
    """The topology epoch this rank's communicator has installed (0 until the
    controller commits a reconfiguration)."""
    return _require().epoch()


def topology():
    """The installed topology: {"epoch", "circuits": [{"switch", "ports",
    "hosts", "nics"}]}; hosts and NICs are the circuit's two ends."""
    return _require().topology()


def stats():
    """Counters: epoch, direct_bytes_sent (over OCS circuits), pieces_resent
    (re-sent over EPS after a circuit died), topologies_installed, and the
    worker agent's (commits, prepares, aborts, reports_sent, ...) or None."""
    return _require().stats()


def warm_paths(timeout_s=60.0):
    """Asks the controller for this region's warm-up sweep and waits (at most
    timeout_s) for its end: every OCS NIC pair the region's circuits can join
    is lit once, so this rank makes its connection over each before the first
    step and the steps open none. Call it once on every rank, after init() and
    before the first step (the sweep starts when every rank of the region
    asked). Returns {"enabled", "complete", "timed_out", "rounds", "planned",
    "reason", "waited_ms"}; "reason" says why it is not complete (the
    controller runs with --warm-paths off, a round failed, the timeout).
    Raises mixnet.Error (code "FAILED_PRECONDITION") without a controller."""
    return _require().warm_paths(float(timeout_s))


def controller_status(target=None, timeout_ms=5000):
    """GetStatus of a mixnet-controller (default: the session's controller):
    rounds committed / aborted / skipped in total and per region, the committed
    topology and its epoch. Works without init() when target is given."""
    if target is None:
        target = _require().controller
        if not target:
            raise ValueError("mixnet.controller_status: no controller configured")
    return _C.controller_status(target, int(timeout_ms))
