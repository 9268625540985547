"""CI's matrix stage: print two `tiercheck matrix --json` reports and check them.

    matrix_check.py TWINS.json NATIVE.json N_QEMU

TWINS.json: every lane as its portable twin on every prompt (`--portable`).
NATIVE.json: the same lanes on the first prompt, the x86 lanes native and the aarch64
lanes natively under qemu-aarch64. Checks that exactly N_QEMU lanes ran under qemu, and
that on that prompt every lane's native run equals its twin: the same greedy tokens and
the same sha256 of every tap. Exit status 1 on a mismatch, 2 on unusable input.
"""

import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"matrix_check: {path}: {e}")


def table(report, title):
    print(f"--- {title}: {report['model']} (sha256 {report['model_sha256'][:12]}), "
          f"mode {report['mode']}, kv={report['kv']} fa={report['fa']}")
    for lane in report["lanes"]:
        cells = []
        for a in lane["agreement"]:
            cell = f"{a['name']} {a['agree']}/{a['of']}"
            if a["first_divergence"] is not None:
                cell += f" @{a['first_divergence']} gap {a['ref_gap']:.3f}"
            cells.append(cell)
        print(f"{lane['lane']:<22} {lane['how']:<46} {'  '.join(cells)}  {lane['wall_s']:.1f}s")
    print(f"total wall time {report['wall_s']:.1f}s")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    twins, native = load(sys.argv[1]), load(sys.argv[2])
    try:
        n_want = int(sys.argv[3])
    except ValueError:
        sys.exit(f"matrix_check: N_QEMU '{sys.argv[3]}' is not a number")
    table(twins, "every lane as its twin")
    table(native, "native (aarch64 under qemu)")
    bad = 0
    n_qemu = sum("native under qemu-aarch64" in lane["how"] for lane in native["lanes"])
    if n_qemu != n_want:
        print(f"matrix: expected the {n_want} aarch64 lanes to run under qemu-aarch64, saw {n_qemu}")
        bad += 1
    by_lane = {lane["lane"]: lane for lane in twins["lanes"]}
    compared = 0
    for lane in native["lanes"]:
        twin = by_lane.get(lane["lane"])
        if twin is None:
            print(f"matrix: {lane['lane']} is missing from the twins' report")
            bad += 1
            continue
        prompts = {p["name"]: p for p in twin["prompts"]}
        for p in lane["prompts"]:
            t = prompts.get(p["name"])
            if t is None:
                print(f"matrix: {lane['lane']}: prompt {p['name']} missing from the twins' report")
                bad += 1
                continue
            if p["generated"] != t["generated"]:
                print(f"matrix: {lane['lane']} ({lane['how']}) on {p['name']}: other tokens than its twin")
                bad += 1
            diff = sorted(k for k in set(p["digests"]) | set(t["digests"])
                          if p["digests"].get(k) != t["digests"].get(k))
            if diff:
                print(f"matrix: {lane['lane']} ({lane['how']}) on {p['name']}: taps {diff[:5]} differ from its twin")
                bad += 1
            compared += len(p["digests"])
    if bad:
        sys.exit(1)
    print(f"matrix: {len(native['lanes'])} lanes ({n_qemu} under qemu-aarch64) equal their "
          f"portable twins at all {compared} tap digests and every greedy token")


main()
