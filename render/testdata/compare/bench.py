#!/usr/bin/env python3
"""Time cortexbuild render, ruler apply and rulesync generate on the same input,
interleaved in one run: each sample is a first render into a fresh copy of the
input (cold: no output yet), then an up-to-date check where the tool has one."""
import os, shutil, statistics, subprocess, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
W = os.environ["WORK"]  # holds inputs/, cortexbuild and node_modules/ (see run.sh)
CB = os.path.join(W, "cortexbuild")
BIN = os.path.join(W, "node_modules", ".bin")
tools = {
    "cortexbuild render": ("cortexbuild", [CB, "render"], [CB, "render", "--check"]),
    "ruler apply": ("ruler", [os.path.join(BIN, "ruler"), "apply"], None),
    "rulesync generate": ("rulesync", [os.path.join(BIN, "rulesync"), "generate"],
                          [os.path.join(BIN, "rulesync"), "generate", "--check"]),
}
def run(cmd, cwd):
    """Run cmd; return (wall seconds, CPU seconds of the process tree, returncode, output)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode, out.decode(errors="replace")

times = {k: [] for k in tools}
cpu = {k: [] for k in tools}
checks = {k: [] for k in tools}
root = tempfile.mkdtemp(prefix="rendercmp-")
for i in range(N):
    for name, (inp, cmd, check) in tools.items():
        d = os.path.join(root, f"{inp}-{i}")
        shutil.copytree(f"{W}/inputs/{inp}", d)
        subprocess.run(["git", "init", "-q", d], check=True)
        wall, c, rc, out = run(cmd, d)
        times[name].append(wall)
        cpu[name].append(c)
        if rc != 0:
            sys.exit(f"{name} failed: {out[-2000:]}")
        if check:
            wall, c, rc, out = run(check, d)
            checks[name].append(wall)
            if rc != 0:
                sys.exit(f"{name} check failed ({rc}): {out[-2000:]}")
def fmt(xs):
    xs = sorted(x * 1000 for x in xs)
    return f"median {statistics.median(xs):7.1f} ms  min {xs[0]:7.1f}  max {xs[-1]:7.1f}"
print(f"{N} runs each, interleaved; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
for name in tools:
    print(f"{name:20s} render {fmt(times[name])}   CPU {fmt(cpu[name])}")
    if checks[name]:
        print(f"{'':20s} check  {fmt(checks[name])}")
shutil.rmtree(root)
