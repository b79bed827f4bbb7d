#!/usr/bin/env bash
# 2-core VM: the standard showdown (torch loaded, W=2, 600 steps x 5 runs, a and c), three batches, run
# from a clean checkout of c9f01fa (a git worktree) with the Python package built from the same library.
cd /tmp/wt
for b in 1 2 3; do
  PYTHONPATH=/work/main/build/python /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 \
    --variants ac --import-torch --out /work/main/.dev50/local2core/b$b > /work/main/.dev50/local2core/b$b.txt 2>&1
done
