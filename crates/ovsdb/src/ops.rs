//! `transact` operations (RFC 7047 section 5.2) and their results.

use serde_json::{json, Map, Value as Json};

use crate::error::{abbreviate, Error, Result};
use crate::rpc::error_text;
use crate::value::{row_from_json, row_to_json, Row, Uuid, Value};

/// A `where` clause's condition: `[column, function, value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The column.
    pub column: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `includes` or `excludes`.
    pub function: String,
    /// The value compared with.
    pub value: Value,
}

impl Condition {
    /// Any condition.
    pub fn new(column: &str, function: &str, value: impl Into<Value>) -> Condition {
        Condition {
            column: column.into(),
            function: function.into(),
            value: value.into(),
        }
    }

    /// `column == value`.
    pub fn eq(column: &str, value: impl Into<Value>) -> Condition {
        Condition::new(column, "==", value)
    }

    /// `_uuid == uuid`: the one row.
    pub fn uuid(uuid: &Uuid) -> Condition {
        Condition::new("_uuid", "==", uuid.clone())
    }

    fn to_json(&self) -> Json {
        json!([self.column, self.function, self.value.to_json()])
    }
}

/// A `mutate` operation's mutation: `[column, mutator, value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    /// The column.
    pub column: String,
    /// `+=`, `-=`, `*=`, `/=`, `%=`, `insert` or `delete`.
    pub mutator: String,
    /// The operand.
    pub value: Value,
}

impl Mutation {
    /// Any mutation.
    pub fn new(column: &str, mutator: &str, value: impl Into<Value>) -> Mutation {
        Mutation {
            column: column.into(),
            mutator: mutator.into(),
            value: value.into(),
        }
    }

    /// Adds the elements of a set (or the pairs of a map).
    pub fn insert(column: &str, value: impl Into<Value>) -> Mutation {
        Mutation::new(column, "insert", value)
    }

    /// Removes the elements of a set (or, for a map, the pairs, or the
    /// keys given as a set).
    pub fn delete(column: &str, value: impl Into<Value>) -> Mutation {
        Mutation::new(column, "delete", value)
    }

    fn to_json(&self) -> Json {
        json!([self.column, self.mutator, self.value.to_json()])
    }
}

/// One operation of a `transact`.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// Inserts a row; `uuid_name` lets later operations of the same
    /// transaction refer to it as [`Atom::NamedUuid`](crate::Atom::NamedUuid).
    Insert {
        /// The table.
        table: String,
        /// The columns given (others get their defaults).
        row: Row,
        /// The row's name within the transaction.
        uuid_name: Option<String>,
    },
    /// Sets columns of the rows matching `conditions`.
    Update {
        /// The table.
        table: String,
        /// Which rows.
        conditions: Vec<Condition>,
        /// The columns to set.
        row: Row,
    },
    /// Mutates columns of the rows matching `conditions`.
    Mutate {
        /// The table.
        table: String,
        /// Which rows.
        conditions: Vec<Condition>,
        /// The mutations.
        mutations: Vec<Mutation>,
    },
    /// Deletes the rows matching `conditions`.
    Delete {
        /// The table.
        table: String,
        /// Which rows.
        conditions: Vec<Condition>,
    },
    /// Reads the rows matching `conditions`.
    Select {
        /// The table.
        table: String,
        /// Which rows.
        conditions: Vec<Condition>,
        /// Which columns; `None` is all.
        columns: Option<Vec<String>>,
    },
    /// Waits until the rows matching `conditions` are (`equal`) or are
    /// not the rows given, or fails after `timeout_ms`.
    Wait {
        /// The table.
        table: String,
        /// Which rows.
        conditions: Vec<Condition>,
        /// The columns compared.
        columns: Vec<String>,
        /// `true`: wait until `==`; `false`: until `!=`.
        equal: bool,
        /// The rows compared with.
        rows: Vec<Row>,
        /// Milliseconds before failing; `None` waits forever, `Some(0)`
        /// fails at once.
        timeout_ms: Option<u64>,
    },
    /// Adds a comment to the database log.
    Comment(String),
}

impl Operation {
    /// The operation's name, e.g. `insert`.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Insert { .. } => "insert",
            Operation::Update { .. } => "update",
            Operation::Mutate { .. } => "mutate",
            Operation::Delete { .. } => "delete",
            Operation::Select { .. } => "select",
            Operation::Wait { .. } => "wait",
            Operation::Comment(_) => "comment",
        }
    }

    /// The table the operation works on (none for a comment).
    pub fn table(&self) -> Option<&str> {
        match self {
            Operation::Insert { table, .. }
            | Operation::Update { table, .. }
            | Operation::Mutate { table, .. }
            | Operation::Delete { table, .. }
            | Operation::Select { table, .. }
            | Operation::Wait { table, .. } => Some(table),
            Operation::Comment(_) => None,
        }
    }

    /// The columns the operation names (for checking against a schema).
    pub fn columns(&self) -> Vec<&str> {
        fn conds(c: &[Condition]) -> Vec<&str> {
            c.iter().map(|c| c.column.as_str()).collect()
        }
        match self {
            Operation::Insert { row, .. } => row.keys().map(String::as_str).collect(),
            Operation::Update {
                conditions, row, ..
            } => {
                let mut v = conds(conditions);
                v.extend(row.keys().map(String::as_str));
                v
            }
            Operation::Mutate {
                conditions,
                mutations,
                ..
            } => {
                let mut v = conds(conditions);
                v.extend(mutations.iter().map(|m| m.column.as_str()));
                v
            }
            Operation::Delete { conditions, .. } => conds(conditions),
            Operation::Select {
                conditions,
                columns,
                ..
            } => {
                let mut v = conds(conditions);
                v.extend(columns.iter().flatten().map(String::as_str));
                v
            }
            Operation::Wait {
                conditions,
                columns,
                rows,
                ..
            } => {
                let mut v = conds(conditions);
                v.extend(columns.iter().map(String::as_str));
                v.extend(rows.iter().flat_map(|r| r.keys().map(String::as_str)));
                v
            }
            Operation::Comment(_) => Vec::new(),
        }
    }

    /// The operation's JSON.
    pub fn to_json(&self) -> Json {
        let wh = |c: &[Condition]| Json::Array(c.iter().map(Condition::to_json).collect());
        let mut o = Map::new();
        o.insert("op".into(), json!(self.name()));
        if let Some(t) = self.table() {
            o.insert("table".into(), json!(t));
        }
        match self {
            Operation::Insert { row, uuid_name, .. } => {
                o.insert("row".into(), row_to_json(row));
                if let Some(n) = uuid_name {
                    o.insert("uuid-name".into(), json!(n));
                }
            }
            Operation::Update {
                conditions, row, ..
            } => {
                o.insert("where".into(), wh(conditions));
                o.insert("row".into(), row_to_json(row));
            }
            Operation::Mutate {
                conditions,
                mutations,
                ..
            } => {
                o.insert("where".into(), wh(conditions));
                o.insert(
                    "mutations".into(),
                    Json::Array(mutations.iter().map(Mutation::to_json).collect()),
                );
            }
            Operation::Delete { conditions, .. } => {
                o.insert("where".into(), wh(conditions));
            }
            Operation::Select {
                conditions,
                columns,
                ..
            } => {
                o.insert("where".into(), wh(conditions));
                if let Some(c) = columns {
                    o.insert("columns".into(), json!(c));
                }
            }
            Operation::Wait {
                conditions,
                columns,
                equal,
                rows,
                timeout_ms,
                ..
            } => {
                o.insert("where".into(), wh(conditions));
                o.insert("columns".into(), json!(columns));
                o.insert("until".into(), json!(if *equal { "==" } else { "!=" }));
                o.insert(
                    "rows".into(),
                    Json::Array(rows.iter().map(row_to_json).collect()),
                );
                if let Some(t) = timeout_ms {
                    o.insert("timeout".into(), json!(t));
                }
            }
            Operation::Comment(text) => {
                o.insert("comment".into(), json!(text));
            }
        }
        Json::Object(o)
    }
}

/// A successful operation's result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpResult {
    /// `insert`: the new row's UUID.
    pub uuid: Option<Uuid>,
    /// `update`, `mutate`, `delete`: how many rows matched.
    pub count: Option<u64>,
    /// `select`: the rows.
    pub rows: Option<Vec<Row>>,
}

/// The `transact` request's params: `[db, op, ...]`.
pub fn transact_params(db: &str, ops: &[Operation]) -> Json {
    let mut p = vec![json!(db)];
    p.extend(ops.iter().map(Operation::to_json));
    Json::Array(p)
}

/// Reads a `transact` reply's result (an array with one entry per
/// operation, perhaps one more for a failed commit): the results, or
/// [`Error::Transaction`] naming the first failure.
pub fn parse_transact_result(ops: &[Operation], result: &Json) -> Result<Vec<OpResult>> {
    let entries = result.as_array().ok_or_else(|| {
        Error::Protocol(format!(
            "transact result is not an array: {}",
            abbreviate(result)
        ))
    })?;
    // Errors first: the server stops at the first failed operation (the
    // rest are null) or adds an entry for a failed commit.
    for (index, e) in entries.iter().enumerate() {
        if let Some(err) = e.get("error") {
            let (error, details) = error_text(&json!({"error": err, "details": e.get("details")}));
            let details = details.filter(|d| d != "null");
            return Err(Error::Transaction {
                index,
                op: ops.get(index).map_or("commit", Operation::name).to_string(),
                error,
                details,
            });
        }
    }
    if entries.len() < ops.len() {
        return Err(Error::Protocol(format!(
            "transact gave {} results for {} operations",
            entries.len(),
            ops.len()
        )));
    }
    entries
        .iter()
        .take(ops.len())
        .map(|e| {
            let bad = |what: &str| {
                Error::Protocol(format!("transact result: bad {what} in {}", abbreviate(e)))
            };
            let mut r = OpResult::default();
            if e.is_null() {
                return Ok(r);
            }
            if let Some(u) = e.get("uuid") {
                match u.as_array().map(Vec::as_slice) {
                    Some([Json::String(tag), Json::String(s)]) if tag == "uuid" => {
                        r.uuid = Some(Uuid::parse(s)?);
                    }
                    _ => return Err(bad("uuid")),
                }
            }
            if let Some(c) = e.get("count") {
                r.count = Some(c.as_u64().ok_or_else(|| bad("count"))?);
            }
            if let Some(rows) = e.get("rows") {
                let rows = rows.as_array().ok_or_else(|| bad("rows"))?;
                r.rows = Some(rows.iter().map(row_from_json).collect::<Result<_>>()?);
            }
            Ok(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Atom;

    fn ops() -> Vec<Operation> {
        vec![
            Operation::Insert {
                table: "Port".into(),
                row: Row::from([("name".to_string(), Value::from("p1"))]),
                uuid_name: Some("newport".into()),
            },
            Operation::Mutate {
                table: "Bridge".into(),
                conditions: vec![Condition::eq("name", "br0")],
                mutations: vec![Mutation::insert(
                    "ports",
                    Value::set([Atom::NamedUuid("newport".into())]),
                )],
            },
            Operation::Select {
                table: "Port".into(),
                conditions: vec![],
                columns: Some(vec!["name".into()]),
            },
            Operation::Comment("hello".into()),
        ]
    }

    #[test]
    fn operations_encode_as_rfc_7047() {
        let p = transact_params("Open_vSwitch", &ops());
        assert_eq!(
            p,
            json!(["Open_vSwitch",
                {"op": "insert", "table": "Port", "row": {"name": "p1"}, "uuid-name": "newport"},
                {"op": "mutate", "table": "Bridge", "where": [["name", "==", "br0"]],
                 "mutations": [["ports", "insert", ["set", [["named-uuid", "newport"]]]]]},
                {"op": "select", "table": "Port", "where": [], "columns": ["name"]},
                {"op": "comment", "comment": "hello"}])
        );
        let w = Operation::Wait {
            table: "Bridge".into(),
            conditions: vec![],
            columns: vec!["name".into()],
            equal: false,
            rows: vec![],
            timeout_ms: Some(0),
        };
        assert_eq!(w.to_json()["until"], json!("!="));
        assert_eq!(w.to_json()["timeout"], json!(0));
        assert_eq!(ops()[1].columns(), vec!["name", "ports"]);
    }

    #[test]
    fn results_are_read_per_operation() {
        let u = "36ae7b4a-3d9c-4a3b-8a5c-0e2b6f1d9c11";
        let r = parse_transact_result(
            &ops(),
            &json!([{"uuid": ["uuid", u]}, {"count": 1}, {"rows": [{"name": "p1"}]}, {}]),
        )
        .unwrap();
        assert_eq!(r[0].uuid.as_ref().unwrap().as_str(), u);
        assert_eq!(r[1].count, Some(1));
        assert_eq!(r[2].rows.as_ref().unwrap()[0]["name"], Value::from("p1"));
        assert_eq!(r[3], OpResult::default());
    }

    #[test]
    fn failures_name_the_operation_and_the_servers_error() {
        let e = parse_transact_result(
            &ops(),
            &json!([{"uuid": ["uuid", "36ae7b4a-3d9c-4a3b-8a5c-0e2b6f1d9c11"]},
                    {"error": "constraint violation", "details": "no row"}, null, null]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "transaction failed at operation 1 (mutate): constraint violation (no row)"
        );
        let e = parse_transact_result(
            &ops(),
            &json!([{}, {}, {}, {}, {"error": "referential integrity violation"}]),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Transaction { index: 4, ref op, .. } if op == "commit"));
        assert_eq!(
            e.to_string(),
            "transaction failed at commit: referential integrity violation"
        );
        assert!(parse_transact_result(&ops(), &json!({})).is_err());
        assert!(parse_transact_result(&ops(), &json!([{}])).is_err());
        assert!(parse_transact_result(&ops(), &json!([{"uuid": 5}, {}, {}, {}])).is_err());
    }
}
