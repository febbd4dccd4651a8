//! OVSDB values as RFC 7047 encodes them in JSON: atoms, sets and maps.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{json, Value as Json};

use crate::error::{abbreviate, Error, Result};

/// A row UUID in its canonical text form (`8-4-4-4-12` hex digits, lower
/// case).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(String);

impl Uuid {
    /// Checks and normalises (to lower case) a UUID's text.
    pub fn parse(s: &str) -> Result<Uuid> {
        let bytes = s.as_bytes();
        let ok = bytes.len() == 36
            && bytes.iter().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => *b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        if ok {
            Ok(Uuid(s.to_ascii_lowercase()))
        } else {
            Err(Error::BadValue {
                json: format!("{s:?}"),
                reason: "not a UUID".into(),
            })
        }
    }

    /// The UUID's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One OVSDB atom.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    /// A 64-bit integer.
    Integer(i64),
    /// A real (a JSON number with a fraction or exponent).
    Real(f64),
    /// A boolean.
    Boolean(bool),
    /// A string.
    String(String),
    /// A row's UUID, `["uuid", "..."]`.
    Uuid(Uuid),
    /// A row inserted earlier in the same transaction, by the
    /// `uuid-name` given to its `insert`: `["named-uuid", "NAME"]`.
    NamedUuid(String),
}

impl Atom {
    /// A string atom.
    pub fn string(s: impl Into<String>) -> Atom {
        Atom::String(s.into())
    }

    /// The atom's JSON.
    pub fn to_json(&self) -> Json {
        match self {
            Atom::Integer(i) => json!(i),
            // Non-finite reals have no JSON form: they encode as null,
            // which the server rejects.
            Atom::Real(r) => serde_json::Number::from_f64(*r).map_or(Json::Null, Json::Number),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.as_str()]),
            Atom::NamedUuid(n) => json!(["named-uuid", n]),
        }
    }

    /// Reads an atom's JSON.
    pub fn from_json(json: &Json) -> Result<Atom> {
        let bad = |reason: &str| Error::BadValue {
            json: abbreviate(json),
            reason: reason.into(),
        };
        match json {
            Json::Bool(b) => Ok(Atom::Boolean(*b)),
            Json::String(s) => Ok(Atom::String(s.clone())),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Ok(Atom::Integer(i))
                } else if n.is_u64() {
                    Err(bad("integer out of range"))
                } else {
                    n.as_f64().map(Atom::Real).ok_or_else(|| bad("bad number"))
                }
            }
            Json::Array(a) => match a.as_slice() {
                [Json::String(tag), Json::String(s)] if tag == "uuid" => {
                    Uuid::parse(s).map(Atom::Uuid)
                }
                [Json::String(tag), Json::String(s)] if tag == "named-uuid" => {
                    Ok(Atom::NamedUuid(s.clone()))
                }
                _ => Err(bad("not an atom")),
            },
            Json::Null | Json::Object(_) => Err(bad("not an atom")),
        }
    }

    /// The atom's type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Atom::Integer(_) => "integer",
            Atom::Real(_) => "real",
            Atom::Boolean(_) => "boolean",
            Atom::String(_) => "string",
            Atom::Uuid(_) => "uuid",
            Atom::NamedUuid(_) => "named-uuid",
        }
    }
}

impl From<&str> for Atom {
    fn from(s: &str) -> Atom {
        Atom::String(s.to_string())
    }
}

impl From<String> for Atom {
    fn from(s: String) -> Atom {
        Atom::String(s)
    }
}

impl From<i64> for Atom {
    fn from(i: i64) -> Atom {
        Atom::Integer(i)
    }
}

impl From<bool> for Atom {
    fn from(b: bool) -> Atom {
        Atom::Boolean(b)
    }
}

impl From<f64> for Atom {
    fn from(r: f64) -> Atom {
        Atom::Real(r)
    }
}

impl From<Uuid> for Atom {
    fn from(u: Uuid) -> Atom {
        Atom::Uuid(u)
    }
}

/// A column's value (RFC 7047's `<value>`): one atom, a set or a map.
///
/// The wire has two forms of a one-element set: the bare atom and
/// `["set", [atom]]`; reading keeps the form it saw ([`Value::Atom`] or
/// [`Value::Set`]) so that encoding gives back the same JSON, and the
/// accessors treat both alike ([`Value::as_set`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A bare atom: a scalar column, or a one-element set.
    Atom(Atom),
    /// `["set", [atom, ...]]`; an empty set is an optional column's
    /// "no value".
    Set(Vec<Atom>),
    /// `["map", [[key, value], ...]]`.
    Map(Vec<(Atom, Atom)>),
}

impl Value {
    /// The empty set (an optional column without a value, an empty map).
    pub fn empty() -> Value {
        Value::Set(Vec::new())
    }

    /// A set of atoms.
    pub fn set<A: Into<Atom>>(atoms: impl IntoIterator<Item = A>) -> Value {
        Value::Set(atoms.into_iter().map(Into::into).collect())
    }

    /// A map from string to string (e.g. `other_config`, `external_ids`).
    pub fn string_map<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Value {
        Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Atom::String(k.into()), Atom::String(v.into())))
                .collect(),
        )
    }

    /// A map of atoms.
    pub fn map<K: Into<Atom>, V: Into<Atom>>(pairs: impl IntoIterator<Item = (K, V)>) -> Value {
        Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// The value's JSON.
    pub fn to_json(&self) -> Json {
        match self {
            Value::Atom(a) => a.to_json(),
            Value::Set(atoms) => {
                json!(["set", atoms.iter().map(Atom::to_json).collect::<Vec<_>>()])
            }
            Value::Map(pairs) => json!([
                "map",
                pairs
                    .iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// Reads a value's JSON.
    pub fn from_json(json: &Json) -> Result<Value> {
        let bad = |reason: &str| Error::BadValue {
            json: abbreviate(json),
            reason: reason.into(),
        };
        if let Json::Array(a) = json {
            match a.as_slice() {
                [Json::String(tag), Json::Array(elems)] if tag == "set" => {
                    return elems
                        .iter()
                        .map(Atom::from_json)
                        .collect::<Result<Vec<_>>>()
                        .map(Value::Set);
                }
                [Json::String(tag), Json::Array(pairs)] if tag == "map" => {
                    return pairs
                        .iter()
                        .map(|p| match p.as_array().map(Vec::as_slice) {
                            Some([k, v]) => Ok((Atom::from_json(k)?, Atom::from_json(v)?)),
                            _ => Err(bad("a map's element is not a [key, value] pair")),
                        })
                        .collect::<Result<Vec<_>>>()
                        .map(Value::Map);
                }
                [Json::String(tag), _] if tag == "set" || tag == "map" => {
                    return Err(bad("a set's or map's elements are not an array"));
                }
                _ => {}
            }
        }
        Atom::from_json(json).map(Value::Atom)
    }

    /// The value as a set: a bare atom is a one-element set. `None` for
    /// a map (an empty map reads as an empty set, since the wire does
    /// not tell them apart without the schema).
    pub fn as_set(&self) -> Option<&[Atom]> {
        match self {
            Value::Atom(a) => Some(std::slice::from_ref(a)),
            Value::Set(s) => Some(s),
            Value::Map(_) => None,
        }
    }

    /// The value as a map's pairs; an empty set is an empty map.
    pub fn as_map(&self) -> Option<&[(Atom, Atom)]> {
        match self {
            Value::Map(m) => Some(m),
            Value::Set(s) if s.is_empty() => Some(&[]),
            _ => None,
        }
    }

    /// The single atom of a scalar column, or of a one-element set.
    pub fn as_atom(&self) -> Option<&Atom> {
        match self.as_set() {
            Some([a]) => Some(a),
            _ => None,
        }
    }
}

impl From<Atom> for Value {
    fn from(a: Atom) -> Value {
        Value::Atom(a)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Atom(Atom::from(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Atom(Atom::String(s))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Atom(Atom::Integer(i))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Atom(Atom::Boolean(b))
    }
}

impl From<f64> for Value {
    fn from(r: f64) -> Value {
        Value::Atom(Atom::Real(r))
    }
}

impl From<Uuid> for Value {
    fn from(u: Uuid) -> Value {
        Value::Atom(Atom::Uuid(u))
    }
}

/// A row's columns: column name to value.
pub type Row = BTreeMap<String, Value>;

/// Reads a row's JSON object (`{"column": value, ...}`).
pub fn row_from_json(json: &Json) -> Result<Row> {
    let obj = json.as_object().ok_or_else(|| Error::BadValue {
        json: abbreviate(json),
        reason: "a row is not a JSON object".into(),
    })?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), Value::from_json(v)?)))
        .collect()
}

/// A row's JSON object.
pub fn row_to_json(row: &Row) -> Json {
    Json::Object(row.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "36ae7b4a-3d9c-4a3b-8a5c-0e2b6f1d9c11";

    fn round_trip(text: &str) -> Value {
        let json: Json = serde_json::from_str(text).unwrap();
        let v = Value::from_json(&json).unwrap();
        assert_eq!(v.to_json(), json, "{text} did not round-trip");
        v
    }

    #[test]
    fn atoms_round_trip() {
        assert_eq!(round_trip("42"), Value::Atom(Atom::Integer(42)));
        assert_eq!(round_trip("-7"), Value::Atom(Atom::Integer(-7)));
        assert_eq!(round_trip("1.5"), Value::Atom(Atom::Real(1.5)));
        assert_eq!(round_trip("true"), Value::Atom(Atom::Boolean(true)));
        assert_eq!(round_trip("\"br0\""), Value::from("br0"));
        let u = round_trip(&format!("[\"uuid\", \"{U}\"]"));
        assert_eq!(u, Value::Atom(Atom::Uuid(Uuid::parse(U).unwrap())));
        let n = round_trip("[\"named-uuid\", \"row1\"]");
        assert_eq!(n, Value::Atom(Atom::NamedUuid("row1".into())));
    }

    #[test]
    fn uuid_is_checked_and_lower_cased() {
        let upper = U.to_ascii_uppercase();
        assert_eq!(Uuid::parse(&upper).unwrap().as_str(), U);
        for bad in ["", "x", &U[1..], &U.replace('-', "x"), &format!("{U}0")] {
            assert!(Uuid::parse(bad).is_err(), "{bad} accepted");
        }
        let j = json!(["uuid", "not-a-uuid"]);
        assert!(matches!(Value::from_json(&j), Err(Error::BadValue { .. })));
    }

    #[test]
    fn sets_round_trip_including_bare_and_empty() {
        let empty = round_trip("[\"set\", []]");
        assert_eq!(empty, Value::empty());
        assert_eq!(empty.as_set().unwrap().len(), 0);
        assert_eq!(empty.as_map().unwrap().len(), 0);
        assert_eq!(empty.as_atom(), None);

        // One element: the bare form and the set form read alike.
        let bare = round_trip("5");
        let one = round_trip("[\"set\", [5]]");
        assert_eq!(bare.as_set(), one.as_set());
        assert_eq!(bare.as_atom(), Some(&Atom::Integer(5)));
        assert_eq!(one.as_atom(), Some(&Atom::Integer(5)));

        let many = round_trip(&format!(
            "[\"set\", [[\"uuid\", \"{U}\"], [\"named-uuid\", \"p\"]]]"
        ));
        assert_eq!(many.as_set().unwrap().len(), 2);
        assert_eq!(many.as_atom(), None);
        assert_eq!(Value::set(["a", "b"]).to_json(), json!(["set", ["a", "b"]]));
    }

    #[test]
    fn maps_round_trip() {
        let m = round_trip("[\"map\", [[\"rx_packets\", 10], [\"tx_packets\", 20]]]");
        assert_eq!(
            m,
            Value::map([("rx_packets", 10i64), ("tx_packets", 20i64)])
        );
        assert_eq!(m.as_set(), None);
        let e = round_trip("[\"map\", []]");
        assert_eq!(e.as_map().unwrap().len(), 0);
        assert_eq!(
            Value::string_map([("k", "v")]).to_json(),
            json!(["map", [["k", "v"]]])
        );
    }

    #[test]
    fn malformed_values_are_errors() {
        for text in [
            "null",
            "{}",
            "[]",
            "[\"set\"]",
            "[\"set\", 5]",
            "[\"map\", [[1]]]",
            "[\"map\", [1, 2]]",
            "[\"set\", [[\"set\", []]]]",
            "[\"uuid\", 5]",
            "[\"bogus\", \"x\"]",
            "18446744073709551615",
        ] {
            let json: Json = serde_json::from_str(text).unwrap();
            let err = Value::from_json(&json).unwrap_err();
            assert!(matches!(err, Error::BadValue { .. }), "{text}: {err}");
        }
        let err = row_from_json(&json!([1])).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
    }

    #[test]
    fn rows_round_trip() {
        let json = json!({"name": "br0", "ports": ["set", []], "ofport": 5});
        let row = row_from_json(&json).unwrap();
        assert_eq!(row["name"], Value::from("br0"));
        assert_eq!(row_to_json(&row), json);
    }
}
