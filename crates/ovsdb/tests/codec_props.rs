//! Properties of the codec: values round-trip through JSON, and no input
//! (bytes, JSON) makes the framer, the value reader or the replica panic.

use flowpath_ovsdb::{Atom, Framer, Message, Replica, Uuid, Value};
use proptest::prelude::*;
use serde_json::{json, Value as Json};

fn atom() -> impl Strategy<Value = Atom> {
    prop_oneof![
        any::<i64>().prop_map(Atom::Integer),
        // Reals with a short exact decimal form, as the server writes them.
        any::<i32>().prop_map(|i| Atom::Real(f64::from(i) / 8.0)),
        any::<bool>().prop_map(Atom::Boolean),
        ".*".prop_map(Atom::String),
        any::<[u8; 16]>().prop_map(|b| {
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            let text = format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            );
            Atom::Uuid(Uuid::parse(&text).unwrap())
        }),
        "[a-z][a-z0-9_]{0,10}".prop_map(Atom::NamedUuid),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        atom().prop_map(Value::Atom),
        prop::collection::vec(atom(), 0..5).prop_map(Value::Set),
        prop::collection::vec((atom(), atom()), 0..5).prop_map(Value::Map),
    ]
}

fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|f| json!(f)),
        prop_oneof![
            Just("set".to_string()),
            Just("map".to_string()),
            Just("uuid".to_string()),
            Just("named-uuid".to_string()),
            Just("old".to_string()),
            Just("new".to_string()),
            Just("36ae7b4a-3d9c-4a3b-8a5c-0e2b6f1d9c11".to_string()),
            ".{0,8}",
        ]
        .prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("old".to_string()),
                        Just("new".to_string()),
                        Just("Bridge".to_string()),
                        Just("36ae7b4a-3d9c-4a3b-8a5c-0e2b6f1d9c11".to_string()),
                        ".{0,6}",
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Json::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn values_round_trip(v in value()) {
        let json = v.to_json();
        let text = json.to_string();
        let back = Value::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        prop_assert_eq!(back, v);
    }

    #[test]
    fn any_json_is_read_or_refused_without_panic(j in any_json()) {
        let _ = Value::from_json(&j);
        let _ = Message::from_json(j.clone());
        let mut r = Replica::new(None);
        if r.apply_table_updates(&j).is_err() {
            prop_assert!(r.is_empty());
        }
    }

    #[test]
    fn any_bytes_are_framed_or_refused_without_panic(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..10),
        prefix in prop::bool::ANY,
    ) {
        let mut f = Framer::new();
        if prefix {
            f.push(b"{\"id\": 1, \"result\": \"");
        }
        for c in &chunks {
            f.push(c);
            match f.next_message() {
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }

    #[test]
    fn messages_split_anywhere_are_framed(
        results in prop::collection::vec(value(), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let msgs: Vec<Message> = results
            .iter()
            .enumerate()
            .map(|(i, v)| Message::Response { result: v.to_json(), id: json!(i) })
            .collect();
        let bytes: Vec<u8> = msgs.iter().flat_map(|m| m.to_bytes()).collect();
        let cut = cut.index(bytes.len() + 1);
        let mut f = Framer::new();
        let mut got = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            f.push(part);
            while let Some(m) = f.next_message().unwrap() {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
    }
}
