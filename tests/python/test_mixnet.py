#!/usr/bin/env python3
"""Test of the Python package `mixnet` (ctest python_mixnet_test, label cpu).

The parent process checks argument errors in-process, then spawns 4 worker
processes of this file on loopback:
  1. alltoallv (TCP store): several dtypes, skewed and zero splits, 1-D to 3-D tensors,
     non-contiguous input, out=, derived output splits, autograd, every element
     checked; the GIL released while waiting; report_gate / report_counts
     without a controller; then a split mismatch that must raise
     InvalidArgumentError.
  2. torchrun-style start: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
     MASTER_PORT in each worker's environment and mixnet.init() with no
     arguments (the store on MASTER_PORT + 1); rank, world size and local
     rank checked, then an alltoallv (every element checked). The parent
     checks first that a partial set raises InvalidArgumentError naming
     what is missing.
  3. controller (when --controller and --ocsd are given): a 4-host cluster
     spec on 127.x addresses, mixnet-ocsd --backend sim and a real
     mixnet-controller; workers report skewed gate outputs with report_gate and
     dispatch/combine with alltoallv until every rank has installed a new
     epoch; circuits must join hot host pairs and carry bytes. The controller
     runs with mTLS (certificates made by openssl here): each worker dials it
     with MIXNET_CONTROLLER_TLS_* and its own host's certificate, and the
     status is read the same way.
Exit 77 (ctest: skipped) when torch cannot be imported. Every wait is bounded
(MIXNET_* timeouts in the workers, subprocess timeouts here).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
WORLD = 4


def fail(msg):
    raise AssertionError(msg)


def expect_raises(exc_types, fn, *args, contains=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_types as e:
        if contains is not None and contains not in str(e):
            fail(f"{fn.__name__}: error {e!r} does not mention {contains!r}")
        return e
    fail(f"{getattr(fn, '__name__', fn)}{args}: expected {exc_types}, nothing raised")


# ---------------------------------------------------------------- alltoallv --

def make_block(torch, dtype, src, dst, rows, tail):
    """Deterministic values (exact in every tested dtype) of src's block for dst."""
    n = rows * math.prod(tail)
    idx = torch.arange(n, dtype=torch.int64)
    v = (src * 7 + dst * 3 + idx) % 61
    if dtype == torch.bool:
        t = (v % 2) == 1
    elif dtype.is_complex:
        t = torch.complex(v.to(torch.float32), -v.to(torch.float32)).to(dtype)
    else:
        t = v.to(dtype)
    return t.reshape((rows,) + tuple(tail))


def splits_for(src, n, salt):
    out = []
    for dst in range(n):
        c = ((src + 1) * (dst + 2) * 5 + salt) % 17
        if (src + dst + salt) % 3 == 0:
            c = 0
        out.append(c)
    return out


def check_alltoallv(torch, mixnet, dtype, tail, salt, me, n, mode="plain"):
    send_splits = splits_for(me, n, salt)
    recv_splits = [splits_for(src, n, salt)[me] for src in range(n)]
    x = torch.cat([make_block(torch, dtype, me, j, send_splits[j], tail) for j in range(n)])
    expected = torch.cat([make_block(torch, dtype, j, me, recv_splits[j], tail) for j in range(n)])
    if mode == "plain":
        y = mixnet.alltoallv(x, recv_splits, send_splits)
    elif mode == "derived":
        y = mixnet.alltoallv(x, input_splits=send_splits)
    elif mode == "out":
        out = torch.zeros(expected.shape, dtype=dtype)
        y = mixnet.alltoallv(x, recv_splits, send_splits, out=out)
        if y.data_ptr() != out.data_ptr():
            fail("out= did not return the given tensor")
    elif mode == "noncontig":
        # The same rows, from a transposed (non-contiguous) tensor.
        xt = x.reshape(x.shape[0], -1).t().contiguous().t()
        if xt.is_contiguous() and xt.numel() > 1 and xt.shape[1] > 1:
            fail("test set-up: expected a non-contiguous tensor")
        y = mixnet.alltoallv(xt, recv_splits, send_splits).reshape(expected.shape)
    else:
        fail(mode)
    if y.dtype != dtype or tuple(y.shape) != tuple(expected.shape):
        fail(f"{dtype} {mode}: got {y.dtype} {tuple(y.shape)}, expected {tuple(expected.shape)}")
    if not torch.equal(y, expected):
        bad = (y != expected).nonzero()
        fail(f"rank {me} {dtype} tail {tail} {mode}: {bad.shape[0]} wrong elements, first at "
             f"{bad[0].tolist()}")
    return int(expected.numel())


def worker_alltoallv(args):
    import torch
    import mixnet
    mixnet.init(args.rank, args.world, store=args.store)
    me, n = mixnet.rank(), mixnet.world_size()
    assert (me, n) == (args.rank, args.world)
    checked = 0
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
              torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]
    for salt, dtype in enumerate(dtypes):
        checked += check_alltoallv(torch, mixnet, dtype, (), salt, me, n)
    checked += check_alltoallv(torch, mixnet, torch.float32, (3,), 11, me, n)
    checked += check_alltoallv(torch, mixnet, torch.int64, (2, 5), 12, me, n)
    checked += check_alltoallv(torch, mixnet, torch.float32, (4,), 13, me, n, mode="noncontig")
    checked += check_alltoallv(torch, mixnet, torch.float64, (2,), 14, me, n, mode="out")
    checked += check_alltoallv(torch, mixnet, torch.int32, (), 15, me, n, mode="derived")
    # A large, skewed exchange (rendezvous path of the TCP transport).
    big = [0 if j == (me + 1) % n else (me + 1) * 40000 + j for j in range(n)]
    x = torch.arange(sum(big), dtype=torch.float32) + me * 1e6
    recv = [0 if me == (j + 1) % n else (j + 1) * 40000 + me for j in range(n)]
    y = mixnet.alltoallv(x, recv, big)
    off = 0
    for j in range(n):
        src_off = sum(((j + 1) * 40000 + k) if k != (j + 1) % n else 0 for k in range(me))
        want = torch.arange(src_off, src_off + recv[j], dtype=torch.float32) + j * 1e6
        if not torch.equal(y[off:off + recv[j]], want):
            fail(f"rank {me}: big block from rank {j} differs")
        off += recv[j]
    checked += y.numel()
    # The GIL is released while a collective waits: a thread keeps running
    # while rank 0 waits for rank 1, which joins 0.5 s late.
    import threading
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    if me == 1:
        time.sleep(0.5)
    spinner = threading.Thread(target=spin)
    if me == 0:
        spinner.start()
    mixnet.alltoallv(torch.zeros(n), [1] * n, [1] * n)
    if me == 0:
        during = ticks[0]
        stop.set()
        spinner.join()
        if during < 50:
            fail(f"rank 0: a Python thread ran only {during} times during a 0.5 s wait "
                 "(GIL held?)")
    # All splits zero.
    e = mixnet.alltoallv(torch.empty(0, 3), [0] * n, [0] * n)
    assert tuple(e.shape) == (0, 3)
    # Equal splits when none are given.
    eq = mixnet.alltoallv(torch.full((2 * n,), float(me)))
    assert eq.tolist() == [float(j) for j in range(n) for _ in range(2)], eq.tolist()
    # Autograd: d/dx sum(y * y.detach()) routes y's values back: x.grad == x.
    send = splits_for(me, n, 21)
    recv = [splits_for(j, n, 21)[me] for j in range(n)]
    xg = (torch.arange(sum(send) * 2, dtype=torch.float64).reshape(-1, 2) + 100 * me)
    xg.requires_grad_(True)
    yg = mixnet.alltoallv(xg, recv, send)
    (yg * yg.detach()).sum().backward()
    if not torch.equal(xg.grad, xg.detach()):
        fail(f"rank {me}: autograd gradient is not routed back")
    # Bad inputs caught in Python (no collective starts, so ranks stay in step).
    expect_raises(ValueError, mixnet.alltoallv, torch.zeros(3), [1, 1, 1], [1, 1, 1],
                  contains="world size")
    expect_raises(ValueError, mixnet.alltoallv, torch.zeros(4), [1] * n, [2, 2, 2, -2][:n])
    expect_raises(ValueError, mixnet.alltoallv, torch.zeros(5), [1] * n, [1] * n,
                  contains="sum to")
    expect_raises(TypeError, mixnet.alltoallv, [1, 2, 3, 4])
    expect_raises(ValueError, mixnet.alltoallv, torch.tensor(1.0))
    expect_raises(TypeError, mixnet.alltoallv, torch.zeros(n), [1] * n, [1] * n,
                  out=torch.zeros(n, dtype=torch.int32))
    expect_raises(ValueError, mixnet.alltoallv, torch.zeros(n), [1] * n, [1] * n,
                  out=torch.zeros(n + 1))
    # warm_paths without a controller: a clear error, nothing waits.
    e = expect_raises(mixnet.Error, mixnet.warm_paths, 5, contains="no controller configured")
    if e.code != "FAILED_PRECONDITION":
        fail(f"warm_paths without a controller: code {e.code}")
    # report_gate without a controller: counts, warns once, checks ids.
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ids = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])
        row = mixnet.report_gate(0, ids, num_experts=8, hidden=4, element_bytes=2)
        mixnet.report_gate(0, ids.to(torch.int32), num_experts=8, hidden=4, element_bytes=2)
        if not any("no controller" in str(x.message) for x in w) or len(w) != 1:
            fail(f"expected one 'no controller' warning, got {[str(x.message) for x in w]}")
    # One host ("localhost") holds every expert: 2 reports x 8 ids x 4 x 2 bytes.
    if row["sent"] or row["bytes"] != {"localhost": 64.0}:
        fail(f"report_gate row {row}")
    e1 = expect_raises(mixnet.InvalidArgumentError, mixnet.report_gate, 0,
                       torch.tensor([[0, 9]]), num_experts=8, hidden=4)
    assert e1.code == "INVALID_ARGUMENT" and isinstance(e1, ValueError), e1
    expect_raises(mixnet.InvalidArgumentError, mixnet.report_gate, 0, torch.tensor([[1, 1]]),
                  num_experts=8, hidden=4)
    expect_raises(TypeError, mixnet.report_gate, 0, torch.tensor([[0.5]]), num_experts=8,
                  hidden=4)
    expect_raises(ValueError, mixnet.report_gate, 0, torch.tensor([[0]]))  # no num_experts
    # Per-expert counts (a routing map's column sums), directly and through a hook.
    row = mixnet.report_counts(1, [1, 0, 2, 0, 0, 0, 0, 1], hidden=4, element_bytes=2)
    if row["bytes"] != {"localhost": 32.0}:
        fail(f"report_counts row {row}")
    expect_raises(mixnet.InvalidArgumentError, mixnet.report_counts, 1, [1, -1, 0, 0, 0, 0, 0, 0],
                  hidden=4)
    expect_raises(mixnet.InvalidArgumentError, mixnet.report_counts, 1, [1, 2], num_experts=8,
                  hidden=4)
    gate = torch.nn.Identity()
    gate.register_forward_hook(mixnet.gate_hook(2, num_experts=8, hidden=4, element_bytes=2))
    routing_map = torch.zeros(3, 8, dtype=torch.bool)
    routing_map[0, 1] = routing_map[1, 1] = routing_map[2, 7] = True
    gate((torch.ones(3, 8), routing_map))
    gate((torch.ones(3, 2), torch.tensor([[0, 1], [2, 3], [4, 5]])))
    topo = mixnet.topology()
    assert topo == {"epoch": 0, "circuits": []}, topo
    st = mixnet.stats()
    assert st["agent"] is None and st["epoch"] == 0, st
    mixnet.barrier()
    # Last: splits that disagree between ranks 0 and 1 (0 sends 1 row, 1 expects 2).
    send = [1] * n
    recv = [1] * n
    if me == 1:
        recv[0] = 2
    try:
        mixnet.alltoallv(torch.zeros(sum(send)), recv, send)
        if me in (0, 1):
            fail(f"rank {me}: split mismatch not detected")
    except mixnet.Error as e:
        if me in (0, 1):
            if not isinstance(e, mixnet.InvalidArgumentError) or "rank" not in str(e):
                fail(f"rank {me}: mismatch raised {e!r}")
            # The session is aborted: the next call raises too.
            expect_raises(mixnet.Error, mixnet.alltoallv, torch.zeros(n))
    mixnet.finalize()
    expect_raises(RuntimeError, mixnet.epoch)
    print(f"rank {me}: alltoallv ok, {checked} elements checked", flush=True)


# -------------------------------------------------------------- controller --

HOSTS = WORLD
EXPERTS = 8  # 2 per rank
K = 2


def spec_yaml(ocs_nics=2):
    y = ["name: pytest", "ocs_switches:",
         f"  - {{name: ocs0, ports: {HOSTS * ocs_nics}, switch_ms: 5}}", "hosts:"]
    for h in range(HOSTS):
        y += [f"  - name: h{h}", "    gpus: 1", "    nics:",
              f"      - {{name: eps0, role: eps, address: 127.10.0.{h + 1}, gbps: 1}}"]
        for j in range(ocs_nics):
            y.append(f"      - {{name: ocs{j}, role: ocs, address: 127.20.{j}.{h + 1}, gbps: 1, "
                     f"switch: ocs0, port: {h * ocs_nics + j + 1}}}")
    y.append("regions:")
    y.append("  - {name: r0, hosts: [" + ", ".join(f"h{h}" for h in range(HOSTS)) + "]}")
    return "\n".join(y) + "\n"


def partner(layer, host):
    return host ^ (1 if layer == 0 else 2)  # layer 0: 0-1, 2-3; layer 1: 0-2, 1-3


def gate_ids(torch, gen, layer, me, tokens):
    """80% of tokens go to the partner rank's two experts, the rest anywhere."""
    p = partner(layer, me)
    ids = torch.empty(tokens, K, dtype=torch.int64)
    hot = torch.rand(tokens, generator=gen) < 0.8
    for t in range(tokens):
        if hot[t]:
            ids[t] = torch.tensor([2 * p, 2 * p + 1])
        else:
            ids[t] = torch.randperm(EXPERTS, generator=gen)[:K]
    return ids


def worker_torchrun(args):
    import torch
    import mixnet
    mixnet.init()  # everything from the launcher's environment
    me, n = mixnet.rank(), mixnet.world_size()
    want = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]))
    if (me, n, mixnet.local_rank()) != want:
        fail(f"init() gave rank {me}, world {n}, local rank {mixnet.local_rank()}; env {want}")
    # Rank i sends i + j + 1 elements of value 100 i + j to rank j.
    x = torch.cat([torch.full((me + j + 1,), float(100 * me + j)) for j in range(n)])
    y = mixnet.alltoallv(x, [j + me + 1 for j in range(n)], [me + j + 1 for j in range(n)])
    want_y = torch.cat([torch.full((j + me + 1,), float(100 * j + me)) for j in range(n)])
    if not torch.equal(y, want_y):
        fail(f"rank {me}: alltoallv after init() from the environment: {y} != {want_y}")
    mixnet.barrier()
    print(f"rank {me}: torchrun-style init ok (local rank {mixnet.local_rank()})", flush=True)
    mixnet.finalize()


def worker_controller(args):
    import torch
    import mixnet
    mixnet.init(args.rank, args.world, store=args.store, spec=args.spec,
                host=f"h{args.rank}", controller=args.ctl, num_experts=EXPERTS, hidden=4096,
                element_bytes=2)
    me, n = mixnet.rank(), mixnet.world_size()
    assert mixnet.host() == f"h{me}"
    # The warm-up sweep: 4 hosts with 2 ports each on one switch, (4 - 1) x 2
    # perfect matchings of the 8 ports, then the topology the job had.
    w = mixnet.warm_paths(60)
    if not (w["enabled"] and w["complete"] and w["rounds"] == 3 * 2 + 1 and not w["timed_out"]):
        fail(f"rank {me}: warm-up sweep: {w}")
    # Registration installs the controller's committed topology (its first epoch).
    e0 = mixnet.epoch()
    c0 = mixnet.stats()["agent"]["commits"]
    gen = torch.Generator().manual_seed(1234 + me)
    hidden = 8
    seen = []  # (iteration, layer, epoch, circuits)
    it = 0
    while True:
        for layer in range(2):
            ids = gate_ids(torch, gen, layer, me, 256)
            row = mixnet.report_gate(layer, ids)
            if not row["sent"]:
                fail(f"rank {me}: report not sent: {row}")
            # Dispatch: one row per (token, slot), grouped by the expert's rank.
            dest = (ids // (EXPERTS // n)).reshape(-1)
            order = torch.argsort(dest, stable=True)
            send_splits = torch.bincount(dest, minlength=n).tolist()
            tokens = torch.arange(ids.shape[0]).repeat_interleave(K)[order]
            x = (tokens.to(torch.float32) + 1000 * me).unsqueeze(1).repeat(1, hidden)
            y = mixnet.alltoallv(x, input_splits=send_splits)
            # "Experts": x2; combine back with the splits swapped.
            recv_splits = [int(c) for c in
                           mixnet.alltoallv(torch.tensor(send_splits), [1] * n, [1] * n)]
            z = mixnet.alltoallv(y * 2, send_splits, recv_splits)
            if not torch.equal(z, x * 2):
                fail(f"rank {me}: combine did not bring back the dispatched rows")
            topo = mixnet.topology()
            seen.append((it, layer, topo["epoch"],
                         sorted(tuple(sorted(c["hosts"])) for c in topo["circuits"])))
            time.sleep(0.05)  # the "expert compute" window a round runs in
        it = mixnet.step()
        # Stop together once every rank has installed a new epoch (or give up).
        flags = mixnet.alltoallv(torch.full((n,), int(mixnet.epoch() > e0)), [1] * n, [1] * n)
        if (it >= 4 and bool(flags.all())) or it >= 40:
            break
    st = mixnet.stats()
    topo = mixnet.topology()
    mixnet.barrier()
    for (i, layer, epoch, circuits) in seen[-4:]:
        print(f"rank {me} iteration {i} layer {layer}: epoch {epoch} circuits {circuits}",
              flush=True)
    if st["epoch"] <= e0 or st["agent"]["commits"] <= c0:
        fail(f"rank {me}: no reconfiguration after {it} iterations: {st}")
    if st["agent"]["reports_sent"] < 1:
        fail(f"rank {me}: no report sent: {st}")
    hot = {tuple(sorted((h, partner(layer, h)))) for layer in range(2) for h in range(HOSTS)}
    pairs = {tuple(sorted(int(h[1:]) for h in c["hosts"])) for c in topo["circuits"]}
    if not pairs or not pairs <= hot:
        fail(f"rank {me}: circuits {pairs} are not among the hot pairs {hot}")
    # Every rank reports the same so the parent can sum direct bytes.
    print(f"rank {me}: controller ok: epoch {st['epoch']}, commits {st['agent']['commits']}, "
          f"direct_bytes_sent {st['direct_bytes_sent']}, circuits {sorted(pairs)}", flush=True)
    mixnet.finalize()


# ------------------------------------------------------------------ parent --

def spawn_workers(kind, extra, env, timeout_s, log_dir, rank_env=None):
    procs = []
    for r in range(WORLD):
        log = open(os.path.join(log_dir, f"{kind}-{r}.log"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--rank", str(r),
               "--world", str(WORLD)] + extra
        e = env if rank_env is None else dict(env, **rank_env(r))
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=e), log))
    deadline = time.monotonic() + timeout_s
    codes = []
    for p, log in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append("timeout")
    for p, log in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
    outputs = [open(os.path.join(log_dir, f"{kind}-{r}.log")).read() for r in range(WORLD)]
    for r, out in enumerate(outputs):
        sys.stdout.write("".join(f"  [{kind} {r}] {line}\n" for line in out.splitlines()[-12:]))
    if any(c != 0 for c in codes):
        fail(f"{kind} workers exited with {codes}")
    return outputs


def free_port():
    """A TCP port free now on 127.0.0.1 (rank 0 serves the store on it)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_certs(tmp):
    """A CA, the controller's certificate (localhost) and one per host (CN hN),
    made by openssl in tmp; returns the CA's path."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.crt", "-days",
            "2", "-subj", "/CN=mixnet-test-ca")
    for serial, (name, ext) in enumerate(
            [("controller", "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n")] +
            [(f"h{r}", "extendedKeyUsage=clientAuth\n") for r in range(WORLD)], start=2):
        with open(f"{tmp}/{name}.ext", "w") as f:
            f.write(ext)
        openssl("req", "-new", *ec, "-keyout", f"{tmp}/{name}.key", "-out", f"{tmp}/{name}.csr",
                "-subj", f"/CN={name}")
        openssl("x509", "-req", "-in", f"{tmp}/{name}.csr", "-CA", f"{tmp}/ca.crt", "-CAkey",
                f"{tmp}/ca.key", "-set_serial", str(serial), "-days", "2", "-out",
                f"{tmp}/{name}.crt", "-extfile", f"{tmp}/{name}.ext")
    return f"{tmp}/ca.crt"


def tls_env(tmp, host):
    return {"MIXNET_CONTROLLER_TLS_CA": f"{tmp}/ca.crt",
            "MIXNET_CONTROLLER_TLS_CERT": f"{tmp}/{host}.crt",
            "MIXNET_CONTROLLER_TLS_KEY": f"{tmp}/{host}.key"}


def start_daemon(name, cmd, ready, log_dir, procs):
    log = open(os.path.join(log_dir, f"{name}.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    procs.append((name, p, log))
    deadline = time.monotonic() + 20
    while not os.path.exists(ready):
        if p.poll() is not None:
            fail(f"{name} exited with {p.returncode}: {open(log.name).read()[-2000:]}")
        if time.monotonic() > deadline:
            fail(f"{name} not ready after 20 s")
        time.sleep(0.05)


def parent_checks(mixnet, tmp):
    import torch  # noqa: F401
    expect_raises(RuntimeError, mixnet.epoch, contains="not initialised")
    e = expect_raises(mixnet.InvalidArgumentError, mixnet.init, 4, 4, store=f"file:{tmp}/s0")
    assert e.code == "INVALID_ARGUMENT" and "rank 4" in str(e), e
    expect_raises(mixnet.InvalidArgumentError, mixnet.init, 0, 1, store="nope:x",
                  contains="unknown scheme")
    expect_raises(ValueError, mixnet.init, 0, 1, store=None)
    expect_raises(mixnet.Error, mixnet.init, 0, 1, store=f"file:{tmp}/s1",
                  spec=f"{tmp}/missing.yaml")
    expect_raises(mixnet.InvalidArgumentError, mixnet.init, 0, 1, store=f"file:{tmp}/s2",
                  controller="unix:/nonexistent.sock", contains="no cluster spec")
    # A rank that never shows up: init ends at the connect timeout.
    t = time.monotonic()
    e = expect_raises(mixnet.DeadlineExceededError, mixnet.init, 0, 2, store=f"file:{tmp}/s5",
                      connect_timeout_ms=1000)
    assert isinstance(e, TimeoutError) and e.code == "DEADLINE_EXCEEDED", e
    if time.monotonic() - t > 10:
        fail(f"init took {time.monotonic() - t:.1f} s with a 1 s connect timeout")
    assert not mixnet.is_initialized()
    # A one-rank session works, and a second init is refused.
    mixnet.init(0, 1, store=f"file:{tmp}/s3")
    expect_raises(RuntimeError, mixnet.init, 0, 1, store=f"file:{tmp}/s4")
    x = torch.arange(5, dtype=torch.float32)
    assert torch.equal(mixnet.alltoallv(x, [5], [5]), x)
    mixnet.finalize()
    mixnet.finalize()
    expect_raises(mixnet.UnavailableError, mixnet.controller_status, "unix:/nonexistent.sock",
                  timeout_ms=200)
    # A launcher's environment only partly there: an error naming what is missing.
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    saved = {k: os.environ.pop(k) for k in names if k in os.environ}
    os.environ.update(RANK="0")
    try:
        expect_raises(mixnet.InvalidArgumentError, mixnet.init, contains="WORLD_SIZE not")
        # torch.distributed's env:// needs no LOCAL_RANK, and an explicit store
        # needs no MASTER_ADDR: the local rank is then found at init.
        os.environ.update(WORLD_SIZE="1")
        expect_raises(mixnet.InvalidArgumentError, mixnet.init, contains="MASTER_ADDR")
        mixnet.init(store=f"file:{tmp}/s5")
        assert (mixnet.rank(), mixnet.world_size(), mixnet.local_rank()) == (0, 1, 0)
        mixnet.finalize()
    finally:
        for k in names:
            os.environ.pop(k, None)
        os.environ.update(saved)
    assert not mixnet.is_initialized()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--store")
    ap.add_argument("--spec")
    ap.add_argument("--ctl")
    ap.add_argument("--controller", help="mixnet-controller binary")
    ap.add_argument("--ocsd", help="mixnet-ocsd binary")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch", flush=True)
        return SKIP
    import mixnet
    if args.worker:
        try:
            {"alltoallv": worker_alltoallv, "controller": worker_controller,
             "torchrun": worker_torchrun}[args.worker](args)
        except Exception:
            traceback.print_exc()
            return 1
        return 0

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="mixnet-pytest-")
    procs = []
    try:
        parent_checks(mixnet, tmp)
        env = dict(os.environ, MIXNET_TIMEOUT_MS="10000", MIXNET_CONNECT_TIMEOUT_MS="15000",
                   OMP_NUM_THREADS="1")
        spawn_workers("alltoallv", ["--store", f"tcp://127.0.0.1:{free_port()}"], env, 60, tmp)
        print(f"alltoallv: 4 ranks ok ({time.monotonic() - t0:.1f} s)", flush=True)
        store_port = free_port()  # the store goes on MASTER_PORT + 1
        spawn_workers("torchrun", [], env, 60, tmp, rank_env=lambda r: {
            "RANK": str(r), "WORLD_SIZE": str(WORLD), "LOCAL_RANK": str(r),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store_port - 1)})
        print(f"torchrun-style init: 4 ranks ok ({time.monotonic() - t0:.1f} s)", flush=True)
        if not (args.controller and args.ocsd):
            print("controller part skipped: --controller / --ocsd not given", flush=True)
            return 0
        spec = os.path.join(tmp, "spec.yaml")
        with open(spec, "w") as f:
            f.write(spec_yaml())
        ocsd_sock, ctl_sock = f"unix:{tmp}/ocsd.sock", f"unix:{tmp}/ctl.sock"
        start_daemon("mixnet-ocsd", [args.ocsd, "--backend", "sim", "--ports", str(HOSTS * 2),
                                     "--switch-ms", "5", "--listen", ocsd_sock, "--state-dir",
                                     f"{tmp}/ocsd-state", "--ready-file", f"{tmp}/ocsd.ready"],
                     f"{tmp}/ocsd.ready", tmp, procs)
        ca = make_certs(tmp)
        start_daemon("mixnet-controller",
                     [args.controller, "--spec", spec, "--listen", ctl_sock, "--ocs",
                      f"ocs0={ocsd_sock}", "--state-dir", f"{tmp}/ctl-state", "--ready-file",
                      f"{tmp}/ctl.ready", "--predictor", "last", "--tls-cert",
                      f"{tmp}/controller.crt", "--tls-key", f"{tmp}/controller.key",
                      "--tls-client-ca", ca], f"{tmp}/ctl.ready", tmp, procs)
        outputs = spawn_workers("controller", ["--store", f"file:{tmp}/store-ctl", "--spec", spec,
                                               "--ctl", ctl_sock], env, 90, tmp,
                                rank_env=lambda r: tls_env(tmp, f"h{r}"))
        # The status over mTLS too (the settings are read once per process).
        read = subprocess.run(
            [sys.executable, "-c", "import json, sys, mixnet; "
             "print(json.dumps(mixnet.controller_status(sys.argv[1])))", ctl_sock],
            env=dict(env, **tls_env(tmp, "h0")), capture_output=True, text=True, timeout=60)
        if read.returncode != 0:
            fail(f"controller_status over mTLS: {read.stderr[-2000:]}")
        status = json.loads(read.stdout.strip().splitlines()[-1])
        if status["rounds_committed"] < 1 or status["highest_epoch"] < 1:
            fail(f"controller status: {status}")
        direct = sum(int(line.split("direct_bytes_sent ")[1].split(",")[0])
                     for out in outputs for line in out.splitlines() if "controller ok" in line)
        if direct <= 0:
            fail("no byte went over a circuit")
        print(f"controller: {status['rounds_committed']} rounds committed, "
              f"{status['rounds_skipped']} skipped, epoch {status['epoch']}, "
              f"{direct} bytes over circuits ({time.monotonic() - t0:.1f} s)", flush=True)
        return 0
    except AssertionError as e:
        print(f"FAILED: {e}", flush=True)
        for name, p, log in procs:
            log.flush()
            print(f"--- {name} log (tail)\n{open(log.name).read()[-3000:]}", flush=True)
        return 1
    finally:
        for name, p, log in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
