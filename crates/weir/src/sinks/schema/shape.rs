//! The shapes a schema gives data: the Arrow types of its columns, the JSON shape its
//! pointers describe (what arrow-json decodes), and taking a column out of a decoded
//! batch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, ListArray, RecordBatch, Scalar, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{ArrowError, DataType, Field, Fields, SchemaRef, TimeUnit};

use super::tape::{JSON, TIME};
use super::types::{Column, ColumnType};

pub(super) fn utc() -> Option<Arc<str>> {
    Some("UTC".into())
}

/// The Arrow type a column is decoded as (with the metadata that picks a decoder) and
/// stored as.
pub(super) fn data_type(kind: &ColumnType, decode: bool) -> (DataType, HashMap<String, String>) {
    let mut metadata = HashMap::new();
    let t = match kind {
        ColumnType::Bool => DataType::Boolean,
        ColumnType::Int32 => DataType::Int32,
        ColumnType::Int64 => DataType::Int64,
        ColumnType::UInt64 => DataType::UInt64,
        ColumnType::Float32 => DataType::Float32,
        ColumnType::Float64 => DataType::Float64,
        ColumnType::String => DataType::Utf8,
        ColumnType::Date => DataType::Date32,
        ColumnType::Timestamp(format) => {
            metadata.insert(TIME.to_owned(), format.text().to_owned());
            DataType::Timestamp(TimeUnit::Microsecond, utc())
        }
        ColumnType::Json => {
            metadata.insert(JSON.to_owned(), String::new());
            DataType::Utf8
        }
        ColumnType::List(inner) => {
            let (t, m) = data_type(inner, decode);
            let item = Field::new("item", t, true);
            let item = if decode { item.with_metadata(m) } else { item };
            DataType::List(Arc::new(item))
        }
        ColumnType::Struct(children) => {
            let fields: Vec<Field> = children.iter().map(output_field).collect();
            DataType::Struct(Fields::from(fields))
        }
    };
    (t, if decode { metadata } else { HashMap::new() })
}

/// A declared column's field in the files.
pub fn output_field(c: &Column) -> Field {
    Field::new(&c.name, data_type(&c.kind, false).0, !c.required)
}

/// The JSON shape the pointers describe: objects down to the decoded values.
#[derive(Debug)]
pub(super) enum Node {
    /// A decoded value.
    Leaf(Field),
    /// An object, by key.
    Object(Vec<(String, Node)>),
}

impl Node {
    pub(super) fn insert(&mut self, path: &[String], field: Field) {
        let Node::Object(children) = self else {
            return; // overlaps are refused when the configuration is read
        };
        let (key, rest) = path.split_first().expect("a pointer has a key");
        if rest.is_empty() {
            children.push((key.clone(), Node::Leaf(field.with_name(key.clone()))));
            return;
        }
        let i = match children.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                children.push((key.clone(), Node::Object(Vec::new())));
                children.len() - 1
            }
        };
        children[i].1.insert(rest, field);
    }

    pub(super) fn fields(&self) -> Fields {
        let Node::Object(children) = self else {
            unreachable!("the root is an object")
        };
        children
            .iter()
            .map(|(key, node)| match node {
                Node::Leaf(field) => field.clone(),
                Node::Object(_) => Field::new(key, DataType::Struct(node.fields()), true),
            })
            .collect()
    }
}

/// Every leaf column of `columns` (structs opened) into `root`, at its absolute path.
pub(super) fn add_leaves(root: &mut Node, columns: &[Column], prefix: &[String]) {
    for c in columns {
        let mut path = prefix.to_vec();
        path.extend(c.path.iter().cloned());
        match &c.kind {
            ColumnType::Struct(children) => add_leaves(root, children, &path),
            kind => {
                let (t, metadata) = data_type(kind, true);
                root.insert(&path, Field::new("_", t, true).with_metadata(metadata));
            }
        }
    }
}

/// A row of nulls of `schema` (the place of a rejected record until it is filtered).
pub(super) fn null_row(schema: &SchemaRef) -> RecordBatch {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| arrow_array::new_null_array(f.data_type(), 1))
        .collect();
    RecordBatch::try_new(Arc::clone(schema), columns).expect("nullable fields take nulls")
}

/// The decoded value at `path` under `root` (absent under an absent object).
pub(super) fn value_at(root: &StructArray, path: &[String]) -> Option<ArrayRef> {
    let (key, rest) = path.split_first()?;
    let child = root.column_by_name(key)?;
    if rest.is_empty() {
        return Some(Arc::clone(child));
    }
    let nested = child.as_struct_opt()?;
    let value = value_at(nested, rest)?;
    let Some(parent) = nested.nulls() else {
        return Some(value);
    };
    let nulls = NullBuffer::union(value.nulls(), Some(parent));
    let data = value.to_data().into_builder().nulls(nulls).build().ok()?;
    Some(arrow_array::make_array(data))
}

/// Which rows have the object at `path` (a struct column's presence).
pub(super) fn object_at(root: &StructArray, path: &[String]) -> Option<NullBuffer> {
    let mut current = root.clone();
    let mut nulls: Option<NullBuffer> = None;
    for key in path {
        let child = current.column_by_name(key)?.as_struct_opt()?.clone();
        nulls = NullBuffer::union(nulls.as_ref(), child.nulls());
        current = child;
    }
    nulls
}

/// The array without the decode metadata in its type (a list's item field).
pub(super) fn plain(array: ArrayRef, kind: &ColumnType) -> ArrayRef {
    match (kind, array.as_list_opt::<i32>()) {
        (ColumnType::List(_), Some(list)) => {
            let (field, offsets, values, nulls) = list.clone().into_parts();
            let field = Arc::new(Field::new(field.name(), field.data_type().clone(), true));
            Arc::new(ListArray::new(field, offsets, values, nulls))
        }
        _ => array,
    }
}

/// `array` with its nulls replaced by `default` (a one-value array).
pub(super) fn fill(array: &ArrayRef, default: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let present = BooleanArray::from(
        (0..array.len())
            .map(|i| array.is_valid(i))
            .collect::<Vec<_>>(),
    );
    arrow_select::zip::zip(&present, array, &Scalar::new(Arc::clone(default)))
}

/// The declared column (name, pointer) that `keys` (arrow-json's nested field names)
/// lead to.
pub(super) fn find_column(
    columns: &[Column],
    keys: &[&str],
    prefix: &[String],
) -> Option<(String, String)> {
    for c in columns {
        let mut path = prefix.to_vec();
        path.extend(c.path.iter().cloned());
        let matches = path.len() <= keys.len() && path.iter().zip(keys).all(|(a, b)| a == b);
        if !matches {
            continue;
        }
        if let ColumnType::Struct(children) = &c.kind
            && let Some(found) = find_column(children, keys, &path)
        {
            return Some(found);
        }
        return Some((c.name.clone(), format!("/{}", path.join("/"))));
    }
    None
}

/// A JSON value's type, for a message.
pub(super) fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}
