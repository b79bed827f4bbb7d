"""``python3 -m ringcast gc [--dry-run] [--prefix P]``: what the ``ringcast gc`` command does, for a Python
install (pip installs the module, not the C++ command-line tool).

Removes this user's ringcast segments in /dev/shm whose creator, writer and readers are all dead, and
gather doorbells whose group has no reply ring left — what killed processes leave behind. Never
touches other users' objects, objects that are not ringcast's, or segments still in use; names each
one it keeps and why (in use by which pid, another user's, another version's, ...).
"""
import argparse
import sys
from typing import List, Optional

from ringcast import _core


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ringcast",
                                     description="What the `ringcast` command-line tool does, for a Python install.")
    commands = parser.add_subparsers(dest="command", required=True)
    gc = commands.add_parser("gc", help="remove segments whose creator, writer and readers are all dead")
    gc.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    gc.add_argument("--prefix", default="", help="only names starting with this")
    args = parser.parse_args(argv)
    try:
        swept, kept = _core.sweep_abandoned_explained(args.prefix, args.dry_run)
    except OSError as e:
        print(f"python3 -m ringcast: {e}", file=sys.stderr)
        return 1
    verb = "would remove" if args.dry_run else "removed"
    for name, size in swept:
        print(f"{verb} {name} ({size} bytes)")
    for name, why in sorted(kept):
        print(f"kept {name}: {why}")
    print(f"{len(swept)} {'to remove' if args.dry_run else 'removed'}, {len(kept)} kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
