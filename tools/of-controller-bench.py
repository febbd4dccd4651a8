#!/usr/bin/env python3
"""A trivial OpenFlow 1.3 controller loop against a switch's Unix socket
(flowpath's or Open vSwitch's `br0.mgmt`), for tools/openflow-bench.sh:

  flow_mods   N flow adds (distinct nw_src/nw_dst matches), pipelined in
              batches of 1,000 each followed by a barrier; flow_mods/s
              until the last barrier reply.
  packet_ins  N round trips: a PACKET_OUT with actions=CONTROLLER of a
              64-byte frame, then wait for its PACKET_IN; round trips/s.
              Also with 64 in flight.

  of-controller-bench.py SOCKET [N]
Prints one line per measurement: NAME VALUE.
"""
import socket, struct, sys, time

OFP13 = 4


def msg(t, xid, body=b""):
    return struct.pack(">BBHI", OFP13, t, 8 + len(body), xid) + body


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = b""
        self.s.sendall(msg(0, 1))  # HELLO
        self.recv()  # its HELLO

    def recv(self):
        while True:
            if len(self.buf) >= 8:
                n = struct.unpack(">H", self.buf[2:4])[0]
                if len(self.buf) >= n:
                    m, self.buf = self.buf[:n], self.buf[n:]
                    return m
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def until(self, t, xid=None):
        while True:
            m = self.recv()
            if m[1] == 1:
                raise RuntimeError(f"error from the switch: {m[:16].hex()}")
            if m[1] == t and (xid is None or struct.unpack(">I", m[4:8])[0] == xid):
                return m


def oxm_ipv4(src, dst):
    f = struct.pack(">IH", 0x80000A02, 0x0800)  # eth_type
    f += struct.pack(">II", 0x80001604, src)  # ipv4_src
    f += struct.pack(">II", 0x80001804, dst)  # ipv4_dst
    n = 4 + len(f)
    return struct.pack(">HH", 1, n) + f + b"\0" * ((n + 7) // 8 * 8 - n)


def output(port, max_len=0xffff):
    return struct.pack(">HHIH6x", 0, 16, port, max_len)


def flow_add(xid, i):
    m = oxm_ipv4(0x0A000000 | i, 0xAC100000 | (i & 0xffff))
    inst = struct.pack(">HH4x", 4, 8 + 16) + output(i % 4 + 1)  # apply_actions
    body = struct.pack(">QQBBHHHIIIHH", 0, 0, 0, 0, 0, 0, 100 + i % 1000,
                       0xffffffff, 0xffffffff, 0xffffffff, 0, 0)
    return msg(14, xid, body + m + inst)


def packet_out(xid, frame):
    acts = output(0xfffffffd)  # CONTROLLER
    body = struct.pack(">IIH6x", 0xffffffff, 1, len(acts)) + acts
    return msg(13, xid, body + frame)


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    c = Conn(path)
    # flow_mods/s
    batch = 1000
    msgs = []
    for b in range(0, n, batch):
        chunk = b"".join(flow_add(10 + i, i) for i in range(b, min(n, b + batch)))
        msgs.append((chunk, 1_000_000 + b))
    t0 = time.perf_counter()
    for chunk, bxid in msgs:
        c.s.sendall(chunk + msg(20, bxid))
        c.until(21, bxid)
    dt = time.perf_counter() - t0
    print(f"flow_mods_per_s {n / dt:.0f}")
    # Packet-in round trips (as a service connection: ask for packet-ins).
    c.s.sendall(msg(9, 2, struct.pack(">HH", 0, 0xffff)) + msg(20, 3))
    c.until(21, 3)
    frame = bytes.fromhex("ffffffffffff000000000001080045000028000000004011"
                          "0000c0a80001c0a800020035003500140000") + b"\0" * 10
    rounds = max(1000, n // 20)
    t0 = time.perf_counter()
    for i in range(rounds):
        c.s.sendall(packet_out(100 + i, frame))
        c.until(10)
    dt = time.perf_counter() - t0
    print(f"packet_in_round_trips_per_s {rounds / dt:.0f}")
    window = 64
    t0 = time.perf_counter()
    sent = got = 0
    while got < rounds:
        while sent < rounds and sent - got < window:
            c.s.sendall(packet_out(100 + sent, frame))
            sent += 1
        c.until(10)
        got += 1
    dt = time.perf_counter() - t0
    print(f"packet_in_round_trips_per_s_window64 {rounds / dt:.0f}")


if __name__ == "__main__":
    main()
