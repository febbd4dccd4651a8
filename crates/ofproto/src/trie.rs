//! Prefix tries for prefix tracking (OVS `Flow_Table:prefixes`) and port
//! tracking.
//!
//! A trie holds the prefixes (value, length) of the rules of one table on one
//! field (nw_dst, nw_src, ipv6_dst, ipv6_src), or of one subtable on the
//! transport ports. Looking a packet's value up answers two questions:
//!
//! - `plens`: at which prefix lengths some rule's prefix contains the packet
//!   (a subtable whose prefix length is not among them cannot match, so it
//!   can be skipped);
//! - `maskbits`: how many leading bits of the packet's value had to be
//!   examined to know that — the longest common prefix with any stored
//!   prefix, plus one more bit when some stored prefix continues past that
//!   point (that bit is what excludes it).
//!
//! Un-wildcarding only `maskbits` bits instead of the whole field is what
//! makes megaflows wide (e.g. the nmap scan collapses into 17 megaflows).
//!
//! Representation: an uncompressed binary trie in a `Vec` arena (node 0 is
//! the root), with a rule count per node. Values are `u128` with the field's
//! most significant bit at bit `nbits - 1`. Lookups walk at most `nbits`
//! nodes. Owned by one classifier; not shared between threads while mutated.

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    child: [u32; 2],
    n_rules: u32,
}

/// A binary prefix trie over `nbits`-bit values.
#[derive(Clone, Debug)]
pub struct Trie {
    nbits: u32,
    nodes: Vec<Node>,
}

/// The set of prefix lengths (1..=128) at which a lookup found rules.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Plens(pub u128);

impl Plens {
    /// Every length (used when the trie does not apply to a packet).
    pub const ALL: Plens = Plens(u128::MAX);

    /// True when rules exist at prefix length `len` (1..=128).
    pub fn contains(&self, len: u32) -> bool {
        (1..=128).contains(&len) && self.0 & (1u128 << (len - 1)) != 0
    }

    fn insert(&mut self, len: u32) {
        if (1..=128).contains(&len) {
            self.0 |= 1u128 << (len - 1);
        }
    }
}

impl Trie {
    /// An empty trie over `nbits`-bit values (1..=128).
    pub fn new(nbits: u32) -> Self {
        Trie {
            nbits,
            nodes: vec![Node {
                child: [NONE; 2],
                n_rules: 0,
            }],
        }
    }

    fn bit(&self, value: u128, i: u32) -> usize {
        ((value >> (self.nbits - 1 - i)) & 1) as usize
    }

    /// Adds a prefix of length `plen` (1..=nbits) of `value`.
    pub fn insert(&mut self, value: u128, plen: u32) {
        let mut node = 0usize;
        for i in 0..plen.min(self.nbits) {
            let b = self.bit(value, i);
            let next = self.nodes[node].child[b];
            node = if next == NONE {
                self.nodes.push(Node {
                    child: [NONE; 2],
                    n_rules: 0,
                });
                let idx = self.nodes.len() - 1;
                self.nodes[node].child[b] = idx as u32;
                idx
            } else {
                next as usize
            };
        }
        self.nodes[node].n_rules += 1;
    }

    /// Removes one occurrence of a prefix previously inserted. Nodes are
    /// kept (tables are rebuilt wholesale on rule changes).
    pub fn remove(&mut self, value: u128, plen: u32) {
        let mut node = 0usize;
        for i in 0..plen.min(self.nbits) {
            let next = self.nodes[node].child[self.bit(value, i)];
            if next == NONE {
                return;
            }
            node = next as usize;
        }
        self.nodes[node].n_rules = self.nodes[node].n_rules.saturating_sub(1);
    }

    /// True when the trie holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].n_rules == 0
    }

    /// Looks `value` up: returns (`maskbits`, `plens`), see the module doc.
    pub fn lookup(&self, value: u128) -> (u32, Plens) {
        let mut plens = Plens::default();
        let mut node = 0usize;
        let mut len = 0u32;
        loop {
            if len > 0 && self.nodes[node].n_rules > 0 {
                plens.insert(len);
            }
            if len >= self.nbits {
                return (self.nbits, plens);
            }
            let b = self.bit(value, len);
            let next = self.nodes[node].child[b];
            if next == NONE {
                let other = self.nodes[node].child[1 - b] != NONE;
                return (len + u32::from(other), plens);
            }
            node = next as usize;
            len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_port_prefix_gives_ovs_mask_lengths() {
        // tp_dst=90 as a 16-bit prefix: a packet differing first at bit k
        // needs k+1 bits examined; an equal one all 16.
        let mut t = Trie::new(16);
        t.insert(90, 16);
        assert_eq!(t.lookup(90), (16, Plens(1 << 15)));
        assert_eq!(t.lookup(0x8000).0, 1);
        assert_eq!(t.lookup(91).0, 16);
        assert_eq!(t.lookup(88).0, 15);
        assert!(!t.lookup(0x8000).1.contains(16));
    }

    #[test]
    fn empty_and_leaf_cases() {
        let t = Trie::new(32);
        assert_eq!(t.lookup(12345), (0, Plens(0)));
        let mut t = Trie::new(32);
        t.insert(0x0a00_0000, 8);
        // Inside 10/8: full match at 8, leaf → no extra bit.
        let (bits, plens) = t.lookup(0x0a01_0203);
        assert_eq!(bits, 8);
        assert!(plens.contains(8));
        // 11.x differs at bit 7 (0-based): 8 bits examined.
        assert_eq!(t.lookup(0x0b00_0000).0, 8);
        // 138.x differs at bit 0.
        assert_eq!(t.lookup(0x8a00_0000).0, 1);
    }

    #[test]
    fn nested_prefixes_report_all_lengths() {
        let mut t = Trie::new(32);
        t.insert(0x0a00_0000, 8);
        t.insert(0x0a01_0000, 16);
        let (bits, plens) = t.lookup(0x0a01_0505);
        assert_eq!(bits, 16);
        assert!(plens.contains(8) && plens.contains(16));
        let (bits, plens) = t.lookup(0x0a02_0505);
        // Diverges from 10.1/16 at bit 14 → 15 bits.
        assert_eq!(bits, 15);
        assert!(plens.contains(8) && !plens.contains(16));
        t.remove(0x0a01_0000, 16);
        assert!(!t.lookup(0x0a01_0505).1.contains(16));
    }

    /// Oracle: maskbits = L (+1 if some prefix is longer than L and agrees
    /// on the first L bits), L = max common prefix (capped at length).
    #[test]
    fn matches_semantic_definition() {
        let mut seed = 0x1234_5678_u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let mut t = Trie::new(16);
            let mut prefixes = Vec::new();
            for _ in 0..(rnd() % 6) {
                let len = (rnd() % 16 + 1) as u32;
                let v = (rnd() & 0xffff) as u128 & (((1u128 << len) - 1) << (16 - len));
                t.insert(v, len);
                prefixes.push((v, len));
            }
            for _ in 0..50 {
                let x = (rnd() & 0xffff) as u128;
                let cp = |v: u128, len: u32| {
                    let d = (v ^ x) & 0xffff;
                    let lz = if d == 0 {
                        16
                    } else {
                        (d as u16).leading_zeros()
                    };
                    lz.min(len)
                };
                let l = prefixes
                    .iter()
                    .map(|&(v, len)| cp(v, len))
                    .max()
                    .unwrap_or(0);
                let longer = prefixes.iter().any(|&(v, len)| len > l && cp(v, len) == l);
                let want = if longer { l + 1 } else { l };
                let (got, plens) = t.lookup(x);
                assert_eq!(got, want, "x={x:#x} prefixes={prefixes:?}");
                for &(v, len) in &prefixes {
                    assert_eq!(
                        plens.contains(len),
                        prefixes
                            .iter()
                            .any(|&(v2, l2)| l2 == len && cp(v2, l2) == len),
                        "{v:#x}"
                    );
                }
            }
        }
    }
}
