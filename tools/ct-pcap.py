#!/usr/bin/env python3
"""Bidirectional conntrack workloads from the OVS-DPDK anchor's flows pcaps.

Usage: tools/ct-pcap.py IN.parts OUT_PREFIX

For each capture IN.parts lists (Ethernet/IPv4/UDP frames, one direction),
writes the capture itself and its mirror image (MACs, addresses and ports
swapped: the replies of the same flows; the IPv4 and UDP checksums stay
valid, a swap does not change a ones'-complement sum) and OUT_PREFIX.parts
listing them interleaved (forward 0, reverse 0, forward 1, ...), so that the
harness's input ports 1, 11, 12, 13, ... carry both directions of every
flow and the tracker sees each connection's replies: after the first pass
over the flows every packet is an established connection's (OVS keeps UDP
"+new" until a reply is seen). Standard library only; `flowpath bench
--scenario ct` builds the same workload in memory.
"""
import os
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return head
            n = struct.unpack("<IIII", rec)[2]
            yield rec, f.read(n)


def mirror(frame):
    b = bytearray(frame)
    b[0:6], b[6:12] = frame[6:12], frame[0:6]
    if len(b) >= 38 and b[12:14] == b"\x08\x00" and b[14] >> 4 == 4:
        ihl = (b[14] & 15) * 4
        b[26:30], b[30:34] = frame[30:34], frame[26:30]
        l4 = 14 + ihl
        if b[23] in (6, 17) and len(b) >= l4 + 4:
            b[l4:l4 + 2], b[l4 + 2:l4 + 4] = frame[l4 + 2:l4 + 4], frame[l4:l4 + 2]
    return bytes(b)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    parts_file, prefix = sys.argv[1], sys.argv[2]
    base = os.path.dirname(os.path.abspath(parts_file))
    parts = [l.strip() for l in open(parts_file) if l.strip()]
    out_dir = os.path.dirname(os.path.abspath(prefix))
    listing = []
    for i, p in enumerate(parts):
        src = os.path.join(base, p)
        fwd = f"{prefix}-fwd{i}.pcap"
        rev = f"{prefix}-rev{i}.pcap"
        with open(src, "rb") as f:
            head = f.read(24)
        with open(fwd, "wb") as fo, open(rev, "wb") as ro:
            fo.write(head)
            ro.write(head)
            for rec, data in frames(src):
                fo.write(rec + data)
                ro.write(rec + mirror(data))
        listing += [os.path.relpath(fwd, out_dir), os.path.relpath(rev, out_dir)]
    with open(f"{prefix}.parts", "w") as f:
        f.write("\n".join(listing) + "\n")


if __name__ == "__main__":
    main()
