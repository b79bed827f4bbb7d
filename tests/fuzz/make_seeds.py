#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (committed; rerun only when the formats change).

corpus/segment_image: see fuzz_segment_image.cpp (shape byte, readers byte, 2 bytes, XOR overlay).
corpus/record: see fuzz_record.cpp (u64 head, u32 published bytes, flags byte, ring bytes); record
headers are {u32 length, u32 stamp = kind | lap << 8, u64 tag} (include/ringcast/layout.hpp).
corpus/ownership: see fuzz_ownership.cpp (readers/evict byte, then one op per byte).
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CAP = 64 * 1024
MESSAGE, PADDING, FIRST, MIDDLE, LAST, ABORT = 1, 2, 3, 4, 5, 6


def write(sub, name, data):
    d = os.path.join(HERE, "corpus", sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def align(n):
    return (n + 15) & ~15


def record(kind, payload, tag=0):
    """A record as it is laid out, its stamp still lap 0: ring_input stamps it with its position's lap."""
    return struct.pack("<IIQ", len(payload), kind, tag) + payload + b"\0" * (align(len(payload)) - len(payload))


def stamped(rec, position):
    kind = struct.unpack_from("<I", rec, 4)[0]
    return rec[:4] + struct.pack("<I", kind | ((position // CAP) & 0xFFFFFF) << 8) + rec[8:]


def ring_input(head, records, closed=False, extra_published=0):
    placed, position = [], head
    for rec in records:
        placed.append(stamped(rec, position))
        position += len(rec)
    body = b"".join(placed)
    return struct.pack("<QIB", head, min(len(body) + extra_published, CAP), 1 if closed else 0) + body


# ---- segment images ----------------------------------------------------------------------------
write("segment_image", "raw_empty", b"\0")
write("segment_image", "raw_magic_only", b"\0" + b"RINGCAST" + b"\0" * 120)
for readers in range(4):
    write("segment_image", f"valid_r{readers + 1}", bytes([1, readers, 0, 0]) + b"\0" * 64)
    write("segment_image", f"truncated_r{readers + 1}", bytes([2, readers, 16, 0]))
    write("segment_image", f"extended_r{readers + 1}", bytes([3, readers, 7, 0]))
# flip the ABI version, the capacity, a reader head (slot 0 at offset 384)
write("segment_image", "abi_flip", bytes([1, 0, 0, 0]) + b"\0" * 8 + b"\x02")
write("segment_image", "capacity_flip", bytes([1, 0, 0, 0]) + b"\0" * 16 + b"\x01")
write("segment_image", "head_flip", bytes([1, 0, 0, 0]) + b"\0" * 384 + b"\x10")

# ---- ring contents -----------------------------------------------------------------------------
pay = bytes(range(100))
write("record", "one_message", ring_input(0, [record(MESSAGE, pay, 7)]))
write("record", "three_messages", ring_input(0, [record(MESSAGE, pay, 1), record(MESSAGE, b"", 2),
                                                  record(MESSAGE, b"x" * 33, 3)]))
write("record", "closed_after_one", ring_input(0, [record(MESSAGE, pay)], closed=True))
# a padding record reaching the ring's end, then a message at the ring's start
head = CAP - 64
write("record", "padding_then_message", ring_input(head, [record(PADDING, b"\0" * 48), record(MESSAGE, pay, 9)]))
# a fragmented message of 300 bytes: first (8-byte total + 100), middle (100), last (100)
total = struct.pack("<Q", 300)
frags = [record(FIRST, total + pay, 5), record(MIDDLE, pay, 5), record(LAST, pay, 5)]
write("record", "fragmented", ring_input(0, frags))
write("record", "fragmented_aborted", ring_input(0, [record(FIRST, total + pay, 5), record(ABORT, b""),
                                                      record(MESSAGE, pay, 6)]))
write("record", "fragmented_across_end", ring_input(CAP - 128, frags))
write("record", "orphan_fragment", ring_input(0, [record(LAST, pay, 5), record(MESSAGE, pay, 6)]))
# a full ring: 16 messages of 4080 bytes (4096-byte records) publish exactly the capacity, from the
# ring's start, and from one record before the ring's end on its fourth lap (the rest wrap to the start)
full = [record(MESSAGE, bytes([i]) * 4080, i) for i in range(16)]
write("record", "full_ring", ring_input(0, full))
write("record", "full_ring_wrapped", ring_input(3 * CAP - 4096, full, closed=True))
write("record", "unpublished_tail", ring_input(0, [record(MESSAGE, pay)], extra_published=-16))
# past the tail: a record stamped for its lap is taken by its stamp; one of another lap is not there
write("record", "stamped_past_tail", struct.pack("<QIB", 0, 0, 0) + stamped(record(MESSAGE, pay, 3), 0))
write("record", "stale_lap_past_tail", struct.pack("<QIB", 0, 0, 0) + stamped(record(MESSAGE, pay, 3), CAP))

# ---- ownership: op sequences (fuzz_ownership.cpp: byte 0 = readers - 1 | 4 if evicting; then op + 9 * arg,
# arg = rank + readers * flag for the rank ops, the count - 1 for writes)
ATTACH, DETACH, DEATH, TICK, WRITE, READ, WRITER_DEATH, WRITER_CLAIM, READER_TICK = range(9)


def ops(readers, evict, *steps):
    out = [readers - 1 | (4 if evict else 0)]
    for step in steps:
        o, rank, flag = (step + (0, 0))[:3]
        arg = rank + readers * flag if o not in (WRITE,) else rank
        out.append(o + 9 * arg)
    return bytes(out)


# two readers, the ring filled, rank 1 dies asleep; the evicting writer's tick evicts it; re-attach fails
write("ownership", "evict_dead_sleeper", ops(2, True, (ATTACH, 0), (ATTACH, 1), (WRITE, 7), (WRITE, 7),
                                             (READ, 0, 1), (DEATH, 1, 1), (TICK,), (ATTACH, 1), (WRITE, 3)))
# the same without eviction: the tick names rank 1; a replacement claims it and clears its bit (C2)
write("ownership", "replace_dead_sleeper", ops(2, False, (ATTACH, 0), (ATTACH, 1), (WRITE, 7), (DEATH, 1, 1),
                                               (TICK,), (ATTACH, 1), (READ, 1, 1), (TICK,)))
# a reader killed asleep keeps its sleep bit (nothing of it runs: its object's detach must not clear a
# bit once the claim is not its own) until a replacement claims the rank
write("ownership", "dead_sleeper_keeps_its_bit", ops(2, False, (ATTACH, 0), (ATTACH, 1), (DEATH, 1, 1), (WRITE, 2),
                                                     (READ, 0), (ATTACH, 1), (READ, 1)))
# keep_place: detach, re-attach and resume; a clean detach without it leaves the rank for good
write("ownership", "keep_place_then_leave", ops(1, False, (ATTACH, 0, 1), (WRITE, 2), (READ, 0), (DETACH, 0),
                                                (ATTACH, 0), (READ, 0, 1), (DETACH, 0), (ATTACH, 0), (WRITE, 7)))
# the writer dies asleep for space; readers' ticks see it; a new writer claims the role
write("ownership", "writer_takeover", ops(3, True, (ATTACH, 0), (WRITE, 7), (WRITE, 7), (WRITE, 7),
                                          (WRITER_DEATH, 0, 1), (READER_TICK, 0), (WRITER_CLAIM,), (WRITE, 0),
                                          (READ, 0, 1), (WRITER_CLAIM,)))
print("seeds written under", os.path.join(HERE, "corpus"))
