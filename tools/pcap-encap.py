#!/usr/bin/env python3
"""pcap-encap.py IN.pcap OUT.pcap [--kind vxlan|geneve|gre] [--vni N]
[--src IP] [--dst IP] [--smac MAC] [--dmac MAC]

Wraps every frame of a classic pcap in outer Ethernet/IPv4/UDP/VXLAN
(or Geneve, or GRE) headers, as a tunnel endpoint `src` sending to `dst`
would (UDP source port from the inner frame's bytes, as a hash would
spread them; no UDP checksum; IPv4 header checksum computed): the
decapsulation workload of tools/tunnel-bench.sh. Standard library only.
"""
import argparse
import struct
import zlib


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip(s):
    return bytes(int(x) for x in s.split("."))


def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def outer(a, inner):
    if a.kind == "gre":
        l4 = struct.pack("!HHI", 0x2000, 0x6558, a.vni)
        proto = 47
    else:
        if a.kind == "vxlan":
            t = struct.pack("!II", 0x08000000, a.vni << 8)
            port = 4789
        else:
            t = struct.pack("!BBHI", 0, 0, 0x6558, a.vni << 8)
            port = 6081
        sport = 32768 + zlib.crc32(inner[:64]) % 28232
        l4 = struct.pack("!HHHH", sport, port, 8 + len(t) + len(inner), 0) + t
        proto = 17
    tot = 20 + len(l4) + len(inner)
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, tot, 0, 0x4000, 64, proto, 0, ip(a.src), ip(a.dst))
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    return mac(a.dmac) + mac(a.smac) + b"\x08\x00" + iph + l4 + inner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--kind", default="vxlan", choices=["vxlan", "geneve", "gre"])
    ap.add_argument("--vni", type=int, default=5)
    ap.add_argument("--src", default="10.99.0.2")
    ap.add_argument("--dst", default="10.99.0.1")
    ap.add_argument("--smac", default="02:99:00:00:00:02")
    ap.add_argument("--dmac", default="02:99:00:00:00:01")
    a = ap.parse_args()
    with open(a.inp, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    out = bytearray(data[:24])
    # The snap length must hold the bigger frames.
    out[16:20] = struct.pack(endian + "I", 262144)
    off = 24
    while off + 16 <= len(data):
        ts, tu, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        f = outer(a, frame)
        out += struct.pack(endian + "IIII", ts, tu, len(f), len(f)) + f
    with open(a.out, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
