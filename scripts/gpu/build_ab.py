#!/usr/bin/env python3
"""Interleaved A/B of grist binaries on one build config: the same build run by each binary in
turn, PAIRS times, after one unmeasured warm-up each; one line per run (the build's total and stage
seconds from reports/build.json, dedup's sub-stages from its dedup_report.json, the release id),
then per binary the median and range of each figure. A host's speed drifts over minutes; runs
taken in turns see the same drift, so their medians compare (compare nothing across calls or
hosts). Every run must give the same release id: it says so, and exits 1 if not.

Usage: scripts/gpu/build_ab.py CONFIG THREADS PAIRS LABEL=GRIST [LABEL=GRIST ...]
  e.g. scripts/gpu/build_ab.py corpus.toml 16 8 base=.devcarry/base/grist new=.devcarry/build/grist
Each run builds into a fresh folder under $GRIST_AB_DIR (default /tmp/grist_ab), removed after.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

SUBSTAGES = ['signatures', 'buckets', 'clusters', 'merge', 'filter']


def run(grist, config, threads, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, 'rel')
    t0 = time.monotonic()
    p = subprocess.run([grist, 'build', '--config', config, '--output', out, '--threads',
                        str(threads), '--quiet'], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f'{grist}: exit {p.returncode}\n{p.stderr[-2000:]}')
    b = json.load(open(os.path.join(out, 'reports', 'build.json')))['build']
    fig = {'wall': wall, 'total': b['seconds']}
    for s in b['stages']:
        fig[s['name']] = s['seconds']
    report = os.path.join(out + '.work', 'dedup', 'dedup_report.json')
    if os.path.exists(report):
        for s in json.load(open(report))['stages']:
            if s['stage'] in SUBSTAGES:
                fig[s['stage']] = s['seconds']
    shutil.rmtree(work, ignore_errors=True)
    return fig, b['release_id']


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    config = os.path.abspath(sys.argv[1])
    threads, pairs = int(sys.argv[2]), int(sys.argv[3])
    binaries = [a.split('=', 1) for a in sys.argv[4:]]
    base = os.environ.get('GRIST_AB_DIR', '/tmp/grist_ab')
    print(f'# {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, {os.cpu_count()} CPUs, '
          f'{threads} threads, {pairs} interleaved rounds of {" ".join(l for l, _ in binaries)}, '
          f'config {sys.argv[1]}')
    figs = {label: [] for label, _ in binaries}
    ids = set()
    for label, grist in binaries:  # warm-up: page cache, first-run effects
        run(os.path.abspath(grist), config, threads, os.path.join(base, label))
    for _ in range(pairs):
        for label, grist in binaries:
            fig, rid = run(os.path.abspath(grist), config, threads, os.path.join(base, label))
            figs[label].append(fig)
            ids.add(rid)
            print(f't{threads} {label} ' + ' '.join(f'{k} {v:.4f}' for k, v in fig.items()) +
                  f' {rid}', flush=True)
    keys = [k for k in figs[binaries[0][0]][0]]
    print('\nmedian [min, max] seconds')
    print('| figure | ' + ' | '.join(l for l, _ in binaries) + ' |')
    print('|---|' + '---|' * len(binaries))
    for k in keys:
        cells = []
        for label, _ in binaries:
            v = [f[k] for f in figs[label] if k in f]
            cells.append(f'{statistics.median(v):.4f} [{min(v):.4f}, {max(v):.4f}]' if v else '-')
        print(f'| {k} | ' + ' | '.join(cells) + ' |')
    same = len(ids) == 1
    verdict = 'the same in every run' if same else 'DIFFER'
    print(f'\nrelease ids: {" ".join(sorted(ids))} ({verdict})')
    sys.exit(0 if same else 1)


if __name__ == '__main__':
    main()
