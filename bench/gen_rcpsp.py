"""Random single-mode RCPSP instances in PSPLIB's ``.sm`` format, for sizes where no instances
with known optima are at hand (PSPLIB's j60 and j120 are not shipped; see the README's PSPLIB
section). Writes ``OUT/<set>/<set>_<k>.sm`` and ``OUT/<set>_opt.csv`` with nothing known
(empty ``lower_bound,upper_bound``), so that ``bench_psplib.py`` and ``bench_psplib_dtime.py``
run on them with ``--data OUT --set <set>``: they then judge soundness against nothing but the
run's own schedules, and compare variants by the bounds and makespans they reach.

The generator follows the parameters PSPLIB's generator ProGen (Kolisch, Sprecher & Drexl 1995)
varies, but not its algorithm: ``jobs`` real jobs between a dummy source and sink; 2 to 4 start
jobs; each other job gets one random earlier job as predecessor, then random arcs (at most three
successors per job) until the arcs per job reach the network complexity ``NC``; durations 1-10;
each job uses ``round(RF x 4)`` of the 4 resources (resource factor ``RF``) with demands 1-10;
capacity ``k_min + RS x (k_max - k_min)`` (resource strength ``RS``; ``k_min`` the largest
demand, ``k_max`` the peak use of the earliest-start schedule). Per instance ``NC`` (1.5, 1.8,
2.1), ``RF`` (0.25-1) and ``RS`` are drawn from PSPLIB's grid for the size (j120: RS 0.1-0.5;
j30-j90: 0.2, 0.5, 0.7, leaving out its 1.0, whose instances the earliest-start schedule already
solves), seeded by the instance number, so a set is the same on every machine.

    python bench/gen_rcpsp.py --jobs 120 --count 24 --out /tmp/rcpsp [--set g120]
    python bench/bench_psplib_dtime.py --data /tmp/rcpsp --set g120 --variants default,inproc
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

RESOURCES = 4


def instance(jobs: int, seed: int, nc: float, rf: float, rs: float) -> str:
    """One instance as ``.sm`` text (see the module docstring)."""
    rnd = random.Random(seed)
    sink = jobs + 2
    real = list(range(2, jobs + 2))
    succ: dict[int, set[int]] = {j: set() for j in range(1, sink + 1)}
    starts = rnd.randint(2, 4)
    succ[1].update(real[:starts])
    for j in real[starts:]:
        succ[rnd.choice(real[: j - 2])].add(j)  # an earlier real job
    arcs = sum(map(len, succ.values()))
    for _ in range(10_000):
        if arcs >= nc * (jobs + 2):
            break
        a, b = sorted(rnd.sample(real, 2))
        if b not in succ[a] and len(succ[a]) < 3:
            succ[a].add(b)
            arcs += 1
    for j in real:
        if not succ[j]:
            succ[j].add(sink)
    dur = {1: 0, sink: 0}
    dem = {1: [0] * RESOURCES, sink: [0] * RESOURCES}
    used = max(1, round(rf * RESOURCES))
    for j in real:
        dur[j] = rnd.randint(1, 10)
        chosen = rnd.sample(range(RESOURCES), used)
        dem[j] = [rnd.randint(1, 10) if r in chosen else 0 for r in range(RESOURCES)]
    order = [1, *real, sink]
    preds: dict[int, list[int]] = {j: [] for j in order}
    for a in order:
        for b in succ[a]:
            preds[b].append(a)
    es = {1: 0}
    for j in order[1:]:
        es[j] = max(es[p] + dur[p] for p in preds[j])
    horizon = max(es[j] + dur[j] for j in order)
    caps = []
    for r in range(RESOURCES):
        k_min = max(dem[j][r] for j in order)
        use = [0] * (horizon + 1)
        for j in order:
            for t in range(es[j], es[j] + dur[j]):
                use[t] += dem[j][r]
        caps.append(max(k_min, round(k_min + rs * (max(use) - k_min))))
    star = "*" * 72
    lines = [
        star,
        "file with basedata            : gen_rcpsp.py",
        f"initial value random generator: {seed}",
        star,
        "projects                      :  1",
        f"jobs (incl. supersource/sink ):  {sink}",
        f"horizon                       :  {sum(dur.values())}",
        "RESOURCES",
        f"  - renewable                 :  {RESOURCES}   R",
        "  - nonrenewable              :  0   N",
        "  - doubly constrained        :  0   D",
        star,
        "PROJECT INFORMATION:",
        "pronr.  #jobs rel.date duedate tardcost  MPM-Time",
        f"    1     {jobs}      0       {horizon}       0       {horizon}",
        star,
        "PRECEDENCE RELATIONS:",
        "jobnr.    #modes  #successors   successors",
    ]
    for j in order:
        s = sorted(succ[j])
        lines.append(f"  {j:3d}        1          {len(s)}   " + " ".join(f"{x:3d}" for x in s))
    lines += [star, "REQUESTS/DURATIONS:", "jobnr. mode duration  " + "  ".join(f"R {r + 1}" for r in range(RESOURCES))]
    lines.append("-" * 72)
    for j in order:
        lines.append(f"  {j:3d}      1  {dur[j]:3d}    " + "  ".join(f"{d:3d}" for d in dem[j]))
    lines += [star, "RESOURCEAVAILABILITIES:", "  " + "  ".join(f"R {r + 1}" for r in range(RESOURCES))]
    lines += ["  " + "  ".join(f"{c:4d}" for c in caps), star]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, required=True, help="real jobs per instance (30, 60, 90, 120 in PSPLIB)")
    ap.add_argument("--count", type=int, default=24, help="instances")
    ap.add_argument("--out", required=True, help="folder to write <set>/ and <set>_opt.csv into")
    ap.add_argument("--set", dest="name", default="", help="set name (default g<jobs>)")
    args = ap.parse_args()
    if args.jobs < 4 or args.count < 1:
        print("--jobs must be at least 4 and --count at least 1", file=sys.stderr)
        return 2
    name = args.name or f"g{args.jobs}"
    folder = Path(args.out) / name
    folder.mkdir(parents=True, exist_ok=True)
    strengths = [0.2, 0.5, 0.7] if args.jobs <= 90 else [0.1, 0.2, 0.3, 0.4, 0.5]
    rows = ["instance,lower_bound,upper_bound"]
    for k in range(1, args.count + 1):
        seed = 1000 * args.jobs + k
        pick = random.Random(seed)
        nc, rf, rs = pick.choice([1.5, 1.8, 2.1]), pick.choice([0.25, 0.5, 0.75, 1.0]), pick.choice(strengths)
        (folder / f"{name}_{k}.sm").write_text(instance(args.jobs, seed, nc, rf, rs))
        rows.append(f"{name}_{k},,")
    (Path(args.out) / f"{name}_opt.csv").write_text("\n".join(rows) + "\n")
    print(f"wrote {args.count} instances of {args.jobs} jobs to {folder} and {name}_opt.csv (nothing known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
