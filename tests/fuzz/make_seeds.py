#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (committed; rerun only when the formats change).

corpus/segment_image: see fuzz_segment_image.cpp (shape byte, readers byte, 2 bytes, XOR overlay).
corpus/record: see fuzz_record.cpp (u64 head, u16 published bytes, flags byte, ring bytes).
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
    return struct.pack("<IIQ", len(payload), kind, tag) + payload + b"\0" * (align(len(payload)) - len(payload))


def ring_input(head, records, closed=False, extra_published=0):
    body = b"".join(records)
    return struct.pack("<QHB", head, min(len(body) + extra_published, 0xFFFF), 1 if closed else 0) + body


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
write("record", "unpublished_tail", ring_input(0, [record(MESSAGE, pay)], extra_published=-16))
print("seeds written under", os.path.join(HERE, "corpus"))
