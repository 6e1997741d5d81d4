#!/usr/bin/env python3
"""The PyTorch MoE example (examples/moe_pytorch) run the ways its README
tells users to, each checked for what a user looks at: every rank exits 0,
the loss falls, and (with the controller) reconfigurations are committed.

  --mode loopback   launch.py --loopback: 4 ranks on 127.x addresses, a sim
                    mixnet-ocsd and a real mixnet-controller (label cpu).
  --mode netns      launch.py as root: the emulated cluster in network
                    namespaces, the netns OCS backend (label netns; skipped
                    when not root).
  --mode env        train.py alone, no launcher binary: 4 ranks with
                    torch.distributed env:// variables built here (RANK,
                    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; no
                    --store), then as the example's README shows (RANK,
                    WORLD_SIZE and --store file:DIR only) (label cpu).

Exit 77 (skipped) when torch cannot be imported. Runs on the test's thread;
ranks and daemons are child processes with a deadline.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "moe_pytorch")
STEPS = 6


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def result_of(output, what):
    """train.py --json's last line (rank 0), checked: all steps, loss falls."""
    lines = [l for l in output.splitlines() if l.startswith("{")]
    if not lines:
        fail(f"{what}: no JSON result line from rank 0; output:\n{output[-3000:]}")
    r = json.loads(lines[-1])
    if r["steps"] != STEPS:
        fail(f"{what}: {r['steps']} steps, expected {STEPS}")
    if not r["last_loss"] < r["first_loss"]:
        fail(f"{what}: the loss did not fall: {r['first_loss']:.3f} -> {r['last_loss']:.3f}")
    print(f"{what}: loss {r['first_loss']:.3f} -> {r['last_loss']:.3f} in {r['steps']} steps, "
          f"{r['reconfigurations']} reconfigurations seen by rank 0", flush=True)
    return r


def run_launch(args, loopback):
    cmd = [sys.executable, os.path.join(EXAMPLE, "launch.py"), "--build", args.build,
           "--timeout", "240"]
    if loopback:
        cmd.append("--loopback")
    cmd += ["--", "--steps", str(STEPS), "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    what = "launch.py" + (" --loopback" if loopback else " (emulated cluster)")
    if p.returncode != 0:
        fail(f"{what} exited with {p.returncode}; output:\n{p.stdout[-4000:]}")
    r = result_of(p.stdout, what)
    m = re.search(r"# controller: (\d+) reconfigurations committed", p.stdout)
    if m is None:
        fail(f"{what}: no controller summary line; output:\n{p.stdout[-3000:]}")
    committed = int(m.group(1))
    if committed < 1 or r["reconfigurations"] < 1:
        fail(f"{what}: the controller committed {committed} reconfigurations, rank 0 saw "
             f"{r['reconfigurations']}; expected at least one each")
    print(f"{what}: the controller committed {committed} reconfigurations", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(args, world, env_of, extra, what):
    procs = []
    with tempfile.TemporaryDirectory() as logs:
        for r in range(world):
            env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"),
                       OMP_NUM_THREADS="1", **env_of(r))
            for k in ("MIXNET_STORE", "MIXNET_CLUSTER_SPEC", "MIXNET_CONTROLLER"):
                env.pop(k, None)
            log = open(os.path.join(logs, f"rank{r}.log"), "w+")
            cmd = [sys.executable, os.path.join(EXAMPLE, "train.py"), "--steps", str(STEPS),
                   "--json"] + extra
            procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT),
                          log))
        codes = []
        for p, _ in procs:
            try:
                codes.append(p.wait(timeout=240))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("timeout")
        outputs = []
        for p, log in procs:
            log.seek(0)
            outputs.append(log.read())
            log.close()
    for r, c in enumerate(codes):
        if c != 0:
            fail(f"{what}: rank {r} exited with {c}; its output:\n{outputs[r][-3000:]}")
    result_of(outputs[0], what)


def run_env(args):
    world = 4
    port = free_port()
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(k, None)
    # torchrun / torch.distributed env:// on one host, no --store.
    run_ranks(args, world,
              lambda r: dict(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                             MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
              [], "train.py under torchrun's variables")
    # The example README's form: RANK, WORLD_SIZE and a file store only.
    with tempfile.TemporaryDirectory() as d:
        run_ranks(args, world, lambda r: dict(RANK=str(r), WORLD_SIZE=str(world)),
                  ["--store", f"file:{d}/store"], "train.py as the example's README runs it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True, choices=["loopback", "netns", "env"])
    ap.add_argument("--build", required=True, help="the CMake build folder")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
        return 77
    if args.mode == "netns" and os.geteuid() != 0:
        print("SKIP: the emulated cluster needs root (network namespaces)")
        return 77
    if args.mode == "env":
        run_env(args)
    else:
        run_launch(args, loopback=args.mode == "loopback")
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
