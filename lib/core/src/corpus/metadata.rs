//! A document's own metadata: any fields a team attaches (department, product, language,
//! author, ACL group...), beside the financial fields every document has.
//!
//! A value is a string, a number, a boolean, a date (a string written exactly
//! `YYYY-MM-DD` that is a calendar day) or a list of strings; `null` means "absent".
//! Objects nest at most [`MAX_DEPTH`] levels and are stored flattened under dotted paths
//! (`{"author": {"team": "risk"}}` is the field `author.team`), so every field, however
//! deep, is one name in a filter. JSON is read and written nested, as the client sent it;
//! the index's binary files store the flat list.
//!
//! A field keeps one type across the documents of an index ([`MetadataSchema`]): a
//! document whose `pages` is a string where others hold a number is refused, so a filter's
//! type is never ambiguous.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::values::Date;

/// Objects nest at most this many levels inside `metadata` (`metadata.a.b.c` is the
/// deepest field).
pub const MAX_DEPTH: usize = 3;
/// The largest metadata accepted, in bytes of compact JSON.
pub const MAX_BYTES: usize = 16 * 1024;
/// The most fields (leaves, after flattening) one document's metadata may hold.
pub const MAX_FIELDS: usize = 128;
/// The longest field name, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// The longest list of strings.
pub const MAX_LIST_ITEMS: usize = 256;

/// The names of the built-in document fields, compared without case and underscores: a
/// metadata field may not take one (it is set at the top level of the document, and
/// filters already name it).
pub const BUILT_IN_FIELDS: [&str; 9] =
    ["ticker", "year", "quarter", "documenttype", "sourcetype", "filingtype", "documentid", "title", "publishedat"];

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// Text.
    Str(String),
    /// A finite number (integers included).
    Num(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A calendar day, written `YYYY-MM-DD`.
    Date(Date),
    /// A list of strings (tags, groups).
    List(Vec<String>),
}

/// The type of a metadata field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetaType {
    /// A string.
    String,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// A date.
    Date,
    /// A list of strings.
    StringList,
}

impl MetaType {
    /// The type's name in the API's words.
    pub fn name(self) -> &'static str {
        match self {
            MetaType::String => "a string",
            MetaType::Number => "a number",
            MetaType::Boolean => "a boolean",
            MetaType::Date => "a date",
            MetaType::StringList => "a list of strings",
        }
    }

    /// Whether values of this type are ordered (a range query applies).
    pub fn is_ordered(self) -> bool {
        matches!(self, MetaType::Number | MetaType::Date)
    }
}

impl fmt::Display for MetaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl MetaValue {
    /// The value's type.
    pub fn kind(&self) -> MetaType {
        match self {
            MetaValue::Str(_) => MetaType::String,
            MetaValue::Num(_) => MetaType::Number,
            MetaValue::Bool(_) => MetaType::Boolean,
            MetaValue::Date(_) => MetaType::Date,
            MetaValue::List(_) => MetaType::StringList,
        }
    }

    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            MetaValue::Str(s) => s.clone().into(),
            // Whole numbers are written as integers, as they were sent.
            MetaValue::Num(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => (*n as i64).into(),
            MetaValue::Num(n) => serde_json::Number::from_f64(*n).map_or(serde_json::Value::Null, Into::into),
            MetaValue::Bool(b) => (*b).into(),
            MetaValue::Date(d) => d.to_string().into(),
            MetaValue::List(l) => l.clone().into(),
        }
    }
}

/// A metadata problem: the field's path (`metadata.author.team`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataError {
    /// Where: `metadata` and the dotted path of the field.
    pub field: String,
    /// Why, in the API's words.
    pub reason: String,
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for MetadataError {}

fn err(field: &str, reason: impl Into<String>) -> MetadataError {
    MetadataError { field: field.to_string(), reason: reason.into() }
}

/// A document's metadata: fields by dotted path, sorted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata(BTreeMap<String, MetaValue>);

impl Metadata {
    /// No fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether there is no field.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The value of the field at dotted `path`.
    pub fn get(&self, path: &str) -> Option<&MetaValue> {
        self.0.get(path)
    }

    /// Every field, by dotted path.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetaValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Reads metadata from a JSON object, checking every rule of the module's doc (types,
    /// depth, names, sizes); an error names the field (`metadata.a.b`).
    pub fn from_json(value: &serde_json::Value) -> Result<Metadata, MetadataError> {
        let obj = match value {
            serde_json::Value::Null => return Ok(Metadata::new()),
            serde_json::Value::Object(o) => o,
            _ => return Err(err("metadata", "must be a JSON object of fields")),
        };
        let bytes = value.to_string().len();
        if bytes > MAX_BYTES {
            return Err(err("metadata", format!("is {bytes} bytes of JSON; at most {MAX_BYTES} are accepted")));
        }
        let mut out = BTreeMap::new();
        flatten(obj, "", 1, &mut out)?;
        if out.len() > MAX_FIELDS {
            return Err(err("metadata", format!("holds {} fields; at most {MAX_FIELDS} are accepted", out.len())));
        }
        Ok(Metadata(out))
    }

    /// The metadata as a JSON object, nested as it was sent.
    pub fn to_json(&self) -> serde_json::Value {
        let mut root = serde_json::Map::new();
        for (path, v) in &self.0 {
            let mut node = &mut root;
            let parts: Vec<&str> = path.split('.').collect();
            for p in &parts[..parts.len() - 1] {
                let child = node.entry(p.to_string()).or_insert_with(|| serde_json::Value::Object(Default::default()));
                if !child.is_object() {
                    *child = serde_json::Value::Object(Default::default());
                }
                node = child.as_object_mut().expect("an object");
            }
            node.insert(parts[parts.len() - 1].to_string(), v.to_json());
        }
        serde_json::Value::Object(root)
    }

    /// Metadata of these fields, unchecked (tests and tools; requests go through
    /// [`Metadata::from_json`]).
    pub fn from_fields(fields: impl IntoIterator<Item = (String, MetaValue)>) -> Self {
        Metadata(fields.into_iter().collect())
    }
}

/// Whether `key` is a name a field may have: 1-[`MAX_KEY_CHARS`] characters, no `.`, no
/// control character, not starting with `_` (the filter grammar's reserved keys).
fn check_key(key: &str, at: &str) -> Result<(), MetadataError> {
    let n = key.chars().count();
    if n == 0 || n > MAX_KEY_CHARS {
        return Err(err(at, format!("a field name must be 1 to {MAX_KEY_CHARS} characters, got {n}")));
    }
    if key.contains('.') || key.starts_with('_') || key.chars().any(char::is_control) {
        return Err(err(
            at,
            "a field name may not contain '.' or control characters, nor start with '_' (nest objects instead of dotted names)",
        ));
    }
    Ok(())
}

fn flatten(
    obj: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    depth: usize,
    out: &mut BTreeMap<String, MetaValue>,
) -> Result<(), MetadataError> {
    use serde_json::Value;
    for (k, v) in obj {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        let at = format!("metadata.{path}");
        check_key(k, &at)?;
        if prefix.is_empty() && BUILT_IN_FIELDS.contains(&k.to_ascii_lowercase().replace('_', "").as_str()) {
            return Err(err(&at, "is a built-in document field: set it beside metadata, not inside it"));
        }
        let value = match v {
            Value::Null => continue,
            Value::Bool(b) => MetaValue::Bool(*b),
            Value::Number(n) => match n.as_f64().filter(|x| x.is_finite()) {
                Some(x) => MetaValue::Num(x),
                None => return Err(err(&at, "must be a finite number")),
            },
            Value::String(s) => match s.parse::<Date>().ok().filter(|_| s.len() == 10) {
                Some(d) => MetaValue::Date(d),
                None => MetaValue::Str(s.clone()),
            },
            Value::Array(items) => {
                if items.len() > MAX_LIST_ITEMS {
                    return Err(err(&at, format!("holds {} items; at most {MAX_LIST_ITEMS}", items.len())));
                }
                let list = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        x.as_str().map(str::to_string).ok_or_else(|| {
                            err(&format!("{at}[{i}]"), "a list may hold only strings (a list of strings is one field)")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                MetaValue::List(list)
            }
            Value::Object(inner) => {
                if depth >= MAX_DEPTH {
                    return Err(err(&at, format!("nests deeper than {MAX_DEPTH} levels of objects")));
                }
                flatten(inner, &path, depth + 1, out)?;
                continue;
            }
        };
        out.insert(path, value);
    }
    Ok(())
}

/// The type of every metadata field of an index, as its documents hold them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataSchema(BTreeMap<String, MetaType>);

impl MetadataSchema {
    /// The schema of `documents`' metadata; the first type seen wins when documents
    /// disagree (indexes built before type checks).
    pub fn of<'a>(metadata: impl IntoIterator<Item = &'a Metadata>) -> Self {
        let mut s = MetadataSchema::default();
        for m in metadata {
            for (k, v) in m.iter() {
                s.0.entry(k.to_string()).or_insert(v.kind());
            }
        }
        s
    }

    /// The type of field `path`, if any document has it.
    pub fn get(&self, path: &str) -> Option<MetaType> {
        self.0.get(path).copied()
    }

    /// Whether no document has metadata.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every field with its type.
    pub fn iter(&self) -> impl Iterator<Item = (&str, MetaType)> {
        self.0.iter().map(|(k, t)| (k.as_str(), *t))
    }

    /// Checks that `metadata` keeps every field's type (a field new to the index is fine),
    /// naming the first field whose type differs.
    pub fn check(&self, metadata: &Metadata) -> Result<(), MetadataError> {
        for (k, v) in metadata.iter() {
            if let Some(t) = self.get(k) {
                if t != v.kind() {
                    return Err(err(
                        &format!("metadata.{k}"),
                        format!("is {t} in the other documents of this index, got {}", v.kind()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Adds `metadata`'s fields (after [`MetadataSchema::check`]).
    pub fn add(&mut self, metadata: &Metadata) {
        for (k, v) in metadata.iter() {
            self.0.entry(k.to_string()).or_insert(v.kind());
        }
    }
}

/// How the index's binary files store a value (an externally tagged enum).
#[derive(Serialize, Deserialize)]
enum StoredValue {
    Str(String),
    Num(f64),
    Bool(bool),
    Date(String),
    List(Vec<String>),
}

impl Serialize for Metadata {
    /// JSON: the nested object; binary formats: the flat list of `(path, value)`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return self.to_json().serialize(s);
        }
        let flat: Vec<(&str, StoredValue)> = self
            .0
            .iter()
            .map(|(k, v)| {
                let stored = match v {
                    MetaValue::Str(x) => StoredValue::Str(x.clone()),
                    MetaValue::Num(x) => StoredValue::Num(*x),
                    MetaValue::Bool(x) => StoredValue::Bool(*x),
                    MetaValue::Date(x) => StoredValue::Date(x.to_string()),
                    MetaValue::List(x) => StoredValue::List(x.clone()),
                };
                (k.as_str(), stored)
            })
            .collect();
        flat.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    /// JSON: a nested object checked as [`Metadata::from_json`] checks it; binary formats:
    /// the flat list.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let v = serde_json::Value::deserialize(d)?;
            return Metadata::from_json(&v).map_err(D::Error::custom);
        }
        let flat = Vec::<(String, StoredValue)>::deserialize(d)?;
        let mut out = BTreeMap::new();
        for (k, v) in flat {
            let value = match v {
                StoredValue::Str(x) => MetaValue::Str(x),
                StoredValue::Num(x) => MetaValue::Num(x),
                StoredValue::Bool(x) => MetaValue::Bool(x),
                StoredValue::Date(x) => MetaValue::Date(x.parse().map_err(D::Error::custom)?),
                StoredValue::List(x) => MetaValue::List(x),
            };
            out.insert(k, value);
        }
        Ok(Metadata(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_of_every_type_round_trip_through_json_and_bincode() {
        let sent = json!({
            "department": "legal", "pages": 12, "ratio": 0.5, "draft": false, "reviewed": "2024-02-29",
            "groups": ["acl-risk", "acl-all"], "author": {"name": "Ada", "team": {"lead": "Bo"}}, "gone": null
        });
        let m = Metadata::from_json(&sent).unwrap();
        assert_eq!(m.get("pages"), Some(&MetaValue::Num(12.0)));
        assert_eq!(m.get("reviewed").map(MetaValue::kind), Some(MetaType::Date));
        assert_eq!(m.get("author.team.lead"), Some(&MetaValue::Str("Bo".into())));
        assert_eq!(m.get("gone"), None, "null is absent");
        let mut expected = sent.clone();
        expected.as_object_mut().unwrap().remove("gone");
        assert_eq!(m.to_json(), expected, "JSON comes back nested, as sent");
        let bin = bincode::serialize(&m).unwrap();
        assert_eq!(bincode::deserialize::<Metadata>(&bin).unwrap(), m);
        let js = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Metadata>(&js).unwrap(), m);
        // Not a calendar day, or not exactly YYYY-MM-DD: a string.
        let m = Metadata::from_json(&json!({"a": "2024-02-30", "b": "2024-02-29T10:00:00Z"})).unwrap();
        assert_eq!((m.get("a").unwrap().kind(), m.get("b").unwrap().kind()), (MetaType::String, MetaType::String));
    }

    #[test]
    fn bad_metadata_names_the_field_and_the_rule() {
        let e = |v: serde_json::Value| Metadata::from_json(&v).unwrap_err();
        assert_eq!(e(json!([1])).field, "metadata");
        assert_eq!(e(json!({"a": {"b": {"c": {"d": 1}}}})).field, "metadata.a.b.c");
        assert!(e(json!({"a": {"b": {"c": {"d": 1}}}})).reason.contains("deeper than 3"));
        assert!(Metadata::from_json(&json!({"a": {"b": {"c": 1}}})).is_ok(), "three levels are fine");
        assert_eq!(e(json!({"tags": ["a", 2]})).field, "metadata.tags[1]");
        assert_eq!(e(json!({"a.b": 1})).field, "metadata.a.b");
        assert_eq!(e(json!({"_x": 1})).field, "metadata._x");
        assert_eq!(e(json!({"": 1})).field, "metadata.");
        assert_eq!(
            e(json!({"Ticker": "X"})).reason,
            "is a built-in document field: set it beside metadata, not inside it"
        );
        assert_eq!(e(json!({"published_at": "X"})).field, "metadata.published_at");
        let big = "x".repeat(MAX_BYTES);
        assert!(e(json!({ "note": big })).reason.contains("bytes of JSON"));
        let many: serde_json::Map<String, serde_json::Value> =
            (0..=MAX_FIELDS).map(|i| (format!("f{i}"), 1.into())).collect();
        assert!(e(serde_json::Value::Object(many)).reason.contains("fields"));
        assert_eq!(e(json!({"k": {"x\u{7}": 1}})).field, "metadata.k.x\u{7}");
    }

    #[test]
    fn a_field_keeps_its_type_across_documents() {
        let a = Metadata::from_json(&json!({"pages": 3, "team": "risk"})).unwrap();
        let mut schema = MetadataSchema::of([&a]);
        let same = Metadata::from_json(&json!({"pages": 9, "new": true})).unwrap();
        assert!(schema.check(&same).is_ok());
        schema.add(&same);
        assert_eq!(schema.get("new"), Some(MetaType::Boolean));
        let changed = Metadata::from_json(&json!({"pages": "nine"})).unwrap();
        let e = schema.check(&changed).unwrap_err();
        assert_eq!(e.to_string(), "metadata.pages: is a number in the other documents of this index, got a string");
    }
}
