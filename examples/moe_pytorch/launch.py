#!/usr/bin/env python3
"""Launches examples/moe_pytorch/train.py on N ranks (one host each) with the
MixNet control loop: writes a cluster spec (1 EPS NIC + --ocs-nics OCS NICs per
host, one region), starts mixnet-ocsd and mixnet-controller, runs the ranks,
and ends with the controller's count of reconfigurations.

As root the cluster is emulated in network namespaces (mixnet-fabric up;
mixnet-ocsd --backend netns re-wires real virtual links; one rank per host
namespace). Otherwise, or with --loopback, every host is a set of 127.x
addresses on loopback and mixnet-ocsd uses its sim backend: the control loop,
circuits and routing are real, the link rates are not.

Rank 0's output goes to stdout; every rank's to <run dir>/rank<r>.log.
Arguments after "--" go to train.py. Runs on the main thread; Ctrl-C cleans up.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def spec_yaml(hosts, ocs_nics, gbps, switch_ms, loopback):
    def addr(ocs, nic, h):
        return (f"127.{20 if ocs else 10}.{nic}.{h + 1}" if loopback
                else f"10.{20 if ocs else 10}.{nic}.{h + 1}/16")

    y = ["# examples/moe_pytorch: written by launch.py", "name: moe_pytorch", "ocs_switches:",
         f"  - {{name: ocs0, ports: {hosts * ocs_nics}, switch_ms: {switch_ms}}}", "hosts:"]
    for h in range(hosts):
        y += [f"  - name: h{h}", "    gpus: 1", "    nics:",
              f"      - {{name: eps0, role: eps, address: {addr(False, 0, h)}, gbps: {gbps}}}"]
        for j in range(ocs_nics):
            y.append(f"      - {{name: ocs{j}, role: ocs, address: {addr(True, j, h)}, "
                     f"gbps: {gbps}, switch: ocs0, port: {h * ocs_nics + j + 1}}}")
    y += ["regions:", "  - {name: r0, hosts: [" + ", ".join(f"h{h}" for h in range(hosts)) + "]}"]
    return "\n".join(y) + "\n"


class Launcher:
    def __init__(self, args):
        self.a = args
        self.procs = []  # (name, Popen, log file)
        self.prefix = None
        self.dir = tempfile.mkdtemp(prefix="mixnet-moe-")

    def binary(self, *parts):
        path = os.path.join(self.a.build, *parts)
        if not os.access(path, os.X_OK):
            sys.exit(f"launch.py: {path} not found; build it (cmake --build {self.a.build} "
                     f"--target {parts[-1]}) or give --build")
        return path

    def spawn(self, name, cmd, env=None, stdout=None):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        p = subprocess.Popen(cmd, stdout=stdout or log, stderr=subprocess.STDOUT if stdout is None
                             else None, env=env)
        self.procs.append((name, p, log))
        return p

    def wait_ready(self, name, path, timeout=20):
        p = next(p for n, p, _ in self.procs if n == name)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}; see {self.dir}/{name}.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {timeout} s")
            time.sleep(0.05)

    def run(self):
        a = self.a
        loopback = a.loopback or os.geteuid() != 0
        if loopback and not a.loopback:
            print("# not root: hosts on loopback (127.x), sim OCS; the control loop is real, "
                  "link rates are not", flush=True)
        spec = os.path.join(self.dir, "spec.yaml")
        with open(spec, "w") as f:
            f.write(spec_yaml(a.nprocs, a.ocs_nics, a.gbps, a.switch_ms, loopback))
        if not loopback:
            self.prefix = f"mxmoe{os.getpid()}"
            subprocess.run([self.binary("emulation", "mixnet-fabric"), "up", spec, "--prefix",
                            self.prefix], check=True, stdout=subprocess.DEVNULL)
            print(f"# emulated cluster up: namespaces {self.prefix}-h0..h{a.nprocs - 1}, "
                  f"{a.gbps} Gbit/s per NIC, OCS switching {a.switch_ms} ms", flush=True)
        env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"),
                   MIXNET_CLUSTER_SPEC=spec, WORLD_SIZE=str(a.nprocs), OMP_NUM_THREADS="1")
        ctl = ""
        if not a.no_controller:
            ocsd = f"unix:{self.dir}/ocsd.sock"
            cmd = [self.binary("ocs_driver", "service", "mixnet-ocsd"), "--backend",
                   "sim" if loopback else "netns", "--ports", str(a.nprocs * a.ocs_nics),
                   "--switch-ms", str(a.switch_ms), "--listen", ocsd, "--state-dir",
                   f"{self.dir}/ocsd-state", "--ready-file", f"{self.dir}/ocsd.ready"]
            if not loopback:
                cmd += ["--netns", f"{self.prefix}-ocs-ocs0"]
            self.spawn("mixnet-ocsd", cmd)
            self.wait_ready("mixnet-ocsd", f"{self.dir}/ocsd.ready")
            ctl = f"unix:{self.dir}/ctl.sock"
            self.spawn("mixnet-controller", [
                self.binary("apps", "controller", "mixnet-controller"), "--spec", spec,
                "--listen", ctl, "--ocs", f"ocs0={ocsd}", "--state-dir", f"{self.dir}/ctl-state",
                "--ready-file", f"{self.dir}/ctl.ready", "--predictor", a.predictor,
                "--planner", a.planner])
            self.wait_ready("mixnet-controller", f"{self.dir}/ctl.ready")
            env["MIXNET_CONTROLLER"] = ctl
        ranks = []
        for r in range(a.nprocs):
            renv = dict(env, RANK=str(r), MIXNET_HOST=f"h{r}")
            cmd = [a.python, os.path.join(HERE, "train.py"), "--store",
                   f"file:{self.dir}/store"] + a.train_args
            if not loopback:
                cmd = ["ip", "netns", "exec", f"{self.prefix}-h{r}"] + cmd
            if r == 0:
                ranks.append(self.spawn(f"rank{r}", cmd, env=renv, stdout=sys.stdout))
            else:
                ranks.append(self.spawn(f"rank{r}", cmd, env=renv))
        deadline = time.monotonic() + a.timeout
        codes = []
        for p in ranks:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append("timeout")
        failed = [r for r, c in enumerate(codes) if c != 0]
        for r in failed:
            print(f"# rank {r} exited with {codes[r]}; log tail ({self.dir}/rank{r}.log):",
                  flush=True)
            with open(os.path.join(self.dir, f"rank{r}.log")) as f:
                sys.stdout.write("".join(f.readlines()[-15:]))
        if ctl:
            sys.path.insert(0, env["PYTHONPATH"])
            import mixnet
            st = mixnet.controller_status(ctl)
            circuits = ",".join(f"p{c['ports'][0]}-p{c['ports'][1]}" for c in st["circuits"])
            print(f"# controller: {st['rounds_committed']} reconfigurations committed, "
                  f"{st['rounds_skipped']} skipped (not worth switching), {st['rounds_aborted']} "
                  f"aborted; epoch {st['epoch']}; circuits now {circuits or 'none'}", flush=True)
        return 1 if failed else 0

    def cleanup(self):
        for name, p, log in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()
        if self.prefix:
            subprocess.run([self.binary("emulation", "mixnet-fabric"), "down", "--prefix",
                            self.prefix], stdout=subprocess.DEVNULL)
        if self.a.keep:
            print(f"# run dir kept: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def main():
    argv = sys.argv[1:]
    train_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, train_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nprocs", type=int, default=4, help="ranks = hosts (even, 4 to 8)")
    ap.add_argument("--ocs-nics", type=int, default=1, help="OCS NICs per host")
    ap.add_argument("--gbps", type=float, default=0.2, help="rate of every NIC (emulated)")
    ap.add_argument("--switch-ms", type=float, default=10, help="OCS switching time")
    ap.add_argument("--planner", default="improved", choices=["improved", "greedy"])
    ap.add_argument("--predictor", default="last", choices=["last", "ewma", "share_trend"])
    ap.add_argument("--loopback", action="store_true", help="loopback + sim OCS even as root")
    ap.add_argument("--no-controller", action="store_true", help="EPS only, no OCS control")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="CMake build folder")
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                    else sys.executable, help="interpreter with torch (Debian's python3-torch)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    ap.add_argument("--keep", action="store_true", help="keep the run dir (logs, spec)")
    args = ap.parse_args(argv)
    args.train_args = train_args
    args.build = os.path.abspath(args.build)
    if args.nprocs < 2 or args.nprocs % 2:
        sys.exit("launch.py: --nprocs must be even (4 to 8 intended)")
    launcher = Launcher(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        return launcher.run()
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"launch.py: {e}", file=sys.stderr)
        return 1
    finally:
        launcher.cleanup()


if __name__ == "__main__":
    sys.exit(main())
