//! Frames shared by the slow path's integration tests.

#![allow(dead_code)]

/// A 60-byte Ethernet + IPv4 + UDP frame (checksummed IPv4 header).
pub fn udp_frame(
    dst: [u8; 6],
    src: [u8; 6],
    ips: ([u8; 4], [u8; 4]),
    ports: (u16, u16),
) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&ips.0);
    ip[16..20].copy_from_slice(&ips.1);
    let c = flowpath_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&ports.0.to_be_bytes());
    f[36..38].copy_from_slice(&ports.1.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}
