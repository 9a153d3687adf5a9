#!/usr/bin/env python3
"""Turns shardcast-bench --json output into busbw-vs-size PNG charts.

    python3 bench/tool/plot.py out/all_reduce.json [more.json ...] -o docs/bench

One PNG per JSON file, named after it (out/all_reduce.json -> all_reduce.png, so two
runs of one collective, e.g. p2p4_all_reduce.json and nccl4_all_reduce.json, keep
their charts apart): shardcast's bus bandwidth, the memcpy rooflines measured in the
same run (single thread and per rank with every rank copying), and the MPI baseline's
bus bandwidth when the run used --vs mpi. Two JSON files of the same name (from two
directories) would write one PNG, so they are refused before anything is drawn.
"""
import argparse
import json
import os
import sys

BUSBW_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:g} {unit}"
        nbytes /= 1024.0
    return f"{nbytes:g}"


def png_name(path, outdir):
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(outdir, f"{stem}.png")


def plot(path, outdir, plt):
    with open(path) as f:
        run = json.load(f)
    rows = [r for r in run["rows"] if r["size"] > 0]
    if not rows:
        print(f"{path}: no rows", file=sys.stderr)
        return None
    coll, n = run["collective"], run["ranks"]
    sizes = [r["size"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes, [r["busbw_gbs"] for r in rows], "o-", label=f"shardcast {run['backend']} busbw")
    if any(r.get("memcpy1_gbs", 0) > 0 for r in rows):
        if run["backend"] in ("nccl", "p2p"):  # device backends: the rooflines are device copies
            ax.plot(sizes, [r["memcpy1_gbs"] for r in rows], "k--", label="device copy, rank 0 alone")
            ax.plot(sizes, [r["memcpyN_gbs"] for r in rows], "k:", label=f"device copy per rank, {n} ranks at once")
        else:
            ax.plot(sizes, [r["memcpy1_gbs"] for r in rows], "k--", label="memcpy, 1 thread")
            ax.plot(sizes, [r["memcpyN_gbs"] for r in rows], "k:", label=f"memcpy per rank, {n} ranks at once")
    if any(r.get("mpi_time_us", 0) > 0 for r in rows):
        fac = BUSBW_FACTOR[coll](n)
        mpi = [(r["size"], r["size"] / (r["mpi_time_us"] * 1e-6) / 1e9 * fac) for r in rows if r.get("mpi_time_us", 0) > 0]
        ax.plot([s for s, _ in mpi], [b for _, b in mpi], "s-", label="MPI busbw")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human(s) for s in sizes], rotation=45, ha="right")
    ax.set_xlabel("size")
    ax.set_ylabel("GB/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{coll}, {n} ranks, {run['dtype']}" + (f", {run['op']}" if run["op"] != "none" else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = png_name(path, outdir)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="files written by shardcast-bench --json")
    ap.add_argument("-o", "--outdir", default=".", help="directory for the PNGs")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py needs matplotlib: apt-get install python3-matplotlib (or pip install matplotlib)", file=sys.stderr)
        return 2
    seen = {}
    for p in args.json:
        out = png_name(p, args.outdir)
        if out in seen:
            print(f"plot.py: {seen[out]} and {p} would both be drawn to {out}; rename one of them", file=sys.stderr)
            return 2
        seen[out] = p
    os.makedirs(args.outdir, exist_ok=True)
    for p in args.json:
        out = plot(p, args.outdir, plt)
        if out:
            print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
