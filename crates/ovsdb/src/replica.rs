//! An in-memory copy of the monitored tables, kept up to date from
//! `monitor` results and `update` notifications (RFC 7047 section 4.1.6).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::error::{abbreviate, Error, Result};
use crate::schema::{DatabaseSchema, TableSchema};
use crate::value::{row_from_json, Atom, Row, Uuid, Value};

/// What happened to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// The row is new (or was there when monitoring began).
    Insert,
    /// Some columns changed.
    Modify,
    /// The row is gone.
    Delete,
}

/// One row's change, as applied to the replica.
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table.
    pub table: String,
    /// The row.
    pub uuid: Uuid,
    /// What happened.
    pub kind: ChangeKind,
    /// The row before (all monitored columns), for modify and delete.
    pub old: Option<Row>,
    /// The row after (all monitored columns), for insert and modify.
    pub new: Option<Row>,
}

impl RowChange {
    /// For a modify: the columns whose value changed.
    pub fn changed_columns(&self) -> Vec<&str> {
        match (&self.old, &self.new) {
            (Some(old), Some(new)) => new
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, _)| k.as_str())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The monitored tables: table name → row UUID → row.
#[derive(Clone, Debug, Default)]
pub struct Replica {
    schema: Option<Arc<DatabaseSchema>>,
    tables: BTreeMap<String, BTreeMap<Uuid, Row>>,
}

/// One row's update as sent: `(table, uuid, old, new)`.
type RawUpdate = (String, Uuid, Option<Row>, Option<Row>);

impl Replica {
    /// An empty replica. With a schema, the accessors tell a column that
    /// does not exist from one that was not monitored.
    pub fn new(schema: Option<Arc<DatabaseSchema>>) -> Replica {
        Replica {
            schema,
            tables: BTreeMap::new(),
        }
    }

    /// The schema, if given.
    pub fn schema(&self) -> Option<&DatabaseSchema> {
        self.schema.as_deref()
    }

    /// Forgets every row.
    pub fn clear(&mut self) {
        self.tables.clear();
    }

    /// Reads a `<table-updates>` object (a `monitor` reply's result, or an
    /// `update` notification's second parameter) and applies it. Nothing
    /// is applied when any part is malformed.
    pub fn apply_table_updates(&mut self, json: &Json) -> Result<Vec<RowChange>> {
        let raw = Self::parse_table_updates(json)?;
        Ok(raw
            .into_iter()
            .filter_map(|(table, uuid, old, new)| self.apply_one(table, uuid, old, new))
            .collect())
    }

    fn parse_table_updates(json: &Json) -> Result<Vec<RawUpdate>> {
        let bad = |what: &str, j: &Json| {
            Error::Protocol(format!(
                "malformed table-updates: {what}: {}",
                abbreviate(j)
            ))
        };
        let tables = json.as_object().ok_or_else(|| bad("not an object", json))?;
        let mut out = Vec::new();
        for (table, rows) in tables {
            let rows = rows
                .as_object()
                .ok_or_else(|| bad(&format!("table {table} is not an object"), rows))?;
            for (uuid, update) in rows {
                let uuid = Uuid::parse(uuid)?;
                let obj = update
                    .as_object()
                    .ok_or_else(|| bad(&format!("row {uuid} is not an object"), update))?;
                let old = obj.get("old").map(row_from_json).transpose()?;
                let new = obj.get("new").map(row_from_json).transpose()?;
                if old.is_none() && new.is_none() {
                    return Err(bad(&format!("row {uuid} has neither old nor new"), update));
                }
                out.push((table.clone(), uuid, old, new));
            }
        }
        Ok(out)
    }

    fn apply_one(
        &mut self,
        table: String,
        uuid: Uuid,
        old: Option<Row>,
        new: Option<Row>,
    ) -> Option<RowChange> {
        let rows = self.tables.entry(table.clone()).or_default();
        match (old, new) {
            // Insert (or initial).
            (None, Some(new)) => {
                let prev = rows.insert(uuid.clone(), new.clone());
                Some(RowChange {
                    table,
                    uuid,
                    kind: if prev.is_some() {
                        ChangeKind::Modify
                    } else {
                        ChangeKind::Insert
                    },
                    old: prev,
                    new: Some(new),
                })
            }
            // Modify: `new` holds the monitored columns' values after, `old`
            // those that changed before. Merge, in case a server sends
            // only the changed columns in `new`.
            (Some(_), Some(new)) => {
                let (kind, prev, row) = match rows.get_mut(&uuid) {
                    Some(row) => {
                        let prev = row.clone();
                        row.extend(new);
                        (ChangeKind::Modify, Some(prev), row.clone())
                    }
                    None => {
                        rows.insert(uuid.clone(), new.clone());
                        (ChangeKind::Insert, None, new)
                    }
                };
                Some(RowChange {
                    table,
                    uuid,
                    kind,
                    old: prev,
                    new: Some(row),
                })
            }
            // Delete.
            (Some(old), None) => {
                let prev = rows.remove(&uuid);
                if rows.is_empty() {
                    self.tables.remove(&table);
                }
                Some(RowChange {
                    table,
                    uuid,
                    kind: ChangeKind::Delete,
                    old: Some(prev.unwrap_or(old)),
                    new: None,
                })
            }
            (None, None) => None,
        }
    }

    /// The names of the tables that have rows.
    pub fn table_names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// How many rows the table has.
    pub fn len(&self, table: &str) -> usize {
        self.tables.get(table).map_or(0, BTreeMap::len)
    }

    /// Whether no table has rows.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The table's rows.
    pub fn rows<'a>(&'a self, table: &'a str) -> impl Iterator<Item = RowRef<'a>> + 'a {
        let schema = self.table_schema(table);
        self.tables
            .get(table)
            .into_iter()
            .flatten()
            .map(move |(uuid, row)| RowRef {
                table,
                uuid,
                row,
                schema,
            })
    }

    /// One row.
    pub fn row<'a>(&'a self, table: &'a str, uuid: &Uuid) -> Option<RowRef<'a>> {
        let schema = self.table_schema(table);
        self.tables
            .get(table)?
            .get_key_value(uuid)
            .map(|(uuid, row)| RowRef {
                table,
                uuid,
                row,
                schema,
            })
    }

    /// The first row whose string `column` is `value` (e.g. a bridge by
    /// `name`).
    pub fn find<'a>(&'a self, table: &'a str, column: &str, value: &str) -> Option<RowRef<'a>> {
        self.rows(table)
            .find(|r| r.string(column).is_ok_and(|s| s == value))
    }

    fn table_schema(&self, table: &str) -> Option<&TableSchema> {
        self.schema.as_ref().and_then(|s| s.tables.get(table))
    }
}

/// A row of the replica, with typed accessors. Each accessor's error
/// names the table and column: [`Error::NoSuchColumn`] when the schema has
/// no such column, [`Error::MissingColumn`] when the row lacks it (not
/// monitored), [`Error::Type`] when the value is of another type.
#[derive(Clone, Copy, Debug)]
pub struct RowRef<'a> {
    table: &'a str,
    uuid: &'a Uuid,
    row: &'a Row,
    schema: Option<&'a TableSchema>,
}

impl<'a> RowRef<'a> {
    /// The table.
    pub fn table(&self) -> &'a str {
        self.table
    }

    /// The row's UUID.
    pub fn uuid(&self) -> &'a Uuid {
        self.uuid
    }

    /// All its (monitored) columns.
    pub fn columns(&self) -> &'a Row {
        self.row
    }

    /// A column's value.
    pub fn get(&self, column: &str) -> Result<&'a Value> {
        if let Some(schema) = self.schema {
            if !schema.has_column(column) {
                return Err(Error::NoSuchColumn {
                    table: self.table.to_string(),
                    column: column.to_string(),
                });
            }
        }
        self.row.get(column).ok_or_else(|| Error::MissingColumn {
            table: self.table.to_string(),
            uuid: self.uuid.to_string(),
            column: column.to_string(),
        })
    }

    fn type_error(&self, column: &str, expected: &str, found: &Value) -> Error {
        Error::Type {
            table: self.table.to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            found: abbreviate(&found.to_json()),
        }
    }

    /// The atoms of an optional column (none or one) or a scalar.
    fn optional<T>(
        &self,
        column: &str,
        expected: &str,
        f: impl Fn(&'a Atom) -> Option<T>,
    ) -> Result<Option<T>> {
        let v = self.get(column)?;
        match v.as_set() {
            Some([]) => Ok(None),
            Some([a]) => f(a)
                .map(Some)
                .ok_or_else(|| self.type_error(column, expected, v)),
            _ => Err(self.type_error(column, expected, v)),
        }
    }

    fn required<T>(
        &self,
        column: &str,
        expected: &str,
        f: impl Fn(&'a Atom) -> Option<T>,
    ) -> Result<T> {
        let v = self.get(column)?;
        self.optional(column, expected, f)?
            .ok_or_else(|| self.type_error(column, expected, v))
    }

    /// A string column.
    pub fn string(&self, column: &str) -> Result<&'a str> {
        self.required(column, "a string", as_str)
    }

    /// An optional string (e.g. `Interface.error`).
    pub fn optional_string(&self, column: &str) -> Result<Option<&'a str>> {
        self.optional(column, "an optional string", as_str)
    }

    /// An integer column.
    pub fn integer(&self, column: &str) -> Result<i64> {
        self.required(column, "an integer", as_int)
    }

    /// An optional integer (e.g. `Interface.ofport`).
    pub fn optional_integer(&self, column: &str) -> Result<Option<i64>> {
        self.optional(column, "an optional integer", as_int)
    }

    /// A real column (an integer reads as a real too).
    pub fn real(&self, column: &str) -> Result<f64> {
        self.required(column, "a real", |a| match a {
            Atom::Real(r) => Some(*r),
            Atom::Integer(i) => Some(*i as f64),
            _ => None,
        })
    }

    /// A boolean column.
    pub fn boolean(&self, column: &str) -> Result<bool> {
        self.required(column, "a boolean", |a| match a {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    /// An optional boolean.
    pub fn optional_boolean(&self, column: &str) -> Result<Option<bool>> {
        self.optional(column, "an optional boolean", |a| match a {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    /// A UUID column (a reference to one row).
    pub fn uuid_ref(&self, column: &str) -> Result<&'a Uuid> {
        self.required(column, "a uuid", as_uuid)
    }

    /// A set of strings.
    pub fn strings(&self, column: &str) -> Result<Vec<&'a str>> {
        self.set(column, "a set of strings", as_str)
    }

    /// A set of integers.
    pub fn integers(&self, column: &str) -> Result<Vec<i64>> {
        self.set(column, "a set of integers", as_int)
    }

    /// A set of UUIDs (e.g. `Bridge.ports`).
    pub fn uuids(&self, column: &str) -> Result<Vec<&'a Uuid>> {
        self.set(column, "a set of uuids", as_uuid)
    }

    fn set<T>(
        &self,
        column: &str,
        expected: &str,
        f: impl Fn(&'a Atom) -> Option<T>,
    ) -> Result<Vec<T>> {
        let v = self.get(column)?;
        v.as_set()
            .and_then(|atoms| atoms.iter().map(&f).collect::<Option<Vec<_>>>())
            .ok_or_else(|| self.type_error(column, expected, v))
    }

    /// A map from string to string (e.g. `other_config`).
    pub fn string_map(&self, column: &str) -> Result<BTreeMap<&'a str, &'a str>> {
        self.map(column, "a map of string to string", as_str, as_str)
    }

    /// A map from string to integer (e.g. `Interface.statistics`).
    pub fn integer_map(&self, column: &str) -> Result<BTreeMap<&'a str, i64>> {
        self.map(column, "a map of string to integer", as_str, as_int)
    }

    fn map<K: Ord, V>(
        &self,
        column: &str,
        expected: &str,
        fk: impl Fn(&'a Atom) -> Option<K>,
        fv: impl Fn(&'a Atom) -> Option<V>,
    ) -> Result<BTreeMap<K, V>> {
        let v = self.get(column)?;
        v.as_map()
            .and_then(|pairs| {
                pairs
                    .iter()
                    .map(|(k, val)| Some((fk(k)?, fv(val)?)))
                    .collect::<Option<BTreeMap<_, _>>>()
            })
            .ok_or_else(|| self.type_error(column, expected, v))
    }
}

fn as_str(a: &Atom) -> Option<&str> {
    match a {
        Atom::String(s) => Some(s),
        _ => None,
    }
}

fn as_int(a: &Atom) -> Option<i64> {
    match a {
        Atom::Integer(i) => Some(*i),
        _ => None,
    }
}

fn as_uuid(a: &Atom) -> Option<&Uuid> {
    match a {
        Atom::Uuid(u) => Some(u),
        _ => None,
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
