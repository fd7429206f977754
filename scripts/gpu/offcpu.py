#!/usr/bin/env python3
"""Off-CPU time of a grist run, by where its threads slept.

Reads `perf script -F tid,time,trace,ip,sym` of `perf record -e sched:sched_switch --call-graph
dwarf` (gzipped), as scripts/gpu/offcpu.sh writes it. A thread's off-CPU interval runs from its
switch-out in a sleeping state (S or D: waiting, not preempted) to its next switch-in; each is
charged to the grist frames of the stack it slept in. Prints the run's span, then the sleeping
thread-seconds by site, largest first (idle compress and decoder threads included: read the sites).

Usage: scripts/gpu/offcpu.py switch_script.txt.gz
"""
import gzip, re, sys, collections
ev = re.compile(r'^\s*(\d+)\s+([\d.]+): prev_comm=(\S+) prev_pid=(\d+) .* prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)')
events = []
cur = None
for line in gzip.open(sys.argv[1], 'rt', errors='replace'):
    m = ev.match(line)
    if m:
        cur = dict(t=float(m.group(2)), prev=int(m.group(4)), pcomm=m.group(3), state=m.group(5), next=int(m.group(7)), ncomm=m.group(6), stack=[])
        events.append(cur); continue
    if cur is not None and line.strip():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and not parts[0].startswith('ffffffff'):
            cur['stack'].append(parts[1])
def site(stack):
    keep = [f for f in stack if f.startswith('grist::') or 'OrderedParallel' in f or 'FramePool' in f or 'WorkerLoop' in f or 'Decoder' in f]
    keep = [re.sub(r'\(.*', '', f.replace('(anonymous namespace)::',''))[:80] for f in keep[:4]]
    return ' <- '.join(keep) if keep else '|'.join(s[:40] for s in stack[:3])
off = {}
agg = collections.Counter(); cnt = collections.Counter()
grist = set()
t0 = events[0]['t'] if events else 0; t1 = events[-1]['t'] if events else 0
# A thread's comm is its program's file name (first 15 bytes): a binary carried as grist_prev or
# grist_exp is still grist's.
def is_grist(comm): return comm.startswith('grist')
for e in events:
    if is_grist(e['pcomm']): grist.add(e['prev'])
    if is_grist(e['ncomm']): grist.add(e['next'])
for e in events:
    if is_grist(e['pcomm']) and e['state'] != 'R':
        off[e['prev']] = (e['t'], site(e['stack']))
    if e['next'] in off:
        ts, s = off.pop(e['next'])
        agg[s] += e['t'] - ts; cnt[s] += 1
print('span %.3f s, %d grist threads, %d switch events' % (t1 - t0, len(grist), len(events)))
tot = sum(agg.values())
print('off-CPU (sleeping, not preempted) thread-seconds: %.3f' % tot)
for s, v in agg.most_common(25):
    print('%8.4f s %5d  %s' % (v, cnt[s], s))
