//! The Geneve option map of a bridge (`add-tlv-map`, OpenFlow's
//! `NXT_TLV_TABLE_MOD`): which option each of `tun_metadata0..7` names.
//! Every bridge has one, with tunnels or without (as Open vSwitch, whose
//! map belongs to the switch, not to its tunnel ports); a bridge's
//! [`crate::tunnel::Tunnels`] and its rule set share it.

use crate::tunnel::{parse_tlv_map, TlvModError};
use flowpath_wire::tunnel::{TlvEntry, TlvMap, TLV_FIELDS};
use std::sync::RwLock;

/// A bridge's Geneve option map, changed by the control threads.
#[derive(Debug, Default)]
pub struct TlvTable {
    map: RwLock<TlvMap>,
}

impl TlvTable {
    /// The map.
    pub fn get(&self) -> TlvMap {
        *self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `{class=C,type=T,len=L}->tun_metadataN` mappings, as `ovs-ofctl
    /// add-tlv-map` (all or none: a field or option already mapped
    /// otherwise is an error, as OVS's `NXTTMFC_ALREADY_MAPPED`).
    pub fn add(&self, spec: &str) -> Result<(), String> {
        let adds = parse_tlv_map(spec)?;
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let mut next = *map;
        for (i, e) in adds {
            let other = next
                .iter()
                .position(|x| x.len != 0 && x.class == e.class && x.typ == e.typ);
            if (next[i].len != 0 && next[i] != e) || other.is_some_and(|o| o != i) {
                return Err(format!(
                    "{spec}: tun_metadata{i} or option {{class={:#x},type={:#x}}} is already mapped",
                    e.class, e.typ
                ));
            }
            next[i] = e;
        }
        *map = next;
        Ok(())
    }

    /// Applies an OpenFlow TLV table change (`NXT_TLV_TABLE_MOD`): command
    /// 0 adds, 1 deletes, 2 clears `(class, type, len, index)` mappings,
    /// with Open vSwitch's checks (all or nothing); `in_use` (bit N:
    /// `tun_metadataN`, [`crate::tunnel::tlv_fields_used`]) are the mappings flows or
    /// groups use, which are not deleted.
    pub fn modify(
        &self,
        command: u16,
        maps: &[(u16, u8, u8, u16)],
        in_use: u8,
    ) -> Result<(), TlvModError> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let mut next = *map;
        match command {
            0 => {
                for &(class, typ, len, index) in maps {
                    let i = usize::from(index);
                    if i >= TLV_FIELDS {
                        return Err(TlvModError::BadFieldIdx);
                    }
                    if len == 0 || len % 4 != 0 || len > 8 {
                        return Err(TlvModError::BadOptLen);
                    }
                    let e = TlvEntry { class, typ, len };
                    if next[i].len != 0 && next[i] != e {
                        return Err(TlvModError::AlreadyMapped);
                    }
                    if next
                        .iter()
                        .enumerate()
                        .any(|(j, x)| j != i && x.len != 0 && x.class == class && x.typ == typ)
                    {
                        return Err(TlvModError::DupEntry);
                    }
                    next[i] = e;
                }
            }
            1 => {
                for &(_, _, _, index) in maps {
                    let i = usize::from(index);
                    if i >= TLV_FIELDS {
                        return Err(TlvModError::BadFieldIdx);
                    }
                    if next[i].len != 0 && in_use >> i & 1 != 0 {
                        return Err(TlvModError::InvalidTlvDel);
                    }
                    next[i] = TlvEntry::default();
                }
            }
            2 => {
                if (0..TLV_FIELDS).any(|i| next[i].len != 0 && in_use >> i & 1 != 0) {
                    return Err(TlvModError::InvalidTlvDel);
                }
                next = TlvMap::default();
            }
            _ => return Err(TlvModError::BadCommand),
        }
        *map = next;
        Ok(())
    }

    /// The mappings as `(class, type, len, index)`, by index.
    pub fn mappings(&self) -> Vec<(u16, u8, u8, u16)> {
        self.get()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.len != 0)
            .map(|(i, e)| (e.class, e.typ, e.len, i as u16))
            .collect()
    }

    /// Removes mappings (`del-tlv-map`; an empty spec: all of them), none
    /// when one of them is in `in_use` (see [`TlvTable::modify`]).
    pub fn del(&self, spec: &str, in_use: u8) -> Result<(), String> {
        let dels = if spec.trim().is_empty() {
            (0..TLV_FIELDS).map(|i| (i, TlvEntry::default())).collect()
        } else {
            parse_tlv_map(spec)?
        };
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some((i, _)) = dels
            .iter()
            .find(|(i, _)| map[*i].len != 0 && in_use >> i & 1 != 0)
        {
            return Err(format!(
                "tun_metadata{i} is used by flows or groups: delete them first \
                 (OpenFlow error NXTTMFC_INVALID_TLV_DEL)"
            ));
        }
        for (i, _) in dels {
            map[i] = TlvEntry::default();
        }
        Ok(())
    }
}
