#!/usr/bin/env python3
"""One rank of a small MoE transformer trained with expert parallelism over
MixNet (PyTorch, CPU). Start N of these with launch.py (which also brings up
mixnet-ocsd and mixnet-controller), or by hand with RANK / WORLD_SIZE set.

- Every rank holds num_experts / N experts (expert parallelism) and a replica
  of the dense weights (data parallelism).
- A forward hook on each MoE layer's gate reports its top-k expert ids with
  mixnet.report_gate, so the controller sees the layer's traffic and re-wires
  the OCS for the layers that follow.
- Tokens go to their experts and back with mixnet.alltoallv (dispatch and
  combine, differentiable: backward runs the reverse all-to-alls); dense
  gradients are averaged with an allreduce built from two alltoallv calls.
- The data is synthetic: rank r's sequences come from its own vocabulary slice
  ("domain"), and each gate starts as a router that sends domain r to the
  experts of a partner rank that changes from layer to layer (the kind of
  locality trained MoE models show). Training then moves the gates.

Single-threaded (torch uses one thread; the runtime's threads never call
back into Python). Prints, on rank 0, one line per step: loss, the installed topology epoch and
reconfigurations seen, and per layer the epoch and circuits in force when its
dispatch ran.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import mixnet


def partner(layer, rank, n):
    """Round-robin schedule (circle method): a perfect matching of the ranks
    for each layer, different for consecutive layers (n even)."""
    m = n - 1
    r = layer % m
    if rank == m:
        return r
    if rank == r:
        return m
    return (2 * r - rank) % m


class Gate(nn.Module):
    """Router: softmax over experts, top-k, weights renormalised."""

    def __init__(self, hidden, experts, k):
        super().__init__()
        self.proj = nn.Linear(hidden, experts, bias=False)
        self.k = k

    def forward(self, x):
        probs = self.proj(x).softmax(dim=-1)
        weights, ids = torch.topk(probs, self.k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), ids


class Expert(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    """Expert-parallel MoE layer: this rank's experts, dispatch / combine over
    mixnet.alltoallv."""

    def __init__(self, layer, hidden, ffn, experts, k, rank, world):
        super().__init__()
        self.layer, self.rank, self.world = layer, rank, world
        self.per_rank = experts // world
        self.gate = Gate(hidden, experts, k)
        self.experts = nn.ModuleList(Expert(hidden, ffn) for _ in range(self.per_rank))
        self.a2a_s = 0.0
        self.view = None  # (epoch, circuits) when the last dispatch ran

    def forward(self, x):  # x: [tokens, hidden]
        weights, ids = self.gate(x)  # the forward hook reports ids here
        tokens, k = ids.shape
        n = self.world
        flat = ids.reshape(-1)
        dest = torch.div(flat, self.per_rank, rounding_mode="floor")
        order = torch.argsort(dest, stable=True)
        send = torch.bincount(dest, minlength=n).tolist()
        topo = mixnet.topology()
        self.view = (topo["epoch"], topo["circuits"])
        t0 = time.perf_counter()
        recv = mixnet.alltoallv(torch.tensor(send), [1] * n, [1] * n).tolist()
        rows = torch.arange(tokens).repeat_interleave(k)[order]
        x_in = mixnet.alltoallv(x[rows], recv, send)  # dispatch
        e_in = mixnet.alltoallv(flat[order], recv, send) - self.rank * self.per_rank
        self.a2a_s += time.perf_counter() - t0
        y_in = x_in.new_zeros(x_in.shape)
        for e, expert in enumerate(self.experts):
            mask = e_in == e
            if mask.any():
                y_in[mask] = expert(x_in[mask])
        t0 = time.perf_counter()
        y_sorted = mixnet.alltoallv(y_in, send, recv)  # combine
        self.a2a_s += time.perf_counter() - t0
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        y = y_sorted[inverse].reshape(tokens, k, -1)
        return (y * weights.unsqueeze(-1)).sum(dim=1)


class Block(nn.Module):
    def __init__(self, layer, args, rank, world):
        super().__init__()
        self.ln1 = nn.LayerNorm(args.hidden)
        self.attn = nn.MultiheadAttention(args.hidden, args.heads, batch_first=True)
        self.ln2 = nn.LayerNorm(args.hidden)
        self.moe = MoE(layer, args.hidden, args.ffn, args.experts, args.top_k, rank, world)

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        b, s, d = x.shape
        return x + self.moe(self.ln2(x).reshape(b * s, d)).reshape(b, s, d)


class Model(nn.Module):
    def __init__(self, args, rank, world):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.hidden)
        self.blocks = nn.ModuleList(Block(l, args, rank, world) for l in range(args.layers))
        self.ln = nn.LayerNorm(args.hidden)
        self.head = nn.Linear(args.hidden, args.vocab)

    def forward(self, tokens):
        s = tokens.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


def init_router(model, args, world):
    """Gives the model a "pretrained" router: dimension d of the embedding of
    domain d's tokens is large, and layer l's gate maps that dimension to the
    experts of partner(l, d)."""
    slice_len = args.vocab // world
    with torch.no_grad():
        for v in range(args.vocab):
            model.embed.weight[v, :world] = 0.0
            model.embed.weight[v, v // slice_len] = args.router_strength
        for l, block in enumerate(model.blocks):
            w = block.moe.gate.proj.weight  # [experts, hidden]
            w[:, :world] = 0.0
            per = args.experts // world
            for d in range(world):
                p = partner(l, d, world)
                w[p * per:(p + 1) * per, d] = 1.0


def batch(args, rank, world, gen):
    """Sequences of rank `rank`'s domain: next = start + (5 * prev + 3) mod len."""
    slice_len = args.vocab // world
    start = rank * slice_len
    seq = torch.empty(args.batch, args.seq + 1, dtype=torch.int64)
    seq[:, 0] = torch.randint(0, slice_len, (args.batch,), generator=gen)
    for t in range(args.seq):
        seq[:, t + 1] = (seq[:, t] * 5 + 3) % slice_len
    seq += start
    return seq[:, :-1], seq[:, 1:]


def allreduce_mean(vec, world):
    """Mean over ranks of a 1-D tensor: reduce-scatter then all-gather, each
    one mixnet.alltoallv."""
    n = vec.numel()
    chunk = math.ceil(n / world)
    padded = torch.cat([vec, vec.new_zeros(chunk * world - n)])
    mine = mixnet.alltoallv(padded, [chunk] * world, [chunk] * world).view(world, chunk).sum(0)
    full = mixnet.alltoallv((mine / world).repeat(world), [chunk] * world, [chunk] * world)
    return full[:n]


def circuit_names(circuits):
    pairs = sorted({"-".join(sorted(c["hosts"])) for c in circuits})
    return ",".join(pairs) if pairs else "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None,
                    help="file:DIR or tcp://HOST:PORT (default: MIXNET_STORE, else a TCP store "
                         "on MASTER_ADDR, as torchrun sets it)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--experts", type=int, default=0, help="default: 2 per rank")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--router-strength", type=float, default=3.0)
    ap.add_argument("--step-pause-ms", type=float, default=0,
                    help="sleep after each step (stands in for the rest of a real step)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="rank 0 ends with one JSON line")
    ap.add_argument("--trace-out", default="",
                    help="record the gates' token counts (locality collector) to FILE.<rank>")
    args = ap.parse_args()

    torch.set_num_threads(1)
    mixnet.init(store=args.store)  # rank / world size from RANK / WORLD_SIZE (or srun, mpirun)
    rank, world = mixnet.rank(), mixnet.world_size()
    if args.trace_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.trace_out)), exist_ok=True)
        mixnet.record_trace(f"{args.trace_out}.{rank}")
    if world < 2 or world % 2:
        sys.exit("train.py: needs an even number of ranks (4 to 8 intended)")
    args.experts = args.experts or 2 * world
    if args.experts % world or args.vocab % world:
        sys.exit("train.py: --experts and --vocab must be multiples of the world size")

    torch.manual_seed(args.seed)  # the same dense weights on every rank
    model = Model(args, rank, world)
    init_router(model, args, world)
    torch.manual_seed(args.seed + 1 + rank)  # this rank's own experts
    for block in model.blocks:
        for expert in block.moe.experts:
            for p in expert.parameters():
                nn.init.normal_(p, std=0.02)
    element_bytes = torch.empty((), dtype=torch.float32).element_size()
    for l, block in enumerate(model.blocks):
        block.moe.gate.register_forward_hook(
            mixnet.gate_hook(l, num_experts=args.experts, hidden=args.hidden,
                             element_bytes=element_bytes))
    dense = [p for n, p in model.named_parameters() if ".experts." not in n]
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1000 + rank)
    has_controller = mixnet.stats()["agent"] is not None
    if rank == 0:
        print(f"# {world} ranks, {args.layers} MoE layers x {args.experts} experts (top-{args.top_k}),"
              f" hidden {args.hidden}; controller: {'yes' if has_controller else 'no'}; "
              f"hosts: {[mixnet.host_of(r) for r in range(world)]}", flush=True)
        for l in range(args.layers):
            pairs = sorted({tuple(sorted((mixnet.host_of(r), mixnet.host_of(partner(l, r, world)))))
                            for r in range(world)})
            print(f"# layer {l}: routers start biased towards the pairs "
                  f"{','.join('-'.join(p) for p in pairs)}", flush=True)

    first_loss = last_loss = None
    start_epoch = mixnet.epoch()  # registration installed the controller's topology
    base_commits = mixnet.stats()["agent"]["commits"] if has_controller else 0
    t_start = time.perf_counter()
    for step in range(args.steps):
        for block in model.blocks:
            block.moe.a2a_s = 0.0
        inputs, targets = batch(args, rank, world, gen)
        t0 = time.perf_counter()
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        with torch.no_grad():
            for p in dense:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            flat = torch.cat([p.grad.reshape(-1) for p in dense] + [loss.detach().reshape(1)])
            flat = allreduce_mean(flat, world)
            off = 0
            for p in dense:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
            mean_loss = float(flat[-1])
        opt.step()
        step_ms = (time.perf_counter() - t0) * 1000
        mixnet.step()
        first_loss = mean_loss if first_loss is None else first_loss
        last_loss = mean_loss
        if rank == 0:
            st = mixnet.stats()
            reconf = st["agent"]["commits"] - base_commits if st["agent"] else 0
            layers = " | ".join(f"L{l} e{b.moe.view[0]} {circuit_names(b.moe.view[1])}"
                                for l, b in enumerate(model.blocks))
            a2a_ms = sum(b.moe.a2a_s for b in model.blocks) * 1000
            print(f"step {step:3d} loss {mean_loss:.3f} | epoch {st['epoch']} reconfigurations "
                  f"{reconf} | {layers} | step {step_ms:.0f} ms, forward a2a {a2a_ms:.1f} ms",
                  flush=True)
        if args.step_pause_ms > 0:
            time.sleep(args.step_pause_ms / 1000)
    mixnet.barrier()
    st = mixnet.stats()
    if rank == 0:
        print(f"# loss {first_loss:.3f} -> {last_loss:.3f} in {args.steps} steps "
              f"({time.perf_counter() - t_start:.1f} s); epoch {start_epoch} -> {st['epoch']}; "
              f"bytes over circuits from rank 0: {st['direct_bytes_sent']}", flush=True)
        if args.json:
            import json
            print(json.dumps({"steps": args.steps, "first_loss": first_loss,
                              "last_loss": last_loss, "epoch": st["epoch"],
                              "reconfigurations": (st["agent"]["commits"] - base_commits
                                                   if st["agent"] else 0),
                              "direct_bytes_sent": st["direct_bytes_sent"]}), flush=True)
    mixnet.finalize()


if __name__ == "__main__":
    main()
