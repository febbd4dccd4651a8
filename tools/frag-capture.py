#!/usr/bin/env python3
"""Writes a capture of IP fragments for the fragment-handling replay test.

  tools/frag-capture.py OUT.pcap

Frames (all from 00:00:00:00:00:01 to 00:00:00:00:00:02, as received on
one port): TCP segments to ports 8080 and 80 and UDP datagrams to ports 53
and 5000, each whole and cut into a first and one or two later fragments;
an ICMP echo request in two fragments; an IPv6 UDP datagram to port 53 in
two fragments (fragment header); fragments arriving out of order. Checksums
are right. Deterministic: the same file every run.
"""
import struct, sys

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff

SRC, DST = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
ETH = bytes.fromhex("000000000002" "000000000001")

def l4(proto, sport, dport, payload, src=SRC, dst=DST, v6=False):
    if proto == 6:
        h = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x18, 8192, 0, 0)
    elif proto == 17:
        h = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    else:  # ICMP echo request
        h = struct.pack("!BBHHH", 8, 0, 0, 7, 1)
    seg = h + payload
    if proto == 1:
        c = csum(seg)
    elif v6:
        c = csum(src + dst + struct.pack("!IxxxB", len(seg), proto) + seg)
    else:
        c = csum(src + dst + struct.pack("!xBH", proto, len(seg)) + seg)
    off = {6: 16, 17: 6, 1: 2}[proto]
    return seg[:off] + struct.pack("!H", c) + seg[off + 2:]

def ipv4(proto, ident, frag_off8, more, data):
    flags = (0x2000 if more else 0) | frag_off8
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(data), ident, flags, 64, proto, 0, SRC, DST)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return ETH + b"\x08\x00" + h + data

def fragments(proto, ident, seg, cuts):
    """seg cut at the byte offsets `cuts` (multiples of 8)."""
    out, edges = [], [0] + cuts + [len(seg)]
    for a, b in zip(edges, edges[1:]):
        out.append(ipv4(proto, ident, a // 8, b < len(seg), seg[a:b]))
    return out

V6S = bytes.fromhex("fe800000000000000000000000000001")
V6D = bytes.fromhex("fe800000000000000000000000000002")

def ipv6_frags(seg, ident, cut):
    out = []
    for a, b in ((0, cut), (cut, len(seg))):
        fh = struct.pack("!BBHI", 17, 0, (a // 8) << 3 | (1 if b < len(seg) else 0), ident)
        body = fh + seg[a:b]
        h = struct.pack("!IHBB16s16s", 6 << 28, len(body), 44, 64, V6S, V6D)
        out.append(ETH + b"\x86\xdd" + h + body)
    return out

frames = []
pay = bytes(range(256)) * 2
for ident, (proto, dport) in enumerate([(6, 8080), (6, 80), (17, 53), (17, 5000)], 1):
    seg = l4(proto, 40000 + ident, dport, pay[:120])
    frames.append(ipv4(proto, 100 + ident, 0, False, seg))          # whole
    frames += fragments(proto, 200 + ident, seg, [48, 96])           # first + 2 later
frames += fragments(1, 300, l4(1, 0, 0, pay[:64]), [32])            # ICMP in two
late = fragments(17, 301, l4(17, 1234, 53, pay[:80]), [40])
frames += [late[1], late[0]]                                         # out of order
frames += ipv6_frags(l4(17, 1235, 53, pay[:80], V6S, V6D, v6=True), 7, 40)

with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i, fr in enumerate(frames):
        f.write(struct.pack("<IIII", 1700000000, i, len(fr), len(fr)) + fr)
print("%d frames" % len(frames))
