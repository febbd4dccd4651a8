//! Port and table configuration: `PORT_MOD` and `TABLE_MOD` decoded,
//! `PORT_STATUS` and the OpenFlow 1.4+ table description encoded.

use super::{encode::put_port_desc, PortInfo};
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::{self, MsgType, OFP10, OFP14};
use crate::port;

/// The port configuration bits OpenFlow 1.0 defines (`OFPPC10_ALL`).
pub const PC10_ALL: u32 = 0x7f;
/// The port configuration bits OpenFlow 1.1+ defines (`OFPPC11_ALL`:
/// `PORT_DOWN`, `NO_RECV`, `NO_FWD`, `NO_PACKET_IN`).
pub const PC11_ALL: u32 = 0x65;
/// `OFPPC_PORT_DOWN`.
pub const PC_PORT_DOWN: u32 = 1;

/// `OFPTC14_EVICTION`.
const TC14_EVICTION: u32 = 4;
/// `OFPTC14_VACANCY_EVENTS`.
const TC14_VACANCY_EVENTS: u32 = 8;
/// `OFPTMPT14_EVICTION`.
const TMPT14_EVICTION: u16 = 2;
/// `OFPTMPT14_VACANCY`.
const TMPT14_VACANCY: u16 = 3;
/// The eviction flags Open vSwitch reports (`OTHER|IMPORTANCE|LIFETIME`).
const EVICTION_FLAGS: u32 = 7;

/// A decoded `PORT_MOD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortMod {
    /// The port (OpenFlow 1.0 numbering; LOCAL is 0xfffe).
    pub port: u32,
    /// The Ethernet address the sender believes the port has.
    pub hw_addr: [u8; 6],
    /// The new configuration bits under `mask` (OpenFlow 1.0 numbering).
    pub config: u32,
    /// Which configuration bits change.
    pub mask: u32,
}

/// A decoded `TABLE_MOD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMod {
    /// The table (0xff: every table).
    pub table: u8,
    /// Eviction on or off (OpenFlow 1.4+; None: unchanged).
    pub eviction: Option<bool>,
    /// Vacancy events: None unchanged, `Some(None)` off,
    /// `Some(Some((down, up)))` on with these thresholds (OpenFlow 1.4+).
    pub vacancy: Option<Option<(u8, u8)>>,
}

/// A table's configuration as the table description reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableConfig {
    /// Eviction on (a setting only: flowpath evicts nothing).
    pub eviction: bool,
    /// Vacancy events on, with their down and up thresholds (percent).
    pub vacancy: Option<(u8, u8)>,
}

impl TableConfig {
    /// Applies what `tm` changes.
    pub fn apply(&mut self, tm: &TableMod) {
        if let Some(e) = tm.eviction {
            self.eviction = e;
        }
        if let Some(v) = tm.vacancy {
            self.vacancy = v;
        }
    }
}

/// Decodes a `PORT_MOD` body (after the header), as Open vSwitch: the
/// configuration bits the version defines, `config` only under `mask`;
/// OpenFlow 1.4+ properties: Ethernet (advertisements, ignored) only.
pub fn decode_port_mod(r: &mut Reader<'_>, version: u8) -> Result<PortMod, OfError> {
    let (port, hw_addr, all) = if version == OFP10 {
        let p = u32::from(r.u16()?);
        (p, mac(r)?, PC10_ALL)
    } else {
        let p = r.u32()?;
        r.skip(4)?;
        let hw = mac(r)?;
        r.skip(2)?;
        (port::from_of11(p).ok_or(BRC_BAD_PORT)?, hw, PC11_ALL)
    };
    let config = r.u32()? & all;
    let mask = r.u32()? & all;
    if version < OFP14 {
        // advertise, pad.
        r.skip(8).map_err(|_| BRC_BAD_LEN_E)?;
        if r.remaining() != 0 {
            return Err(BRC_BAD_LEN_E);
        }
    } else {
        while r.remaining() > 0 {
            let (ptype, body) = pull_prop(r)?;
            match ptype {
                0 if body.len() == 4 => {}
                0 => return Err(BPC_BAD_LEN),
                _ => return Err(BPC_BAD_TYPE),
            }
        }
    }
    Ok(PortMod {
        port,
        hw_addr,
        config: config & mask,
        mask,
    })
}

fn mac(r: &mut Reader<'_>) -> Result<[u8; 6], OfError> {
    let b = r.bytes(6)?;
    let mut m = [0u8; 6];
    m.copy_from_slice(b);
    Ok(m)
}

/// One property (type, body without padding).
fn pull_prop<'a>(r: &mut Reader<'a>) -> Result<(u16, &'a [u8]), OfError> {
    let t = r.u16().map_err(|_| BPC_BAD_LEN)?;
    let len = usize::from(r.u16().map_err(|_| BPC_BAD_LEN)?);
    if len < 4 {
        return Err(BPC_BAD_LEN);
    }
    let body = r.bytes(len - 4).map_err(|_| BPC_BAD_LEN)?;
    let pad = len.next_multiple_of(8) - len;
    r.skip(pad.min(r.remaining())).map_err(|_| BPC_BAD_LEN)?;
    Ok((t, body))
}

/// Decodes a `TABLE_MOD` body (OpenFlow 1.1+), as Open vSwitch: in 1.1-1.3
/// the configuration is the table-miss behaviour (nothing changes); 1.4+
/// turns eviction and vacancy events on or off with its bits, and takes
/// the eviction and vacancy properties.
pub fn decode_table_mod(r: &mut Reader<'_>, version: u8) -> Result<TableMod, OfError> {
    let table = r.u8()?;
    r.skip(3)?;
    let config = r.u32()?;
    let mut tm = TableMod {
        table,
        eviction: None,
        vacancy: None,
    };
    if version < OFP14 {
        if r.remaining() != 0 {
            return Err(BRC_BAD_LEN_E);
        }
        return Ok(tm);
    }
    tm.eviction = Some(config & TC14_EVICTION != 0);
    let vacancy_on = config & TC14_VACANCY_EVENTS != 0;
    let mut thresholds = (0u8, 0u8);
    while r.remaining() > 0 {
        let (ptype, body) = pull_prop(r)?;
        match ptype {
            TMPT14_EVICTION => {
                let Some(b) = body.get(..4).filter(|_| body.len() == 4) else {
                    return Err(BPC_BAD_LEN);
                };
                // As Open vSwitch 3.1 reads it: the property's value
                // replaces the eviction setting (1 on, 2 off, anything
                // else, such as the eviction flags `ovs-ofctl` sends,
                // leaves it as it is).
                tm.eviction = match u32::from_be_bytes([b[0], b[1], b[2], b[3]]) {
                    1 => Some(true),
                    2 => Some(false),
                    _ => None,
                };
            }
            TMPT14_VACANCY => {
                if body.len() != 4 {
                    return Err(BPC_BAD_LEN);
                }
                let (down, up, vacancy) = (body[0], body[1], body[2]);
                if down > up || up > 100 || vacancy != 0 {
                    return Err(BPC_BAD_VALUE);
                }
                thresholds = (down, up);
            }
            _ => return Err(BRC_BAD_TYPE),
        }
    }
    tm.vacancy = Some(vacancy_on.then_some(thresholds));
    Ok(tm)
}

/// `PORT_STATUS` with reason `reason` (2: MODIFY) for `p`.
pub fn encode_port_status(version: u8, reason: u8, p: &PortInfo) -> Vec<u8> {
    let mut w = header::start(version, MsgType::PortStatus, 0);
    w.u8(reason);
    w.zeros(7);
    put_port_desc(&mut w, version, p);
    header::finish(w)
}

/// One table's entry of an OpenFlow 1.4+ table description reply: the
/// eviction flags always, the vacancy thresholds while vacancy events
/// are on, with the table's `vacancy` (percent free).
pub fn table_desc_entry(table: u8, c: &TableConfig, vacancy: u8) -> Vec<u8> {
    let mut w = Writer::new();
    let len: u16 = if c.vacancy.is_some() { 24 } else { 16 };
    w.u16(len);
    w.u8(table);
    w.u8(0);
    let mut config = 0;
    if c.eviction {
        config |= TC14_EVICTION;
    }
    if c.vacancy.is_some() {
        config |= TC14_VACANCY_EVENTS;
    }
    w.u32(config);
    w.u16(TMPT14_EVICTION);
    w.u16(8);
    w.u32(EVICTION_FLAGS);
    if let Some((down, up)) = c.vacancy {
        w.u16(TMPT14_VACANCY);
        w.u16(8);
        w.u8(down);
        w.u8(up);
        w.u8(vacancy);
        w.u8(0);
    }
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm10(port: u16, config: u32, mask: u32) -> Vec<u8> {
        let mut v = port.to_be_bytes().to_vec();
        v.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        v.extend_from_slice(&config.to_be_bytes());
        v.extend_from_slice(&mask.to_be_bytes());
        v.extend_from_slice(&[0; 8]);
        v
    }

    #[test]
    fn port_mod_of10_keeps_only_masked_of10_bits() {
        let b = pm10(1, 0xffff_ffff, 0x11);
        let pm = decode_port_mod(&mut Reader::new(&b), OFP10).unwrap();
        assert_eq!(pm.port, 1);
        assert_eq!(pm.hw_addr, [2, 0, 0, 0, 0, 1]);
        assert_eq!((pm.config, pm.mask), (0x11, 0x11));
        // Too short or too long: a length error.
        assert!(decode_port_mod(&mut Reader::new(&b[..b.len() - 1]), OFP10).is_err());
        let mut long = b.clone();
        long.push(0);
        assert_eq!(
            decode_port_mod(&mut Reader::new(&long), OFP10),
            Err(BRC_BAD_LEN_E)
        );
    }

    #[test]
    fn port_mod_of14_drops_no_flood_and_checks_properties() {
        let mut b = 1u32.to_be_bytes().to_vec();
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
        b.extend_from_slice(&0x7fu32.to_be_bytes());
        b.extend_from_slice(&0x7fu32.to_be_bytes());
        let pm = decode_port_mod(&mut Reader::new(&b), OFP14).unwrap();
        assert_eq!((pm.config, pm.mask), (PC11_ALL, PC11_ALL));
        let mut eth = b.clone();
        eth.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0]);
        assert!(decode_port_mod(&mut Reader::new(&eth), OFP14).is_ok());
        let mut unknown = b.clone();
        unknown.extend_from_slice(&[0, 9, 0, 8, 0, 0, 0, 0]);
        assert_eq!(
            decode_port_mod(&mut Reader::new(&unknown), OFP14),
            Err(BPC_BAD_TYPE)
        );
        let mut short = b;
        short.extend_from_slice(&[0, 0, 0, 2]);
        assert_eq!(
            decode_port_mod(&mut Reader::new(&short), OFP14),
            Err(BPC_BAD_LEN)
        );
    }

    #[test]
    fn truncated_and_corrupted_port_and_table_mods_are_errors_not_panics() {
        use crate::header::{OFP13, OFP15};
        let mut msgs = Vec::new();
        for (v, t) in [(OFP10, 15u8), (OFP13, 16), (OFP14, 16), (OFP15, 16)] {
            let mut body = if v == OFP10 {
                pm10(1, 1, 1)
            } else {
                let mut b = 1u32.to_be_bytes().to_vec();
                b.extend_from_slice(&[0; 4]);
                b.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
                b.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0]);
                b
            };
            msgs.push((v, t, body.clone()));
            if v != OFP10 {
                body = vec![1, 0, 0, 0, 0, 0, 0, 12];
                if v >= OFP14 {
                    body.extend_from_slice(&[0, 3, 0, 8, 1, 2, 0, 0, 0, 2, 0, 8, 0, 0, 0, 7]);
                }
                msgs.push((v, 17, body));
            }
        }
        for (v, t, body) in msgs {
            let mut m = vec![v, t, 0, 0, 0, 0, 0, 1];
            m.extend_from_slice(&body);
            let n = m.len() as u16;
            m[2..4].copy_from_slice(&n.to_be_bytes());
            assert!(
                crate::msg::decode(&m, Default::default()).is_ok(),
                "{v} {t}"
            );
            for cut in 8..m.len() {
                let mut c = m[..cut].to_vec();
                c[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
                let _ = crate::msg::decode(&c, Default::default());
            }
            for i in 8..m.len() {
                for x in [0u8, 0x7f, 0xff] {
                    let mut c = m.clone();
                    c[i] = x;
                    let _ = crate::msg::decode(&c, Default::default());
                }
            }
        }
    }

    #[test]
    fn table_mod_of14_vacancy_and_eviction() {
        let mut b = vec![3, 0, 0, 0];
        b.extend_from_slice(&(TC14_VACANCY_EVENTS).to_be_bytes());
        b.extend_from_slice(&[0, 3, 0, 8, 10, 90, 0, 0]);
        let tm = decode_table_mod(&mut Reader::new(&b), OFP14).unwrap();
        assert_eq!(tm.table, 3);
        assert_eq!(tm.eviction, Some(false));
        assert_eq!(tm.vacancy, Some(Some((10, 90))));
        // An eviction property with the flags leaves eviction as it is.
        let mut flags = b.clone();
        flags[7] |= TC14_EVICTION as u8;
        flags.extend_from_slice(&[0, 2, 0, 8, 0, 0, 0, 7]);
        let tm = decode_table_mod(&mut Reader::new(&flags), OFP14).unwrap();
        assert_eq!(tm.eviction, None);
        let mut bad = b.clone();
        bad[12] = 95;
        assert_eq!(
            decode_table_mod(&mut Reader::new(&bad), OFP14),
            Err(BPC_BAD_VALUE)
        );
        // OpenFlow 1.3: nothing changes.
        let tm = decode_table_mod(&mut Reader::new(&b[..8]), crate::header::OFP13).unwrap();
        assert_eq!((tm.eviction, tm.vacancy), (None, None));
        let mut c = TableConfig::default();
        c.apply(&decode_table_mod(&mut Reader::new(&b), OFP14).unwrap());
        assert_eq!(table_desc_entry(3, &c, 100).len(), 24);
    }
}
