#!/usr/bin/env python3
"""On-CPU timeline of a grist run: how many CPUs were busy, in what, bin by bin.

Reads `perf script -F tid,time,ip,sym` of `perf record -F HZ -g` (plain or gzipped), as
scripts/gpu/timeline.sh writes it. Each sample is one CPU busy for 1/HZ s, so a bin's samples over
HZ x bin give the CPUs busy in it. Per bin: the CPUs busy, the threads seen, the component mix
(the grist namespace of each sample's innermost grist frame: clean, dedup, tokenize, pack, shard,
release, common; "-" where none) and the top leaf functions. A stage that scales shows the
machine's CPU count through its bins; a serial tail, a wait or a lock shows as the bins below it.

Usage: scripts/gpu/timeline.py SCRIPT[.gz] HZ [BIN_MS]   (BIN_MS default 10)
"""
import collections
import gzip
import re
import sys

HEADER = re.compile(r'^\s*(?:\S+\s+)?(\d+)\s+(?:\[\d+\]\s+)?([\d.]+):')
COMPONENT = re.compile(r'grist::(?:internal::)?([a-z_]+)::')


def samples(path):
    opener = gzip.open if path.endswith('.gz') else open
    cur = None
    with opener(path, 'rt', errors='replace') as f:
        for line in f:
            m = HEADER.match(line)
            if m and not line.startswith(('\t', ' ' * 8)):
                if cur is not None:
                    yield cur
                cur = (float(m.group(2)), int(m.group(1)), [])
                continue
            parts = line.strip().split(None, 1)
            if cur is not None and len(parts) == 2:
                cur[2].append(re.sub(r'\+0x[0-9a-f]+.*', '', parts[1]))
    if cur is not None:
        yield cur


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    hz = float(sys.argv[2])
    bin_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    got = list(samples(sys.argv[1]))
    if not got:
        sys.exit(f'{sys.argv[1]}: no samples')
    t0 = min(s[0] for s in got)
    span = max(s[0] for s in got) - t0
    bins = collections.defaultdict(list)
    for s in got:
        bins[int((s[0] - t0) * 1000 / bin_ms)].append(s)
    print(f'{len(got)} samples at {hz:g} Hz, {len({s[1] for s in got})} threads, '
          f'span {span:.3f} s, bin {bin_ms:g} ms')
    print('bin_ms   cpus  thr  components | top leaves')
    for b in range(max(bins) + 1):
        ss = bins.get(b, [])
        cpus = len(ss) / (hz * bin_ms / 1000)
        comp = collections.Counter()
        for s in ss:
            m = next((COMPONENT.search(f) for f in s[2] if COMPONENT.search(f)), None)
            name = m.group(1) if m else '-'
            comp['common' if name == 'internal' else name] += 1
        leaves = collections.Counter(s[2][0][:48] if s[2] else '?' for s in ss)
        mix = ' '.join(f'{k}:{v}' for k, v in comp.most_common(3))
        top = '; '.join(f'{k}:{v}' for k, v in leaves.most_common(3))
        print(f'{b * bin_ms:6.0f} {cpus:6.1f} {len({s[1] for s in ss}):4d}  {mix} | {top}')


if __name__ == '__main__':
    main()
