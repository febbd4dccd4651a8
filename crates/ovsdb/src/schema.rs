//! A minimal reader of OVSDB database schemas (RFC 7047 section 3.2):
//! tables, columns and their types, enough to check names and shapes.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::error::{abbreviate, Error, Result};
use crate::value::{Atom, Value};

/// The atomic types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicType {
    /// `integer`
    Integer,
    /// `real`
    Real,
    /// `boolean`
    Boolean,
    /// `string`
    String,
    /// `uuid`
    Uuid,
}

impl AtomicType {
    fn parse(s: &str) -> Result<AtomicType> {
        Ok(match s {
            "integer" => AtomicType::Integer,
            "real" => AtomicType::Real,
            "boolean" => AtomicType::Boolean,
            "string" => AtomicType::String,
            "uuid" => AtomicType::Uuid,
            _ => return Err(Error::Schema(format!("unknown atomic type {s:?}"))),
        })
    }
}

/// A column type's key or value type, with its constraints.
#[derive(Clone, Debug, PartialEq)]
pub struct BaseType {
    /// The atomic type.
    pub atomic: AtomicType,
    /// The allowed values, when restricted.
    pub enum_values: Option<Vec<Atom>>,
    /// For `uuid`: the table the UUID refers to.
    pub ref_table: Option<String>,
    /// For `uuid` with a `refTable`: whether the reference is weak.
    pub weak: bool,
    /// `minInteger` / `maxInteger`.
    pub integer_range: (Option<i64>, Option<i64>),
    /// `minLength` / `maxLength` of strings.
    pub length_range: (Option<u64>, Option<u64>),
}

impl BaseType {
    fn parse(json: &Json) -> Result<BaseType> {
        let atomic_of = |j: &Json| {
            j.as_str()
                .ok_or_else(|| Error::Schema(format!("bad base type {}", abbreviate(json))))
                .and_then(AtomicType::parse)
        };
        let mut base = BaseType {
            atomic: AtomicType::String,
            enum_values: None,
            ref_table: None,
            weak: false,
            integer_range: (None, None),
            length_range: (None, None),
        };
        match json {
            Json::String(_) => base.atomic = atomic_of(json)?,
            Json::Object(o) => {
                base.atomic = atomic_of(o.get("type").unwrap_or(&Json::Null))?;
                if let Some(e) = o.get("enum") {
                    let v = Value::from_json(e)
                        .map_err(|err| Error::Schema(format!("bad enum: {err}")))?;
                    base.enum_values = v.as_set().map(<[Atom]>::to_vec);
                }
                base.ref_table = o.get("refTable").and_then(Json::as_str).map(String::from);
                base.weak = o.get("refType").and_then(Json::as_str) == Some("weak");
                base.integer_range = (
                    o.get("minInteger").and_then(Json::as_i64),
                    o.get("maxInteger").and_then(Json::as_i64),
                );
                base.length_range = (
                    o.get("minLength").and_then(Json::as_u64),
                    o.get("maxLength").and_then(Json::as_u64),
                );
            }
            _ => return Err(Error::Schema(format!("bad base type {}", abbreviate(json)))),
        }
        Ok(base)
    }
}

/// A column's type: a key type, for maps a value type, and how many
/// elements (`min`..=`max`) it holds. A scalar is `min = max = 1`; an
/// optional value `min = 0, max = 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnType {
    /// The key (or only) type.
    pub key: BaseType,
    /// The value type, for a map.
    pub value: Option<BaseType>,
    /// The fewest elements (0 or 1).
    pub min: u64,
    /// The most elements; `None` is unlimited.
    pub max: Option<u64>,
}

impl ColumnType {
    /// Reads a column's `type`.
    pub fn parse(json: &Json) -> Result<ColumnType> {
        match json {
            Json::String(_) => Ok(ColumnType {
                key: BaseType::parse(json)?,
                value: None,
                min: 1,
                max: Some(1),
            }),
            Json::Object(o) => {
                let key = BaseType::parse(o.get("key").ok_or_else(|| {
                    Error::Schema(format!("type without key: {}", abbreviate(json)))
                })?)?;
                let value = o.get("value").map(BaseType::parse).transpose()?;
                let min = match o.get("min") {
                    None => 1,
                    Some(m) => m
                        .as_u64()
                        .ok_or_else(|| Error::Schema(format!("bad min in {}", abbreviate(json))))?,
                };
                let max = match o.get("max") {
                    None => Some(1),
                    Some(Json::String(s)) if s == "unlimited" => None,
                    Some(m) => Some(m.as_u64().ok_or_else(|| {
                        Error::Schema(format!("bad max in {}", abbreviate(json)))
                    })?),
                };
                if max.is_some_and(|m| m < min || m == 0) {
                    return Err(Error::Schema(format!(
                        "bad min/max in {}",
                        abbreviate(json)
                    )));
                }
                Ok(ColumnType {
                    key,
                    value,
                    min,
                    max,
                })
            }
            _ => Err(Error::Schema(format!(
                "bad column type {}",
                abbreviate(json)
            ))),
        }
    }

    /// Whether the column is a map.
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }

    /// Whether the column is a set of more than one element (or a map).
    pub fn is_set(&self) -> bool {
        self.max != Some(1)
    }

    /// Whether the column holds exactly one atom.
    pub fn is_scalar(&self) -> bool {
        self.min == 1 && self.max == Some(1) && self.value.is_none()
    }

    /// Whether the column holds zero or one atom.
    pub fn is_optional(&self) -> bool {
        self.min == 0 && self.max == Some(1) && self.value.is_none()
    }
}

/// A column.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnSchema {
    /// Its type.
    pub ty: ColumnType,
    /// Whether it is not kept on disk.
    pub ephemeral: bool,
    /// Whether it may change after the row is inserted.
    pub mutable: bool,
}

/// A table.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSchema {
    /// The columns, by name (without the implicit `_uuid` and
    /// `_version`).
    pub columns: BTreeMap<String, ColumnSchema>,
    /// Whether rows live without references to them.
    pub is_root: bool,
    /// The most rows, if limited.
    pub max_rows: Option<u64>,
    /// Each index: the columns that are unique together.
    pub indexes: Vec<Vec<String>>,
}

impl TableSchema {
    /// Whether the table has the column; `_uuid` and `_version` count.
    pub fn has_column(&self, column: &str) -> bool {
        column == "_uuid" || column == "_version" || self.columns.contains_key(column)
    }
}

/// A database schema.
#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseSchema {
    /// The database's name, e.g. `Open_vSwitch`.
    pub name: String,
    /// The schema's version, e.g. `8.3.1`.
    pub version: Option<String>,
    /// The tables, by name.
    pub tables: BTreeMap<String, TableSchema>,
}

impl DatabaseSchema {
    /// Reads a schema's JSON (`get_schema`'s result or a `.ovsschema`
    /// file).
    pub fn from_json(json: &Json) -> Result<DatabaseSchema> {
        let obj = json
            .as_object()
            .ok_or_else(|| Error::Schema("a schema is not a JSON object".into()))?;
        let name = obj
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::Schema("schema without a name".into()))?
            .to_string();
        let version = obj.get("version").and_then(Json::as_str).map(String::from);
        let tables_json = obj
            .get("tables")
            .and_then(Json::as_object)
            .ok_or_else(|| Error::Schema(format!("schema {name} has no tables object")))?;
        let mut tables = BTreeMap::new();
        for (tname, t) in tables_json {
            let table = Self::parse_table(t)
                .map_err(|e| Error::Schema(format!("table {tname}: {}", strip_prefix(&e))))?;
            tables.insert(tname.clone(), table);
        }
        Ok(DatabaseSchema {
            name,
            version,
            tables,
        })
    }

    /// Reads a schema's text.
    pub fn parse(text: &str) -> Result<DatabaseSchema> {
        let json: Json = serde_json::from_str(text).map_err(|e| Error::Schema(e.to_string()))?;
        Self::from_json(&json)
    }

    fn parse_table(t: &Json) -> Result<TableSchema> {
        let cols = t
            .get("columns")
            .and_then(Json::as_object)
            .ok_or_else(|| Error::Schema("no columns object".into()))?;
        let mut columns = BTreeMap::new();
        for (cname, c) in cols {
            let ty = c
                .get("type")
                .ok_or_else(|| Error::Schema(format!("column {cname} has no type")))
                .and_then(ColumnType::parse)
                .map_err(|e| Error::Schema(format!("column {cname}: {}", strip_prefix(&e))))?;
            columns.insert(
                cname.clone(),
                ColumnSchema {
                    ty,
                    ephemeral: c.get("ephemeral").and_then(Json::as_bool).unwrap_or(false),
                    mutable: c.get("mutable").and_then(Json::as_bool).unwrap_or(true),
                },
            );
        }
        let indexes = t
            .get("indexes")
            .and_then(Json::as_array)
            .map(|ixs| {
                ixs.iter()
                    .filter_map(Json::as_array)
                    .map(|ix| {
                        ix.iter()
                            .filter_map(Json::as_str)
                            .map(String::from)
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(TableSchema {
            columns,
            is_root: t.get("isRoot").and_then(Json::as_bool).unwrap_or(false),
            max_rows: t.get("maxRows").and_then(Json::as_u64),
            indexes,
        })
    }

    /// The table, or [`Error::NoSuchTable`].
    pub fn table(&self, table: &str) -> Result<&TableSchema> {
        self.tables.get(table).ok_or_else(|| Error::NoSuchTable {
            table: table.to_string(),
        })
    }

    /// The column, or [`Error::NoSuchTable`] / [`Error::NoSuchColumn`].
    pub fn column(&self, table: &str, column: &str) -> Result<&ColumnSchema> {
        self.table(table)?
            .columns
            .get(column)
            .ok_or_else(|| Error::NoSuchColumn {
                table: table.to_string(),
                column: column.to_string(),
            })
    }

    /// Checks that the table has the column (`_uuid`, `_version` too).
    pub fn check_column(&self, table: &str, column: &str) -> Result<()> {
        if self.table(table)?.has_column(column) {
            Ok(())
        } else {
            Err(Error::NoSuchColumn {
                table: table.to_string(),
                column: column.to_string(),
            })
        }
    }
}

fn strip_prefix(e: &Error) -> String {
    match e {
        Error::Schema(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> DatabaseSchema {
        DatabaseSchema::from_json(&json!({
            "name": "Test", "version": "1.2.3",
            "tables": {
                "Bridge": {
                    "isRoot": true,
                    "indexes": [["name"]],
                    "columns": {
                        "name": {"type": "string", "mutable": false},
                        "ports": {"type": {"key": {"type": "uuid", "refTable": "Port"},
                                           "min": 0, "max": "unlimited"}},
                        "ofport": {"type": {"key": "integer", "min": 0, "max": 1}},
                        "stats": {"type": {"key": "string", "value": "integer",
                                           "min": 0, "max": "unlimited"}, "ephemeral": true},
                        "state": {"type": {"key": {"type": "string",
                                  "enum": ["set", ["up", "down"]]}, "min": 0, "max": 1}},
                        "req": {"type": {"key": {"type": "integer", "minInteger": 1,
                                  "maxInteger": 65279}, "min": 0, "max": 1}}
                    }
                },
                "Port": {"columns": {"name": {"type": "string"}}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn reads_tables_columns_and_types() {
        let s = schema();
        assert_eq!(s.name, "Test");
        assert_eq!(s.version.as_deref(), Some("1.2.3"));
        let b = s.table("Bridge").unwrap();
        assert!(b.is_root);
        assert_eq!(b.indexes, vec![vec!["name".to_string()]]);
        let name = &b.columns["name"];
        assert!(name.ty.is_scalar() && !name.mutable);
        let ports = &b.columns["ports"].ty;
        assert!(ports.is_set() && !ports.is_map());
        assert_eq!((ports.min, ports.max), (0, None));
        assert_eq!(ports.key.atomic, AtomicType::Uuid);
        assert_eq!(ports.key.ref_table.as_deref(), Some("Port"));
        assert!(b.columns["ofport"].ty.is_optional());
        let stats = &b.columns["stats"];
        assert!(stats.ty.is_map() && stats.ephemeral);
        assert_eq!(stats.ty.value.as_ref().unwrap().atomic, AtomicType::Integer);
        assert_eq!(
            b.columns["state"].ty.key.enum_values,
            Some(vec![Atom::from("up"), Atom::from("down")])
        );
        assert_eq!(
            b.columns["req"].ty.key.integer_range,
            (Some(1), Some(65279))
        );
    }

    #[test]
    fn names_missing_tables_and_columns() {
        let s = schema();
        assert!(s.check_column("Bridge", "_uuid").is_ok());
        let e = s.check_column("Bridge", "nosuch").unwrap_err();
        assert_eq!(e.to_string(), "table Bridge has no column nosuch");
        let e = s.column("Nope", "name").unwrap_err();
        assert_eq!(e.to_string(), "database has no table Nope");
    }

    #[test]
    fn malformed_schemas_are_errors() {
        for j in [
            json!([]),
            json!({"tables": {}}),
            json!({"name": "x"}),
            json!({"name": "x", "tables": {"T": {}}}),
            json!({"name": "x", "tables": {"T": {"columns": {"c": {}}}}}),
            json!({"name": "x", "tables": {"T": {"columns": {"c": {"type": "int"}}}}}),
            json!({"name": "x", "tables": {"T": {"columns": {"c": {"type": {"key": "string", "min": 2, "max": 1}}}}}}),
            json!({"name": "x", "tables": {"T": {"columns": {"c": {"type": {"min": 0}}}}}}),
        ] {
            let e = DatabaseSchema::from_json(&j).unwrap_err();
            assert!(matches!(e, Error::Schema(_)), "{j}: {e}");
        }
        let e = DatabaseSchema::from_json(
            &json!({"name": "x", "tables": {"T": {"columns": {"c": {"type": "int"}}}}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("table T: column c"), "{e}");
    }

    #[test]
    fn reads_the_installed_vswitch_schema() {
        let path = "/usr/share/openvswitch/vswitch.ovsschema";
        let Ok(text) = std::fs::read_to_string(path) else {
            eprintln!("skipped: {path} not installed");
            return;
        };
        let s = DatabaseSchema::parse(&text).unwrap();
        assert_eq!(s.name, "Open_vSwitch");
        let iface = s.table("Interface").unwrap();
        assert!(iface.columns["ofport"].ty.is_optional());
        assert!(iface.columns["statistics"].ty.is_map());
        assert!(s.table("Bridge").unwrap().columns["ports"].ty.is_set());
        assert!(s.column("Open_vSwitch", "cur_cfg").unwrap().ty.is_scalar());
    }
}
