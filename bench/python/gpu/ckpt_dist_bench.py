#!/usr/bin/env python3
"""Kept for scripts/gpu/run_all.sh and older notes: the bench lives in
bench/python/bench_ckpt_peers.py (the Python peers of `grist bench ckpt`); same arguments."""

import os
import runpy
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.argv[0] = os.path.join(here, "..", "bench_ckpt_peers.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
