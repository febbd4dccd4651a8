use super::*;
use serde_json::json;

const B: &str = "11111111-2222-3333-4444-555555555555";
const P: &str = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

fn schema() -> Arc<DatabaseSchema> {
    Arc::new(
        DatabaseSchema::from_json(&json!({
            "name": "T",
            "tables": {
                "Bridge": {"columns": {
                    "name": {"type": "string"},
                    "ports": {"type": {"key": "uuid", "min": 0, "max": "unlimited"}},
                    "other_config": {"type": {"key": "string", "value": "string",
                                              "min": 0, "max": "unlimited"}},
                    "flood_vlans": {"type": {"key": "integer", "min": 0, "max": 4096}},
                    "stp_enable": {"type": "boolean"},
                    "ofport": {"type": {"key": "integer", "min": 0, "max": 1}},
                    "stats": {"type": {"key": "string", "value": "integer",
                                       "min": 0, "max": "unlimited"}},
                    "error": {"type": {"key": "string", "min": 0, "max": 1}},
                    "unmonitored": {"type": "string"}
                }},
                "Port": {"columns": {"name": {"type": "string"}}}
            }
        }))
        .unwrap(),
    )
}

fn initial() -> Json {
    json!({
        "Bridge": {B: {"new": {
            "name": "br0",
            "ports": ["uuid", P],
            "other_config": ["map", [["hwaddr", "00:11:22:33:44:55"]]],
            "flood_vlans": ["set", [1, 2]],
            "stp_enable": false,
            "ofport": ["set", []],
            "stats": ["map", []],
            "error": ["set", []]
        }}},
        "Port": {P: {"new": {"name": "p1"}}}
    })
}

fn uuid(s: &str) -> Uuid {
    Uuid::parse(s).unwrap()
}

#[test]
fn initial_rows_and_typed_getters() {
    let mut r = Replica::new(Some(schema()));
    let changes = r.apply_table_updates(&initial()).unwrap();
    assert_eq!(changes.len(), 2);
    assert!(changes.iter().all(|c| c.kind == ChangeKind::Insert));
    assert_eq!(r.len("Bridge"), 1);
    assert_eq!(r.len("Port"), 1);
    let br = r.find("Bridge", "name", "br0").unwrap();
    assert_eq!(br.uuid(), &uuid(B));
    assert_eq!(br.string("name").unwrap(), "br0");
    // One-element set in its bare form.
    assert_eq!(br.uuids("ports").unwrap(), vec![&uuid(P)]);
    assert_eq!(
        br.string_map("other_config").unwrap(),
        BTreeMap::from([("hwaddr", "00:11:22:33:44:55")])
    );
    assert_eq!(br.integers("flood_vlans").unwrap(), vec![1, 2]);
    assert!(!br.boolean("stp_enable").unwrap());
    assert_eq!(br.optional_integer("ofport").unwrap(), None);
    assert_eq!(br.optional_string("error").unwrap(), None);
    assert!(br.integer_map("stats").unwrap().is_empty());
    let port = r.row("Port", &uuid(P)).unwrap();
    assert_eq!(port.string("name").unwrap(), "p1");
    assert!(r.find("Bridge", "name", "br1").is_none());
}

#[test]
fn getters_name_table_and_column_in_errors() {
    let mut r = Replica::new(Some(schema()));
    r.apply_table_updates(&initial()).unwrap();
    let br = r.find("Bridge", "name", "br0").unwrap();
    assert_eq!(
        br.string("nosuch").unwrap_err().to_string(),
        "table Bridge has no column nosuch"
    );
    let e = br.string("unmonitored").unwrap_err();
    assert!(matches!(e, Error::MissingColumn { .. }), "{e}");
    assert!(e.to_string().contains("column unmonitored"), "{e}");
    let e = br.integer("name").unwrap_err();
    assert_eq!(
        e.to_string(),
        "table Bridge column name: expected an integer, found \"br0\""
    );
    // An empty optional is not a scalar.
    assert!(matches!(br.integer("ofport"), Err(Error::Type { .. })));
    assert!(matches!(br.string_map("name"), Err(Error::Type { .. })));
    assert!(matches!(br.uuids("flood_vlans"), Err(Error::Type { .. })));
    // Without a schema an unknown column is only missing.
    let mut bare = Replica::new(None);
    bare.apply_table_updates(&initial()).unwrap();
    let br = bare.find("Bridge", "name", "br0").unwrap();
    assert!(matches!(br.get("nosuch"), Err(Error::MissingColumn { .. })));
}

#[test]
fn modify_and_delete_are_applied() {
    let mut r = Replica::new(Some(schema()));
    r.apply_table_updates(&initial()).unwrap();
    // A modify: `old` has the changed columns, `new` all of them.
    let mut new_row = initial()["Bridge"][B]["new"].clone();
    new_row["ofport"] = json!(5);
    new_row["stats"] = json!(["map", [["rx_packets", 10]]]);
    new_row["error"] = json!("boom");
    let changes = r
        .apply_table_updates(&json!({"Bridge": {B: {
            "old": {"ofport": ["set", []], "stats": ["map", []], "error": ["set", []]},
            "new": new_row}}}))
        .unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, ChangeKind::Modify);
    assert_eq!(
        changes[0].changed_columns(),
        vec!["error", "ofport", "stats"]
    );
    let br = r.row("Bridge", &uuid(B)).unwrap();
    assert_eq!(br.optional_integer("ofport").unwrap(), Some(5));
    assert_eq!(br.integer_map("stats").unwrap()["rx_packets"], 10);
    assert_eq!(br.optional_string("error").unwrap(), Some("boom"));
    assert_eq!(br.string("name").unwrap(), "br0");

    // A partial `new` is merged.
    r.apply_table_updates(
        &json!({"Bridge": {B: {"old": {"name": "br0"}, "new": {"name": "br9"}}}}),
    )
    .unwrap();
    let br = r.row("Bridge", &uuid(B)).unwrap();
    assert_eq!(br.string("name").unwrap(), "br9");
    assert_eq!(br.optional_integer("ofport").unwrap(), Some(5));

    // Delete.
    let changes = r
        .apply_table_updates(&json!({"Port": {P: {"old": {"name": "p1"}}}}))
        .unwrap();
    assert_eq!(changes[0].kind, ChangeKind::Delete);
    assert_eq!(changes[0].old.as_ref().unwrap()["name"], Value::from("p1"));
    assert_eq!(r.len("Port"), 0);
    assert!(r.row("Port", &uuid(P)).is_none());
    assert_eq!(r.table_names().collect::<Vec<_>>(), vec!["Bridge"]);
    r.clear();
    assert!(r.is_empty());
}

#[test]
fn malformed_updates_are_errors_and_change_nothing() {
    let mut r = Replica::new(None);
    r.apply_table_updates(&initial()).unwrap();
    for bad in [
        json!([]),
        json!({"Bridge": []}),
        json!({"Bridge": {"not-a-uuid": {"new": {}}}}),
        json!({"Bridge": {B: 5}}),
        json!({"Bridge": {B: {}}}),
        json!({"Bridge": {B: {"new": {"name": null}}}}),
        // The first part is good, the second not: none is applied.
        json!({"Port": {P: {"old": {"name": "p1"}}}, "Zzz": {B: {"new": []}}}),
    ] {
        assert!(r.apply_table_updates(&bad).is_err(), "{bad}");
    }
    assert_eq!(r.len("Port"), 1);
    assert_eq!(r.len("Bridge"), 1);
}
