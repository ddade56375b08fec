"""Does the planner's device rule pay off, and does its cost model predict? (issue 11)

For every case: bound-call time (``Plan.bind``, event-timed, bench/timing.py) of

- ``new``:        wavefront-tlp, tlp_model="device" (the default now)
- ``old``:        wavefront-tlp, tlp_model="paper" (the default before: today's plans)
- ``workgroup``:  workgroup-tlp, tlp_model="device"
- ``magma``, ``coordinated``

and each plan's predicted time (planner/cost_model.py ``predict``). Cases: docs/design.md
§6's grid (bench/peers.py's MAX_MN x MAX_K x batches 8/64/256/1024, M, N uniform in
[16, MaxMN], K in [16, MaxK]; 48 cases), 64 x 1000^2 x 512 against 64 x 1008^2 x 512,
and batches built so that wavefront and workgroup TLP pick different tiles under the
device rule (a partial last wave that Eq. 3 counts as full). Outputs checked against
float64 (NaN-poisoned C) for ``new`` before timing.

Prints: the table (GFLOP/s per method, predicted / measured), geomean speed-ups of
``new`` over each, the cases where ``new`` is slower than any other (beyond 2 %),
Pearson correlation of log predicted vs log measured time (all plans, and per method),
the 1008 / 1000 time-per-FLOP ratio. Writes planner_proof.json and planner_proof.txt
to --out (default $OUT, else the current directory). About 2-3 minutes on an H100.

    python bench/planner_proof.py [--quick] [--out DIR]
    python bench/planner_proof.py --replay bench/results/2026-11-23-h100/paper.json
                                  (no device: the model against a recorded bench run)
    python bench/planner_proof.py --replay <a planner_proof.json>
                                  (no device: today's planner and model on that run's
                                  cases; see replay_proof)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends.base import get_backend  # noqa: E402
from portgemm.planner.cost_model import predict  # noqa: E402
from timing import do_bench, random_batch  # noqa: E402

MAX_MN = (128, 256, 512, 1024)
MAX_K = (128, 256, 512)
BATCHES = (8, 64, 256, 1024)
METHODS = {   # name -> plan() keywords (mode=None: the default plan chooses its launches)
    "new": dict(strategy="wavefront-tlp", tlp_model="device", mode=None),
    # the same default without the tuned data file (occupancy/tuned/<arch>.json)
    "untuned": dict(strategy="wavefront-tlp", tlp_model="device", mode=None, tuned=False),
    "device fused": dict(strategy="wavefront-tlp", tlp_model="device"),
    "old": dict(strategy="wavefront-tlp", tlp_model="paper"),
    "workgroup": dict(strategy="workgroup-tlp", tlp_model="device"),
    "magma": dict(strategy="magma"),
    "coordinated": dict(strategy="coordinated"),
    # our larger kinds (tiles.py "portgemm": 32x32 to 128x128, 8x8 micro-tiles), one
    # launch per kind and fused
    "ours per-kind": dict(strategy="wavefront-tlp", family="portgemm", mode="per-kind"),
    "ours fused": dict(strategy="wavefront-tlp", family="portgemm", mode="fused"),
}
# Batches where the device rule's wavefront and workgroup TLP differ on sm_90 (fused,
# 396 slots): 64x64 tiles leave a partial last wave that Eq. 3 counts as full.
SEPARATING = (("sep 100x96^2x1024", (96, 96, 1024), 100),
              ("sep 300x96^2x256", (96, 96, 256), 300),
              ("sep 200x96^2x4096", (96, 96, 4096), 200),
              ("sep 450x64^2x1024 per-kind", (64, 64, 1024), 450))
SLOWER_TOL = 0.98


def fixed_batch(cp, rng, shape, n, dtype="float32"):
    m, nn, k = shape
    shapes = np.tile(np.array(shape, dtype=np.int64), (n, 1))
    A = [cp.asarray(rng.random((m, k)) - 0.5, dtype=dtype) for _ in range(n)]
    B = [cp.asarray(rng.random((k, nn)) - 0.5, dtype=dtype) for _ in range(n)]
    C = [cp.empty((m, nn), dtype=dtype) for _ in range(n)]
    return shapes, A, B, C


def max_rel_err(cp, A, B, C, sample=16):
    worst = 0.0
    for i in np.unique(np.linspace(0, len(A) - 1, min(sample, len(A))).astype(int)):
        ref = cp.asnumpy(A[i]).astype(np.float64) @ cp.asnumpy(B[i]).astype(np.float64)
        got = cp.asnumpy(C[i]).astype(np.float64)
        worst = max(worst, float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)))
    return worst


def cases(cp, rng, quick):
    grid = [(m, k) for m in MAX_MN for k in MAX_K]
    for mmn, mk in (grid[::4] if quick else grid):
        for b in ((8, 256) if quick else BATCHES):
            yield f"{mmn}/{mk} b{b}", "grid", "fused", random_batch(cp, rng, b, mmn, mk)
    for n in (1000, 1008):
        yield f"64x{n}^2x512", "1000-vs-1008", "fused", fixed_batch(cp, rng, (n, n, 512), 64)
    for name, shape, n in SEPARATING:
        mode = "per-kind" if name.endswith("per-kind") else "fused"
        yield name, "separating", mode, fixed_batch(cp, rng, shape, n)


def plan_digest(p) -> str:
    """What decides a plan's launches: equal digests launch the same work."""
    h = hashlib.sha256(f"{p.mode}{[k.name for k in p.kinds]}".encode())
    h.update(np.ascontiguousarray(p.tiles).tobytes())
    h.update(np.ascontiguousarray(p.block_ptr).tobytes())
    return h.hexdigest()[:16]


def recheck(cp, methods, bound, rep_ms, rounds=3):
    """Re-time, interleaved, every method that looked faster than 'new' with a different
    plan: median of the first timing and ``rounds`` more of each, so that one noisy
    timing does not decide a comparison."""
    new = methods["new"]
    rivals = [k for k, m in methods.items() if k != "new" and m["plan"] != new["plan"]
              and m["ms"] < new["ms"] * SLOWER_TOL]
    if not rivals:
        return
    times = {k: [methods[k]["ms"]] for k in ["new", *rivals]}
    for _ in range(rounds):
        for k in times:
            times[k].append(do_bench(cp, bound[k], warmup_ms=5.0, rep_ms=rep_ms))
    for k, t in times.items():
        methods[k]["ms"] = float(np.median(t))
        methods[k]["retimed"] = t


def pearson_log(pred, meas):
    p, m = np.log(np.asarray(pred)), np.log(np.asarray(meas))
    return float(np.corrcoef(p, m)[0, 1]) if len(p) > 2 else float("nan")


# --- replay: today's planner and model on a recorded run (no device) -------------------

def rebuilt_cases(seed: int, quick: bool = False):
    """(name, part, mode, shapes) of the cases a run with ``seed`` timed: the same draws
    as cases(), with the operands' values skipped (the generator advanced past them: one
    64-bit draw per float64)."""
    rng = np.random.default_rng(seed)
    skip = lambda n: rng.bit_generator.advance(int(n))  # noqa: E731
    grid = [(m, k) for m in MAX_MN for k in MAX_K]
    for mmn, mk in (grid[::4] if quick else grid):
        for b in ((8, 256) if quick else BATCHES):
            s = np.stack([rng.integers(16, mmn + 1, b), rng.integers(16, mmn + 1, b),
                          rng.integers(16, mk + 1, b)], 1)
            skip((s[:, 0] * s[:, 2]).sum() + (s[:, 2] * s[:, 1]).sum())
            yield f"{mmn}/{mk} b{b}", "grid", "fused", s
    fixed = [(f"64x{n}^2x512", "1000-vs-1008", "fused", (n, n, 512), 64) for n in (1000, 1008)]
    fixed += [(name, "separating", "per-kind" if name.endswith("per-kind") else "fused", shape, n)
              for name, shape, n in SEPARATING]
    for name, part, mode, (m, nn, k), n in fixed:
        skip(n * (m * k + k * nn))
        yield name, part, mode, np.tile(np.array((m, nn, k), dtype=np.int64), (n, 1))


def replay_proof(run: dict, seed: int = 11) -> str:
    """Today's planner and cost model on the cases of a recorded planner_proof run: every
    method replanned and predicted, against the times measured then. Reports the log
    correlation (all plans whose tiles are those timed; per method), predicted / measured
    per batch size, and the default plan's launch-structure choice (the paper's kinds
    fused or ours per kind), judged by the times measured for both."""
    recorded = {c["case"]: c for c in run["cases"]}
    quick = len(recorded) < 54
    pred, meas, meth, batch = [], [], [], []
    choice_rows, untimed, against = [], 0, []
    for name, part, mode, shapes in rebuilt_cases(seed, quick):
        rec = recorded.get(name)
        if rec is None:
            continue
        by_plan = {m["plan"]: m for m in rec["methods"].values()}
        plans = {}
        for k, kw in METHODS.items():
            kw = dict(kw)
            if kw["strategy"] != "magma" and "mode" not in kw:
                kw["mode"] = mode
            p = portgemm.plan(shapes, "float32", arch=run.get("arch", "sm_90"),
                              use_cache=False, **kw)
            plans[k] = p
            digest = plan_digest(p)
            # the method's own timing where its plan is the one it timed, else any
            # method's timing of these tiles
            timed = rec["methods"][k] if rec["methods"][k]["plan"] == digest \
                else by_plan.get(digest)
            if timed is None:        # tiles not timed in that run
                untimed += k == "new"
                continue
            pred.append(predict(p))
            meas.append(timed["ms"])
            meth.append(k)
            batch.append(len(shapes))
        m = rec["methods"]
        against.append(default_against(name, plans["new"], rec, by_plan))
        fused, ours = m["device fused"]["ms"], m["ours per-kind"]["ms"]
        # the picked plan's time as its structure's method measured it
        digest = plan_digest(plans["new"])
        pick = {m["device fused"]["plan"]: fused, m["ours per-kind"]["plan"]: ours}.get(
            digest, by_plan[digest]["ms"] if digest in by_plan else None)
        choice_rows.append([name, f"{plans['new'].kinds[0].family} {plans['new'].mode}",
                            fused, ours, None if pick is None else pick / min(fused, ours)])
    pred, meas, meth, batch = map(np.array, (pred, meas, meth, batch))
    lines = [f"replay of {len(recorded)} cases, {len(pred)} timed plans rebuilt; "
             f"default plans not timed then: {untimed}"]
    lines.append("Pearson r of log(predicted) vs log(measured): all "
                 f"{pearson_log(pred, meas):.4f}; " + ", ".join(
                     f"{k} {pearson_log(pred[meth == k], meas[meth == k]):.4f}"
                     for k in METHODS if (meth == k).sum() > 2))
    ratio = pred / meas
    lines.append("predicted / measured, geomean [min, max] per batch: " + "; ".join(
        f"b{b} {np.exp(np.log(ratio[batch == b]).mean()):.3f} "
        f"[{ratio[batch == b].min():.2f}, {ratio[batch == b].max():.2f}]"
        for b in sorted(set(batch.tolist()))))
    for k in ("device fused", "ours per-kind"):
        sel = meth == k
        small = sel & (batch <= 8)
        lines.append(f"  {k}: predicted / measured geomean {np.exp(np.log(ratio[sel]).mean()):.3f}, "
                     f"batch 8 {np.exp(np.log(ratio[small]).mean()):.3f}")
    lines.append("default plan's launch structure against both timed structures "
                 "(picked ms / better ms):")
    lines.append(tabulate(choice_rows, headers=["case", "picked", "fused ms", "ours ms",
                                                "picked / better"], floatfmt=".4f"))
    got = np.array([r[4] for r in choice_rows if r[4] is not None])
    miss = [r[0] for r in choice_rows if r[4] is not None and r[4] > 1.03]
    lines.append(f"picked / better: geomean {np.exp(np.log(got).mean()):.4f}, worst "
                 f"{got.max():.3f}; beyond 3 % in {len(miss)}: {', '.join(miss) or '-'}")
    lines.append(against_summary(against))
    return "\n".join(lines)


RIVALS = ("old", "magma", "coordinated")


def default_against(name, p, rec, by_plan):
    """(case, how the default's time is known, its ms, {rival: rival ms}) of a replayed
    default plan: measured where that run timed its tiles (the run's default's own
    time, else the median of the methods that timed them: one call of 10-50 us can be
    off by several times), else its prediction scaled by the measured / predicted of
    that run's own default (the model's error on this batch)."""
    digest = plan_digest(p)
    m = rec["methods"]
    if digest == m["new"]["plan"]:
        how, ms = "timed", m["new"]["ms"]
    elif digest in by_plan:
        how = "timed"
        ms = float(np.median([v["ms"] for v in m.values() if v["plan"] == digest]))
    else:
        how, ms = "scaled", predict(p) * m["new"]["ms"] / m["new"]["predicted_ms"]
    return name, how, ms, {k: m[k]["ms"] for k in RIVALS}


def against_summary(rows) -> str:
    """The replayed default against old, magma and coordinated as measured in the run:
    geomean speed-up and the cases slower beyond 2 %."""
    lines = ["replayed default against the run's rivals (its time measured then where "
             "its tiles were timed, else scaled):"]
    for k in RIVALS:
        ratio = np.array([r[3][k] / r[2] for r in rows])
        slow = [f"{r[0]} ({r[1]} {r[2]:.4g} vs {r[3][k]:.4g} ms)" for r in rows
                if r[2] * SLOWER_TOL > r[3][k]]
        lines.append(f"  vs {k}: geomean {np.exp(np.log(ratio).mean()):.3f}x; slower beyond "
                     f"2 % in {len(slow)}: {'; '.join(slow) or '-'}")
    scaled = [r[0] for r in rows if r[1] == "scaled"]
    lines.append(f"  default plans not timed in the run (scaled): {len(scaled)}: "
                 f"{', '.join(scaled) or '-'}")
    return "\n".join(lines)


def broad_batches(n: int, seed: int = 7):
    """(label, shapes, dtype) of ``n`` batches beyond the proof's grid: uniform (M, N 64 to
    1,024, K 128 to 2,048, 8 to 1,024 GEMMs), log-normal, bimodal, MoE-like (experts'
    N, K shared by their tokens) and uniform fixed sizes (half of them 16-byte aligned
    in fp32); fp32 and fp64."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        b = int(rng.choice([8, 64, 256, 1024]))
        top, kmax = int(rng.choice([256, 512, 1024])), int(rng.choice([128, 512, 2048]))
        dist = ("uniform", "log-normal", "bimodal", "moe", "fixed")[i % 5]
        if dist == "uniform":
            s = np.stack([rng.integers(64, top + 1, b), rng.integers(64, top + 1, b),
                          rng.integers(128, kmax + 1, b)], 1)
        elif dist == "log-normal":
            s = np.clip(np.round(np.exp(rng.normal(np.log(top) - 0.7, 0.6, (b, 3)))), 1,
                        [top, top, kmax])
        elif dist == "bimodal":
            small = rng.random(b) < 0.7
            s = np.where(small[:, None], rng.integers(8, top // 8 + 1, (b, 3)),
                         rng.integers(top // 2, top + 1, (b, 3)))
            s[:, 2] = np.minimum(s[:, 2], kmax)
        elif dist == "moe":
            e = int(rng.integers(4, 65))
            nk = np.stack([rng.integers(64, top + 1, e), rng.integers(64, kmax + 1, e)], 1)
            nk -= nk % 8 * (rng.random((e, 1)) < 0.5)   # half the experts aligned
            pick = rng.integers(0, e, b)
            s = np.stack([rng.integers(0, 2 * top + 1, b), nk[pick, 0], nk[pick, 1]], 1)
        else:
            m, nn, k = (int(x) for x in rng.integers(64, top + 1, 3))
            if rng.random() < 0.5:
                m, nn, k = m - m % 16, nn - nn % 16, k - k % 16
            s = np.tile([m, nn, max(k, 16)], (b, 1))
        dtype = ("float32", "float64")[int(rng.integers(0, 2))]
        yield f"{dist} b{b} {top}/{kmax}", s.astype(np.int64), dtype


def broad_replay(n: int) -> str:
    """The default plan of today's model against its plan without the measured path
    efficiencies (occupancy/vector_path.py) and against old, magma and coordinated, all
    priced by today's model (no device): how many default plans change, and where the
    default is predicted slower than a rival beyond 2 %."""
    from portgemm.occupancy import vector_path
    saved = {k: dict(v) for k, v in vector_path.EFFICIENCY.items()}
    changed, slower, total = [], [], 0
    for label, s, dtype in broad_batches(n):
        kw = dict(arch="sm_90", use_cache=False)
        try:
            vector_path.EFFICIENCY.clear()
            before = portgemm.plan(s, dtype, **kw)
        finally:
            vector_path.EFFICIENCY.update(saved)
        new = portgemm.plan(s, dtype, **kw)
        total += 1
        t_new = predict(new)
        if plan_digest(before) != plan_digest(new):
            changed.append(f"{label} {dtype}: {predict(before):.4g} -> {t_new:.4g} ms")
        for k in RIVALS:
            p = portgemm.plan(s, dtype, **kw, **METHODS[k])
            t = predict(p)
            if t_new * SLOWER_TOL > t:
                was = "" if predict(before) * SLOWER_TOL > t else " (new)"
                slower.append(f"{label} {dtype} vs {k}: {t_new:.4g} vs {t:.4g} ms{was}")
    return "\n".join([f"{total} broad batches; default plans changed by the path "
                      f"efficiencies: {len(changed)}", *("  " + c for c in changed),
                      f"default predicted slower beyond 2 % than a rival: {len(slower)} ((new): not so "
                      f"without the efficiencies)",
                      *("  " + c for c in slower)])


def fit_vector_path(path: str, seed: int = 9) -> str:
    """occupancy/vector_path.py's figures from a kernel_bench.json (bench/kernel_bench.py,
    its default seed, config ``base``): per kind timed one kind at a time, least squares
    of log(measured / predicted) against the batch's vector share f (planner/alignment),
    scalar = exp(a), vector = exp(a + b). The model's time is today's without the
    figures."""
    import kernel_bench as kb
    from portgemm.occupancy import get_arch, vector_path
    from portgemm.planner.alignment import aligned_rows, vector_share
    from portgemm.tuning.model import one_kind_plan
    raw = json.loads(Path(path).read_text())
    names = {r["case"] for r in raw}
    rng = np.random.default_rng(seed)
    shapes_of = {}
    for dtype in ("float32", "float64"):   # kernel_bench's draws, values skipped
        for name, *spec in kb.CASES[dtype]:
            if name not in names:
                continue
            if isinstance(spec[0], tuple):
                (m, n, k), b = spec
                s = np.tile(np.array([m, n, k], np.int64), (b, 1))
            else:
                mmn, mk, b = spec
                s = np.stack([rng.integers(16, mmn + 1, b), rng.integers(16, mmn + 1, b),
                              rng.integers(16, mk + 1, b)], 1)
            rng.bit_generator.advance(int((s[:, 0] * s[:, 2]).sum() + (s[:, 2] * s[:, 1]).sum()))
            shapes_of[name] = (dtype, s)
    arch = get_arch("sm_90")   # kernel_bench.json records no arch: the H100's
    saved = {k: dict(v) for k, v in vector_path.EFFICIENCY.items()}
    vector_path.EFFICIENCY.clear()
    try:
        pts = {}
        for dtype in ("float32", "float64"):
            kinds = {k.kind: k for k in kb.timed_kinds(dtype)}
            times = {}
            for r in raw:
                if r["config"] == "base" and r["method"] in kinds and \
                        shapes_of.get(r["case"], (None,))[0] == dtype:
                    times.setdefault((r["case"], r["method"]), []).append(r["ms"])
            for (case, kn), ms in times.items():
                s, k = shapes_of[case][1], kinds[kn]
                f = float(vector_share(s, aligned_rows(s, dtype), [k.tm], [k.tn], [k.tk])[0])
                pred = predict(one_kind_plan(s, k, dtype, arch))
                pts.setdefault((dtype, k.family, kn), []).append((f, np.log(np.median(ms) / pred)))
    finally:
        vector_path.EFFICIENCY.update(saved)
    rows = []
    for (dtype, fam, kn), v in sorted(pts.items()):
        f, y = np.array(v).T
        X = np.stack([np.ones_like(f), f], 1)
        (a, b), *_ = np.linalg.lstsq(X, y, rcond=None)
        spread = f.max() - f.min()
        fits = spread > 0.3   # shares too alike cannot tell the two paths apart
        rows.append([dtype, fam, kn, len(f), f"{f.min():.2f}-{f.max():.2f}",
                     float(np.exp(y.mean())), np.exp(a) if fits else None,
                     np.exp(a + b) if fits else None,
                     float(np.sqrt(((y - X @ [a, b]) ** 2).mean())) if fits else None,
                     float(np.sqrt((y ** 2).mean()))])
    return tabulate(rows, headers=["dtype", "family", "kind", "batches", "vector share",
                                   "meas/pred geomean", "scalar", "vector", "rms log resid",
                                   "rms log before"], floatfmt=".3f", missingval="-")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a quarter of the grid, 2 batches")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--rep-ms", type=float, default=60.0)
    ap.add_argument("--replay", metavar="JSON", help="compare the model with a recorded "
                    "`python -m portgemm bench --grid/--paper` run instead (no device)")
    ap.add_argument("--ceilings", metavar="JSON", help="with --replay: device ceilings "
                    "({arch: entry}, e.g. a ceilings-<arch>.json of a result folder) to "
                    "replay with instead of occupancy/ceilings.json's")
    ap.add_argument("--broad", type=int, metavar="N", help="no device: N broader batches "
                    "replanned by today's model (broad_replay)")
    ap.add_argument("--fit-vector-path", metavar="KERNEL_BENCH_JSON",
                    help="no device: fit occupancy/vector_path.py's figures (fit_vector_path)")
    args = ap.parse_args(argv)
    if args.fit_vector_path:
        print(fit_vector_path(args.fit_vector_path))
        return
    if args.broad:
        print(broad_replay(args.broad))
        return
    if args.replay:
        if args.ceilings:        # {arch: entry}, as benchmark/ceilings.py writes it
            from portgemm.occupancy import ceilings
            for arch_name, entry in json.loads(Path(args.ceilings).read_text()).items():
                ceilings.use_in_memory(arch_name, entry)
        data = json.loads(Path(args.replay).read_text())
        if "cases" in data:      # one of ours
            print(replay_proof(data, args.seed))
            return
        from portgemm.benchmark.model_check import replay
        print(json.dumps(replay(args.replay), indent=1))
        return
    t0 = time.perf_counter()
    be = get_backend("cuda")
    cp = be.cp
    arch = be.arch()
    rng = np.random.default_rng(args.seed)
    rows, raw, keep = [], [], {}
    for name, part, mode, (shapes, A, B, C) in cases(cp, rng, args.quick):
        flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
        rec = {"case": name, "part": part, "batch": int(len(shapes)), "flops": flops,
               "shapes": shapes.tolist() if part != "grid" else None, "methods": {}}
        for meth, kw in METHODS.items():
            kw = dict(kw)
            if kw["strategy"] in ("wavefront-tlp", "workgroup-tlp", "coordinated") \
                    and "mode" not in kw:
                kw["mode"] = mode
            p = portgemm.plan(shapes, "float32", arch=arch, **kw)
            bound = p.bind(A, B, C, backend=be)
            err = None
            if meth in ("new", "device fused") or meth.startswith("ours"):   # kernels checked
                for c in C:
                    c.fill(cp.nan)
                bound()
                cp.cuda.get_current_stream().synchronize()
                err = max_rel_err(cp, A, B, C)
            ms = do_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms)
            keep[meth] = bound
            rec["methods"][meth] = {"ms": ms, "predicted_ms": predict(p), "err": err,
                                    "plan": plan_digest(p),
                                    "tiles": p.tiles_per_kind(), "tlp": p.tlp,
                                    "threshold": p.tlp_threshold}
        recheck(cp, rec["methods"], keep, args.rep_ms)
        keep.clear()
        raw.append(rec)
        m = rec["methods"]
        rows.append([name] + [flops / m[k]["ms"] / 1e6 for k in METHODS]
                    + [f'{m["new"]["predicted_ms"] / m["new"]["ms"]:.2f}x',
                       " ".join(f"{k}:{v}" for k, v in m["new"]["tiles"].items())])
        print(f"{name}: " + ", ".join(f"{k} {v['ms']:.4f} ms" for k, v in m.items()),
              flush=True)

    lines = [f"device: {be.device_name()} ({arch.name}, {arch.compute_units} SMs); bound calls, "
             f"GFLOP/s (fp32); pred/meas = predicted / measured time of 'new'",
             tabulate(rows, headers=["case", *METHODS, "pred/meas new", "new's tiles"],
                      floatfmt=",.0f")]
    new = np.array([r["methods"]["new"]["ms"] for r in raw])
    summary = {"geomean_speedup_of_new": {}, "slower_than": {}, "pearson_log": {}}
    for k in METHODS:
        if k == "new":
            continue
        other = np.array([r["methods"][k]["ms"] for r in raw])
        grid = np.array([r["part"] == "grid" for r in raw])
        geo = float(np.exp(np.mean(np.log(other / new))))
        geo_grid = float(np.exp(np.mean(np.log(other[grid] / new[grid])))) if grid.any() else None
        slow = [r["case"] for r, o, n in zip(raw, other, new) if o < n * SLOWER_TOL
                and r["methods"][k]["plan"] != r["methods"]["new"]["plan"]]
        summary["geomean_speedup_of_new"][k] = {"all": geo, "grid": geo_grid}
        summary["slower_than"][k] = slow
        same = sum(r["methods"][k]["plan"] == r["methods"]["new"]["plan"] for r in raw)
        lines.append(f"new vs {k}: geomean speed-up {geo:.3f}x (grid {geo_grid:.3f}x); identical "
                     f"plans in {same} of {len(raw)}; where plans differ, new slower (beyond "
                     f"{1 - SLOWER_TOL:.0%}, after re-timing) in {len(slow)}: {', '.join(slow) or '-'}")
    pred = [m["predicted_ms"] for r in raw for m in r["methods"].values()]
    meas = [m["ms"] for r in raw for m in r["methods"].values()]
    summary["pearson_log"]["all"] = pearson_log(pred, meas)
    for k in METHODS:
        summary["pearson_log"][k] = pearson_log([r["methods"][k]["predicted_ms"] for r in raw],
                                                [r["methods"][k]["ms"] for r in raw])
    lines.append("Pearson r of log(predicted) vs log(measured): " + ", ".join(
        f"{k} {v:.3f}" for k, v in summary["pearson_log"].items()))
    by = {r["case"]: r for r in raw}
    if "64x1000^2x512" in by and "64x1008^2x512" in by:
        per_flop = {k: (by["64x1008^2x512"]["methods"][k]["ms"] / by["64x1008^2x512"]["flops"])
                    / (by["64x1000^2x512"]["methods"][k]["ms"] / by["64x1000^2x512"]["flops"])
                    for k in METHODS}
        summary["time_per_flop_1008_over_1000"] = per_flop
        lines.append("1008 / 1000 time per FLOP: " + ", ".join(f"{k} {v:.3f}"
                                                                for k, v in per_flop.items()))
    sep = [r for r in raw if r["part"] == "separating"]
    for r in sep:
        m = r["methods"]
        lines.append(f"{r['case']}: wavefront (device rule, fused) {m['device fused']['tiles']} {m['device fused']['ms']:.4f} ms vs "
                     f"workgroup {m['workgroup']['tiles']} {m['workgroup']['ms']:.4f} ms "
                     f"(predicted {m['device fused']['predicted_ms']:.4f} vs "
                     f"{m['workgroup']['predicted_ms']:.4f})")
    errs = {k: max(r["methods"][k]["err"] for r in raw) for k in METHODS
            if raw and raw[0]["methods"][k]["err"] is not None}
    lines.append("max relative error over all cases: " + ", ".join(
        f"{k} {v:.2e}" for k, v in errs.items()))
    lines.append(f"wall time {time.perf_counter() - t0:.0f} s")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "planner_proof.txt").write_text(text + "\n")
    (out / "planner_proof.json").write_text(json.dumps(
        {"device": be.device_name(), "arch": arch.name, "cases": raw, "summary": summary},
        indent=1))


if __name__ == "__main__":
    main()
