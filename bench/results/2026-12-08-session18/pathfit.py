"""Offline: the 16-bit kind factors split by copy path (16 / 4 / 2-byte rows), from session 16's sweep
(bench/results/2026-12-07-session16/fp16/kf_portgemm-f16.json: aligned sizes against odd
ones; the 4-byte path placed between them by planner/staging.py's NARROW_COPY_SLOWDOWN
figures), applied to call 1's forced-kind plans (call1/kinds_pred.txt) as a per-batch
correction of each prediction (flop-weighted over its GEMMs' A and B rows):
    python bench/results/2026-12-08-session18/pathfit.py > bench/results/2026-12-08-session18/pathfit.txt"""
import json

import numpy as np

from portgemm.benchmark.workloads import random_case
d = json.load(open('bench/results/2026-12-07-session16/fp16/kf_portgemm-f16.json'))
sizes = d['sizes']; ms = np.array(d['ms'], float); pr = np.array(d['predicted_ms'], float)
al = np.array([all(int(x) % 8 == 0 for x in s.split('x')[1:]) for s in sizes])
F = {}
for i, k in enumerate(d['factors']):
    r = ms[i] / pr[i]; name = k.split('.')[1]
    f16 = np.exp(np.nanmean(np.log(r[al]))); f2 = np.exp(np.nanmean(np.log(r[~al])))
    geo = np.exp(np.nanmean(np.log(r)))
    # the 4-byte path between them as NARROW_COPY_SLOWDOWN's 64x64 / 128x128 figures place it
    t = np.log(273/166)/np.log(273/96) if '128x' in name else np.log(152/107)/np.log(152/69)
    f4 = np.exp(np.log(f16) + t * (np.log(f2) - np.log(f16)))
    F[name] = (f16, f4, f2, geo)
    print(f"{name:16} f16 {f16:.2f} f4 {f4:.2f} f2 {f2:.2f} geo {geo:.2f}")
def path_factor(s, name):
    f16, f4, f2, geo = F[name]
    M, N, K = s[:, 0].astype(float), s[:, 1].astype(float), s[:, 2].astype(float)
    w = M * N * K
    def lf(ld):
        return np.where(ld % 8 == 0, np.log(f16), np.where(ld % 2 == 0, np.log(f4), np.log(f2)))
    l = 0.5 * (lf(s[:, 2]) + lf(s[:, 1]))
    return np.exp(np.dot(w, l) / w.sum()) / geo
rows = []
for line in open('bench/results/2026-12-08-session18/call1/kinds_pred.txt'):
    f = line.split()
    case, align, meth = f[0], int(f[2]), f[3]
    meas, pred = float(f[5]), float(f[8])
    kind = meth if '/' in meth and ':' not in meth else None
    if kind is None or kind == '32x32/4x4': continue
    mn, k, b = map(int, case.split('/'))
    s = random_case(b, mn, k, seed=(0, mn, k, b)).shapes
    s = -(-s // align) * align
    adj = path_factor(s, kind)
    rows.append((case, align, kind, meas / pred, meas / (pred * adj)))
    print(f"{case:>13} a{align} {kind:16} old {meas/pred:5.2f}  path {meas/(pred*adj):5.2f}")
r = np.array([x[3:] for x in rows])
print("log-ratio spread (std): old %.3f  path %.3f; max |log|: old %.3f path %.3f" % (np.log(r[:,0]).std(), np.log(r[:,1]).std(), np.abs(np.log(r[:,0])).max(), np.abs(np.log(r[:,1])).max()))
