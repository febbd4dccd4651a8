#!/usr/bin/env python3
"""Bidirectional conntrack workloads from the OVS-DPDK anchor's flows pcaps.

Usage: tools/ct-pcap.py [--tcp] IN.parts OUT_PREFIX

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

--tcp: each UDP frame becomes a TCP segment of the same flow and length
(ACK+PSH carrying the rest of the frame as payload, one sequence number
per flow direction, every replay a retransmission of it), its mirror the
peer's acknowledgement of that payload (ACK, no payload, padded to the
same length). No handshake: both
trackers pick such a connection up from its first segment (OVS creates a
connection from any segment but a SYN+ACK) and call it established once
the other side has answered; the checksums are valid (OVS verifies them
on ports without checksum offload).
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


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


SEQ_FWD, SEQ_REV = 0x10000000, 0x20000000


def to_tcp(frame):
    """The UDP frame as a TCP ACK+PSH segment of the same flow and length
    (a frame too short for a TCP header, or not IPv4/UDP, as it is)."""
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[23] != 17:
        return frame
    payload = frame[54:]
    ip = bytearray(frame[14:34])
    ip[2:4] = struct.pack("!H", 20 + 20 + len(payload))
    ip[9] = 6
    ip[10:12] = b"\0\0"
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    ports = frame[34:38]
    tcp = bytearray(ports + struct.pack("!IIBBHHH", SEQ_FWD, SEQ_REV, 5 << 4, 0x18, 65535, 0, 0))
    pseudo = bytes(ip[12:20]) + struct.pack("!BBH", 0, 6, 20 + len(payload))
    tcp[16:18] = struct.pack("!H", csum(pseudo + bytes(tcp) + payload))
    return frame[:14] + bytes(ip) + bytes(tcp) + payload


def tcp_reply(seg):
    """The acknowledgement of TCP segment `seg`: its mirror without
    payload (flags ACK, seq and ack swapped, the ack covering the
    segment's payload), padded to the segment's length."""
    b = bytearray(mirror(seg)[:54])
    n = len(seg) - 54
    b[16:18] = struct.pack("!H", 40)
    b[24:26] = b"\0\0"
    b[24:26] = struct.pack("!H", csum(bytes(b[14:34])))
    b[38:42] = struct.pack("!I", SEQ_REV)
    b[42:46] = struct.pack("!I", SEQ_FWD + n)
    b[47] = 0x10
    b[50:52] = b"\0\0"
    pseudo = bytes(b[26:34]) + struct.pack("!BBH", 0, 6, 20)
    b[50:52] = struct.pack("!H", csum(pseudo + bytes(b[34:54])))
    return bytes(b) + bytes(n)


def main():
    args = sys.argv[1:]
    tcp = "--tcp" in args
    args = [a for a in args if a != "--tcp"]
    if len(args) != 2:
        sys.exit(__doc__)
    parts_file, prefix = args
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
                if tcp:
                    seg = to_tcp(data)
                    fo.write(rec + seg)
                    ro.write(rec + (tcp_reply(seg) if seg is not data else mirror(data)))
                else:
                    fo.write(rec + data)
                    ro.write(rec + mirror(data))
        listing += [os.path.relpath(fwd, out_dir), os.path.relpath(rev, out_dir)]
    with open(f"{prefix}.parts", "w") as f:
        f.write("\n".join(listing) + "\n")


if __name__ == "__main__":
    main()
