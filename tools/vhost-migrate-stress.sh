#!/usr/bin/env bash
# vhost-migrate-stress.sh FLOWPATH_BIN [N] - live migration under receive
# load, flowpath's vhost-user ports against DPDK's own vhost-user backend.
#
# A Linux guest (Debian's kernel unpacked where .ci/run puts it,
# FLOWPATH_VM_KERNEL or /var/cache/flowpath-vm; a busybox initramfs made
# here) loops dd + md5sum over a 16 MB file while frames pour into it;
# QEMU migrates it from one vhost-user socket to another (both served by
# the same backend) and the destination's console is watched for 20 s
# for a kernel BUG, oops or panic. Backends, N runs each, alternating:
#   fp:   flowpath switch, a looped capture on port 1 -> ports 4 and 5
#         (vhost-user server sockets src.sock and dst.sock);
#   dpdk: dpdk-testpmd with net_vhost0/net_vhost1 on the same sockets,
#         txonly towards the guest's MAC.
# BACKENDS="fp dpdk" (the default) picks them; FLOOD=0 runs flowpath
# without the flood (the guest busy on its own, its rings idle), FLOOD=src
# or dst floods only the source or only the destination port (testpmd:
# forwards on that port only). Prints one line per run
# (for flowpath also how many rings resumed from a used index that
# disagreed with their base) and the counts. Needs root, qemu-system-x86_64,
# busybox-static, dpdk-testpmd, python3. QEMU runs under TCG.
set -u
FP=${1:?usage: vhost-migrate-stress.sh FLOWPATH_BIN [N]}; N=${2:-5}; BACKENDS=${BACKENDS:-fp dpdk}; FLOOD=${FLOOD:-1}
KDIR=${FLOWPATH_VM_KERNEL:-/var/cache/flowpath-vm}
B=$(mktemp -d /tmp/vms.XXXX)
K=$(ls $KDIR/boot/vmlinuz-* | head -1); V=${K##*vmlinuz-}
python3 - "$KDIR" "$V" "$B/initrd.cpio" <<'PY'
import os, sys
kdir, ver, out_path = sys.argv[1:]
mods = ["drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko",
        "drivers/virtio/virtio_pci_modern_dev.ko", "drivers/virtio/virtio_pci_legacy_dev.ko",
        "drivers/virtio/virtio_pci.ko", "net/core/failover.ko",
        "drivers/net/net_failover.ko", "drivers/net/virtio_net.ko"]
init = r'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; do insmod /lib/$m.ko; done
ip link set lo up; ip link set eth0 up; ip addr add 10.77.0.4/24 dev eth0
i=0
while true; do i=$((i+1)); dd if=/dev/urandom of=/tmp/blob bs=1M count=16 2>/dev/null; echo "VM: LOOP $i $(md5sum /tmp/blob | cut -c1-8) $(cat /sys/class/net/eth0/statistics/rx_packets)"; rm /tmp/blob; done
'''
out = bytearray(); ino = [1]
def ent(name, mode, data=b'', rdev=(0, 0)):
    f = [ino[0], mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    ino[0] += 1
    out.extend(b'070701' + b''.join(b'%08x' % x for x in f) + name.encode() + b'\0')
    while len(out) % 4: out.append(0)
    out.extend(data)
    while len(out) % 4: out.append(0)
for d in ["bin", "dev", "lib", "proc", "sys", "tmp"]: ent(d, 0o40755)
ent("dev/console", 0o20600, rdev=(5, 1))
ent("init", 0o100755, init.encode())
ent("bin/busybox", 0o100755, open('/bin/busybox', 'rb').read())
for m in mods:
    ent("lib/" + os.path.basename(m), 0o100644, open(f"{kdir}/lib/modules/{ver}/kernel/{m}", 'rb').read())
ent("TRAILER!!!", 0)
open(out_path, 'wb').write(out)
PY
# One command on a QEMU monitor socket; what it printed.
hmp() { python3 - "$1" "$2" <<'PY' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
def prompt():
    b = b''
    while not b.endswith(b'(qemu) '):
        d = s.recv(4096)
        if not d: break
        b += d
    return b.decode(errors='replace')
prompt(); s.sendall((sys.argv[2] + '\n').encode()); print(prompt())
PY
}
"$FP" gen flows --flows 100 -o $B/udp.pcap --rules-out /dev/null >/dev/null 2>&1
case "$FLOOD" in
  src) printf 'in_port=1,actions=output:4\n' ;;
  dst) printf 'in_port=1,actions=output:5\n' ;;
  *) printf 'in_port=1,actions=output:4,output:5\n' ;;
esac > $B/r.flows
Q=(qemu-system-x86_64 -accel tcg -cpu max -m 256 -smp 1 -nographic -no-reboot -kernel "$K"
   -initrd $B/initrd.cpio -append "console=ttyS0 quiet panic=-1"
   -object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem
   -netdev vhost-user,id=n,chardev=c -device virtio-net-pci,netdev=n,mac=52:54:00:77:00:04,vectors=0)
declare -A crashed stalled runs
one() {  # one BACKEND RUN
  local be=$1 n=$2 bpid s d st
  rm -f $B/src.sock $B/dst.sock $B/*.mon
  if [ "$be" = fp ]; then
    local flood=(--port 1=pcap:$B/udp.pcap,loop); [ "$FLOOD" = 0 ] && flood=()
    "$FP" switch --rules $B/r.flows "${flood[@]}" --port 4=vhost-user:$B/src.sock \
      --port 5=vhost-user:$B/dst.sock --ctl $B/fp.ctl > $B/be.log 2>&1 & bpid=$!
  else
    rm -f $B/be.in; mkfifo $B/be.in
    local pm=""; case "$FLOOD" in src) pm=--portmask=0x1 ;; dst) pm=--portmask=0x2 ;; esac
    dpdk-testpmd -l 0-1 --no-huge -m 1024 --no-pci --file-prefix=vms$$ --vdev net_vhost0,iface=$B/src.sock \
      --vdev net_vhost1,iface=$B/dst.sock -- --no-numa --forward-mode=txonly --eth-peer=0,52:54:00:77:00:04 \
      --eth-peer=1,52:54:00:77:00:04 $pm --auto-start < $B/be.in > $B/be.log 2>&1 & bpid=$!
    exec 8>$B/be.in
  fi
  for _ in $(seq 50); do [ -S $B/src.sock ] && [ -S $B/dst.sock ] && break; sleep 0.2; done
  "${Q[@]}" -chardev socket,id=c,path=$B/src.sock -monitor unix:$B/src.mon,server=on,wait=off > $B/src.log 2>&1 & s=$!
  "${Q[@]}" -chardev socket,id=c,path=$B/dst.sock -monitor unix:$B/dst.mon,server=on,wait=off \
    -incoming tcp:127.0.0.1:$((44550 + n)) > $B/dst.log 2>&1 & d=$!
  for _ in $(seq 120); do grep -q "VM: LOOP 2 " $B/src.log && break; sleep 0.5; done
  hmp $B/src.mon "migrate_set_parameter max-bandwidth 1g" >/dev/null
  hmp $B/src.mon "migrate -d tcp:127.0.0.1:$((44550 + n))" >/dev/null
  st=""
  for _ in $(seq 120); do st=$(hmp $B/src.mon "info migrate" | grep -o "Migration status: [a-z]*")
    case "$st" in *completed*|*failed*) break;; esac; sleep 0.5; done
  sleep 20
  local bug; bug=$(grep -ac 'BUG\|corruption\|Oops\|general protection\|Kernel panic' $B/dst.log)
  echo "$be run $n: ${st:-no status}; loops on the destination $(grep -ac 'VM: LOOP' $B/dst.log), crash lines $bug$(
    [ "$be" = fp ] && echo ", rings resumed from the used index $(grep -ac 'disagrees with the base' $B/be.log)")"
  [ "$bug" -gt 0 ] && { crashed[$be]=$(( ${crashed[$be]:-0} + 1 )); cp $B/dst.log $B/dst-$be-$n.log; }
  # A destination that printed no loop at all did not run on (kept too).
  [ "$bug" -eq 0 ] && ! grep -aq 'VM: LOOP' $B/dst.log && { stalled[$be]=$(( ${stalled[$be]:-0} + 1 )); cp $B/dst.log $B/dst-$be-$n.log; }
  runs[$be]=$(( ${runs[$be]:-0} + 1 ))
  kill $s $d 2>/dev/null; wait $s $d 2>/dev/null
  if [ "$be" = fp ]; then kill -INT $bpid; else exec 8>&-; sleep 1; kill $bpid 2>/dev/null; fi
  wait $bpid 2>/dev/null
}
for n in $(seq "$N"); do for be in $BACKENDS; do one $be "$n"; done; done
for be in $BACKENDS; do echo "$be: ${crashed[$be]:-0} of ${runs[$be]:-0} runs crashed the destination guest, ${stalled[$be]:-0} stalled it"; done
if [ -n "$(ls $B/dst-*.log 2>/dev/null)" ]; then echo "consoles of the crashed and stalled runs: $B/dst-*.log"; else rm -rf "$B"; fi
