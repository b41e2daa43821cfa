//! The `SearchFilters` grammar of the knowledge-base Retrieve API, compiled once into a
//! predicate over document metadata that the engine applies before ranking.
//!
//! `SearchFilters` is a list of sub-groups, ANDed. In a sub-group every key but the
//! reserved ones names a metadata field, and its value says the kind of query:
//!
//! | value | query |
//! |---|---|
//! | a string or a number | singleQuery: equal (strings case-insensitively) |
//! | an array of strings/numbers | multiQuery: equal to any |
//! | `{"like": "pat"}` | logicQuery: `pat` with `%` wildcards (none: a prefix match) |
//! | `{"gt"|"gte"|"lt"|"lte"|"eq"|"neq": v, ...}` | rangeQuery: every bound holds |
//!
//! `_operator` (`AND`/`OR`, any case, default AND) joins the sub-group's fields;
//! `_conditions` is a list of nested sub-groups, joined with `_conditions_operator` (default:
//! the group's `_operator`), and the result is joined to the fields with `_operator`.
//! Fields: `ticker`, `year`, `quarter`, `documentType`, `filingType`, `documentId`,
//! `title`, `publishedAt` (snake_case accepted), and every metadata field of the index by
//! its dotted path (`department`, `author.team`; `metadata.department` also works).
//!
//! Metadata fields are typed by the index ([`MetadataSchema`]): a value of another type, a
//! range (`gt`, `gte`, `lt`, `lte`) on a field that is not a number or a date, or a field
//! no document of the index has is a 400 naming it. On a list of strings, equal means
//! "holds", a multiQuery "holds any" and a `like` "holds one that matches".

use std::sync::Arc;

use serde_json::{Map, Value};
use sextant_core::corpus::{Date, Document, MetaType, MetaValue, MetadataSchema, Quarter};
use sextant_core::index::Bitset;
use sextant_core::pipeline::IndexView;

use crate::envelope::ApiError;

/// A compiled condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// All hold (an empty list holds).
    All(Vec<Condition>),
    /// Any holds (an empty list holds: nothing to choose from means no constraint).
    Any(Vec<Condition>),
    /// One field test.
    Field {
        /// Which field.
        field: Field,
        /// The test.
        test: Test,
    },
}

/// A field a filter tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// Ticker.
    Ticker,
    /// Fiscal year.
    Year,
    /// Fiscal quarter.
    Quarter,
    /// Document type.
    DocumentType,
    /// Filing form.
    FilingType,
    /// Document id.
    DocumentId,
    /// Title.
    Title,
    /// Publication date.
    PublishedAt,
    /// A metadata field of the index: its dotted path and type.
    Meta(String, MetaType),
}

/// A scalar of the grammar.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean (metadata only).
    Bool(bool),
}

/// A test on one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Equal to any of these.
    In(Vec<Scalar>),
    /// Matches a `%` pattern (case-insensitive).
    Like(String),
    /// `(op, bound)` pairs that must all hold.
    Range(Vec<(RangeOp, Scalar)>),
}

/// A comparison of a range query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOp {
    /// `>`.
    Gt,
    /// `>=`.
    Gte,
    /// `<`.
    Lt,
    /// `<=`.
    Lte,
    /// `==`.
    Eq,
    /// `!=`.
    Neq,
}

fn field_of(name: &str) -> Option<Field> {
    Some(match name.to_ascii_lowercase().replace('_', "").as_str() {
        "ticker" => Field::Ticker,
        "year" => Field::Year,
        "quarter" => Field::Quarter,
        "documenttype" | "sourcetype" => Field::DocumentType,
        "filingtype" => Field::FilingType,
        "documentid" => Field::DocumentId,
        "title" => Field::Title,
        "publishedat" => Field::PublishedAt,
        _ => return None,
    })
}

const FIELDS: &str = "ticker, year, quarter, documentType, filingType, documentId, title, publishedAt";

fn scalar(v: &Value, at: &str) -> Result<Scalar, ApiError> {
    match v {
        Value::String(s) => Ok(Scalar::Str(s.clone())),
        Value::Number(n) => Ok(Scalar::Num(n.as_f64().unwrap_or(f64::NAN))),
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        other => Err(ApiError::invalid(at, format!("expected a string or a number, got {}", shown(other)))),
    }
}

/// A value of metadata field `name` of type `t`, checked against the type.
fn typed_meta(name: &str, t: MetaType, v: &Value, at: &str) -> Result<Scalar, ApiError> {
    let wrong = || ApiError::invalid(at, format!("{name} is {t} in this index, got {}", shown(v)));
    match (t, v) {
        (MetaType::Number, Value::Number(n)) => Ok(Scalar::Num(n.as_f64().unwrap_or(f64::NAN))),
        (MetaType::Boolean, Value::Bool(b)) => Ok(Scalar::Bool(*b)),
        (MetaType::String | MetaType::StringList, Value::String(s)) => Ok(Scalar::Str(s.clone())),
        (MetaType::Date, Value::String(s)) => match s.parse::<Date>() {
            Ok(d) => Ok(Scalar::Str(d.to_string())),
            Err(_) => {
                Err(ApiError::invalid(at, format!("{name} is a date in this index: give YYYY-MM-DD, got {}", shown(v))))
            }
        },
        _ => Err(wrong()),
    }
}

/// A value of `field`, checked as the other dialects check it: a year is an integer (a
/// number or ASCII digits), a date a calendar day `YYYY-MM-DD` (the `time` crate's
/// calendar: `2024-02-31` is refused), a quarter `Q1`-`Q4` (or 1-4). Others are any
/// string or number.
fn typed(field: &Field, v: &Value, at: &str) -> Result<Scalar, ApiError> {
    let raw = scalar(v, at)?;
    match (field, &raw) {
        (Field::Year, Scalar::Num(n)) if n.fract() == 0.0 && n.abs() < 1e6 => Ok(raw),
        (Field::Year, Scalar::Str(t)) if !t.is_empty() && t.len() <= 6 && t.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Scalar::Num(t.parse::<f64>().unwrap_or(f64::NAN)))
        }
        (Field::Year, _) => Err(ApiError::invalid(at, format!("must be a year (an integer), got {}", shown(v)))),
        (Field::PublishedAt, Scalar::Str(t)) => match t.parse::<Date>() {
            Ok(d) => Ok(Scalar::Str(d.to_string())),
            Err(_) => Err(ApiError::invalid(at, format!("must be a date YYYY-MM-DD, got {}", shown(v)))),
        },
        (Field::PublishedAt, _) => Err(ApiError::invalid(at, format!("must be a date YYYY-MM-DD, got {}", shown(v)))),
        (Field::Quarter, Scalar::Num(n)) if (1.0..=4.0).contains(n) && n.fract() == 0.0 => {
            Ok(Scalar::Str(format!("Q{n}")))
        }
        (Field::Quarter, Scalar::Str(t)) if t.parse::<Quarter>().is_ok() => {
            Ok(Scalar::Str(t.parse::<Quarter>().map(|q| q.to_string()).unwrap_or_default()))
        }
        (Field::Quarter, _) => Err(ApiError::invalid(at, format!("must be one of Q1, Q2, Q3, Q4, got {}", shown(v)))),
        (Field::Meta(name, t), _) => typed_meta(name, *t, v, at),
        (_, Scalar::Bool(_)) => Err(ApiError::invalid(at, format!("expected a string or a number, got {}", shown(v)))),
        _ => Ok(raw),
    }
}

/// A JSON value as an error message echoes it: at most 40 characters.
fn shown(v: &Value) -> String {
    match v {
        // A string is quoted once, as the request wrote it.
        Value::String(s) => crate::envelope::echoed(s, 40),
        other => crate::envelope::echoed_as_is(&other.to_string(), 40),
    }
}

fn operator(v: Option<&Value>, at: &str, default: bool) -> Result<bool, ApiError> {
    match v {
        None => Ok(default),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("and") => Ok(true),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("or") => Ok(false),
        Some(other) => Err(ApiError::invalid(at, format!("must be \"AND\" or \"OR\", got {other}"))),
    }
}

/// Compiles `SearchFilters` (the JSON array) against the metadata fields of an index;
/// `at` is the field path for errors.
pub fn compile(filters: &Value, at: &str, schema: &MetadataSchema) -> Result<Condition, ApiError> {
    let groups = filters.as_array().ok_or_else(|| ApiError::invalid(at, "must be an array of filter groups"))?;
    let compiled =
        groups.iter().enumerate().map(|(i, g)| group(g, &format!("{at}[{i}]"), 0, schema)).collect::<Result<_, _>>()?;
    Ok(Condition::All(compiled))
}

/// Compiles one group of the grammar (an object of field conditions, with `_operator` and
/// `_conditions`): the `metadata` filter of `/v1/search` and `/v1/retrieve`.
pub fn compile_group(filter: &Value, at: &str, schema: &MetadataSchema) -> Result<Condition, ApiError> {
    group(filter, at, 0, schema)
}

/// The documents of `index` that `cond` admits, as a set of document ordinals (the
/// engine's [`SearchRequest::documents`](sextant_core::pipeline::SearchRequest)).
pub fn admitted(cond: &Condition, index: &dyn IndexView) -> Arc<Bitset> {
    let mut set = Bitset::empty(index.document_count());
    for (i, d) in index.documents().enumerate() {
        if cond.matches(d) {
            set.insert(i);
        }
    }
    Arc::new(set)
}

/// The `metadata` filter of `/v1/search` or `/v1/retrieve` (at `at`), compiled against
/// `index`'s metadata fields; `None` when absent.
pub fn metadata_filter(filter: Option<&Value>, at: &str, index: &dyn IndexView) -> Result<Option<Condition>, ApiError> {
    filter.filter(|f| !f.is_null()).map(|f| compile_group(f, at, index.metadata_schema())).transpose()
}

/// The field named `name` in a filter: a built-in field, else a metadata field of the
/// index (`metadata.` in front is optional).
fn resolve(name: &str, path: &str, schema: &MetadataSchema) -> Result<Field, ApiError> {
    if let Some(f) = field_of(name) {
        return Ok(f);
    }
    let meta = name.strip_prefix("metadata.").unwrap_or(name);
    if let Some(t) = schema.get(meta) {
        return Ok(Field::Meta(meta.to_string(), t));
    }
    let known: Vec<&str> = schema.iter().map(|(k, _)| k).take(20).collect();
    let fields = if known.is_empty() {
        format!("{FIELDS}; no document of this index has metadata")
    } else {
        format!("{FIELDS}, or a metadata field of this index: {}", known.join(", "))
    };
    Err(ApiError::invalid(path, format!("is not a filterable field ({fields})")))
}

/// Groups nest at most this deep.
const MAX_DEPTH: usize = 16;

fn group(g: &Value, at: &str, depth: usize, schema: &MetadataSchema) -> Result<Condition, ApiError> {
    if depth > MAX_DEPTH {
        return Err(ApiError::invalid(at, format!("nests deeper than {MAX_DEPTH} levels")));
    }
    let obj: &Map<String, Value> = g.as_object().ok_or_else(|| ApiError::invalid(at, "must be an object"))?;
    let and = operator(obj.get("_operator"), &format!("{at}._operator"), true)?;
    let mut fields = Vec::new();
    for (k, v) in obj {
        if k.starts_with('_') {
            if !matches!(k.as_str(), "_operator" | "_conditions" | "_conditions_operator") {
                return Err(ApiError::invalid(
                    format!("{at}.{k}"),
                    "is not a known key (_operator, _conditions, _conditions_operator)",
                ));
            }
            continue;
        }
        let path = format!("{at}.{k}");
        let field = resolve(k, &path, schema)?;
        let test = match v {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Test::In(vec![typed(&field, v, &path)?]),
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(ApiError::invalid(&path, "a multiQuery needs at least one value"));
                }
                Test::In(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| typed(&field, x, &format!("{path}[{i}]")))
                        .collect::<Result<_, _>>()?,
                )
            }
            Value::Object(o) if o.contains_key("like") => {
                if o.len() != 1 {
                    return Err(ApiError::invalid(&path, "a logicQuery has only \"like\""));
                }
                match &o["like"] {
                    Value::String(p) if !p.is_empty() => Test::Like(p.clone()),
                    other => {
                        return Err(ApiError::invalid(
                            format!("{path}.like"),
                            format!("must be a non-empty string, got {other}"),
                        ))
                    }
                }
            }
            Value::Object(o) => {
                if o.is_empty() {
                    return Err(ApiError::invalid(
                        &path,
                        "a rangeQuery needs at least one of gt, gte, lt, lte, eq, neq",
                    ));
                }
                let mut bounds = Vec::new();
                for (op, b) in o {
                    let op_ = match op.to_ascii_lowercase().as_str() {
                        "gt" => RangeOp::Gt,
                        "gte" => RangeOp::Gte,
                        "lt" => RangeOp::Lt,
                        "lte" => RangeOp::Lte,
                        "eq" => RangeOp::Eq,
                        "neq" => RangeOp::Neq,
                        _ => {
                            return Err(ApiError::invalid(
                                format!("{path}.{op}"),
                                "is not a range operator (gt, gte, lt, lte, eq, neq, or like)",
                            ))
                        }
                    };
                    if let Field::Meta(name, t) = &field {
                        if !t.is_ordered() && !matches!(op_, RangeOp::Eq | RangeOp::Neq) {
                            return Err(ApiError::invalid(
                                format!("{path}.{op}"),
                                format!("a range needs a number or a date field, and {name} is {t} in this index"),
                            ));
                        }
                    }
                    bounds.push((op_, typed(&field, b, &format!("{path}.{op}"))?));
                }
                Test::Range(bounds)
            }
            other => {
                return Err(ApiError::invalid(
                    &path,
                    format!("expected a value, a list, or a like/range object, got {other}"),
                ))
            }
        };
        fields.push(Condition::Field { field, test });
    }
    if let Some(c) = obj.get("_conditions") {
        let list = c
            .as_array()
            .ok_or_else(|| ApiError::invalid(format!("{at}._conditions"), "must be an array of filter groups"))?;
        let inner_and = operator(obj.get("_conditions_operator"), &format!("{at}._conditions_operator"), and)?;
        let nested = list
            .iter()
            .enumerate()
            .map(|(i, x)| group(x, &format!("{at}._conditions[{i}]"), depth + 1, schema))
            .collect::<Result<Vec<_>, _>>()?;
        fields.push(if inner_and { Condition::All(nested) } else { Condition::Any(nested) });
    } else if obj.contains_key("_conditions_operator") {
        return Err(ApiError::invalid(format!("{at}._conditions_operator"), "needs _conditions beside it"));
    }
    Ok(if and { Condition::All(fields) } else { Condition::Any(fields) })
}

fn value_of(d: &Document, f: &Field) -> Option<Scalar> {
    match f {
        Field::Ticker => d.ticker.clone().map(Scalar::Str),
        Field::Year => d.year.map(|y| Scalar::Num(y as f64)),
        Field::Quarter => d.quarter.map(|q| Scalar::Str(q.to_string())),
        Field::DocumentType => Some(Scalar::Str(d.document_type.to_string())),
        Field::FilingType => d.filing_type.clone().map(Scalar::Str),
        Field::DocumentId => Some(Scalar::Str(d.document_id.clone())),
        Field::Title => Some(Scalar::Str(d.title.clone())),
        Field::PublishedAt => d.published_at.map(|p| Scalar::Str(p.to_string())),
        Field::Meta(name, _) => match d.metadata.get(name)? {
            MetaValue::Str(s) => Some(Scalar::Str(s.clone())),
            MetaValue::Num(n) => Some(Scalar::Num(*n)),
            MetaValue::Bool(b) => Some(Scalar::Bool(*b)),
            MetaValue::Date(x) => Some(Scalar::Str(x.to_string())),
            // Lists are tested item by item (see `Condition::matches`).
            MetaValue::List(_) => None,
        },
    }
}

/// Orders two scalars: numbers numerically, strings case-insensitively, a number and a
/// numeric string numerically; otherwise incomparable.
fn compare(a: &Scalar, b: &Scalar) -> Option<std::cmp::Ordering> {
    let num = |s: &Scalar| match s {
        Scalar::Num(n) => Some(*n),
        Scalar::Str(t) => t.trim().parse::<f64>().ok(),
        Scalar::Bool(_) => None,
    };
    match (a, b) {
        (Scalar::Str(x), Scalar::Str(y)) => Some(x.to_lowercase().cmp(&y.to_lowercase())),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(y)),
        (Scalar::Bool(_), _) | (_, Scalar::Bool(_)) => None,
        _ => num(a)?.partial_cmp(&num(b)?),
    }
}

/// `%` matches any run of characters; without `%` the pattern is a prefix.
fn like(value: &str, pattern: &str) -> bool {
    let v = value.to_lowercase();
    let p = pattern.to_lowercase();
    let p = if p.contains('%') { p } else { format!("{p}%") };
    let parts: Vec<&str> = p.split('%').collect();
    let mut pos = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        if i == 0 {
            if !v.starts_with(part) {
                return false;
            }
            pos = part.len();
        } else if i == parts.len() - 1 {
            return v.len() >= pos + part.len() && v[pos..].ends_with(part);
        } else {
            match v[pos..].find(part) {
                Some(j) => pos += j + part.len(),
                None => return false,
            }
        }
    }
    true
}

impl Condition {
    /// Whether `d` satisfies the condition. A field the document lacks satisfies only
    /// `neq`.
    pub fn matches(&self, d: &Document) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Condition::All(c) => c.iter().all(|x| x.matches(d)),
            Condition::Any(c) => c.is_empty() || c.iter().any(|x| x.matches(d)),
            Condition::Field { field: Field::Meta(name, MetaType::StringList), test } => {
                let items = match d.metadata.get(name) {
                    Some(MetaValue::List(items)) => items.as_slice(),
                    _ => &[],
                };
                let holds = |x: &Scalar| items.iter().any(|i| compare(&Scalar::Str(i.clone()), x) == Some(Equal));
                match test {
                    Test::In(vals) => vals.iter().any(holds),
                    Test::Like(p) => items.iter().any(|i| like(i, p)),
                    // Only eq and neq reach here (other bounds are refused when compiled).
                    Test::Range(bounds) => {
                        bounds.iter().all(|(op, b)| if *op == RangeOp::Eq { holds(b) } else { !holds(b) })
                    }
                }
            }
            Condition::Field { field, test } => {
                let Some(v) = value_of(d, field) else {
                    return matches!(test, Test::Range(b) if b.iter().all(|(op, _)| *op == RangeOp::Neq));
                };
                match test {
                    Test::In(vals) => vals.iter().any(|x| compare(&v, x) == Some(Equal)),
                    Test::Like(p) => match &v {
                        Scalar::Str(s) => like(s, p),
                        Scalar::Num(n) => like(&n.to_string(), p),
                        Scalar::Bool(b) => like(&b.to_string(), p),
                    },
                    Test::Range(bounds) => bounds.iter().all(|(op, b)| {
                        let o = compare(&v, b);
                        match op {
                            RangeOp::Gt => o == Some(Greater),
                            RangeOp::Gte => matches!(o, Some(Greater | Equal)),
                            RangeOp::Lt => o == Some(Less),
                            RangeOp::Lte => matches!(o, Some(Less | Equal)),
                            RangeOp::Eq => o == Some(Equal),
                            RangeOp::Neq => o != Some(Equal),
                        }
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(t: &str, y: i32, q: Option<&str>, ty: &str, title: &str) -> Document {
        Document {
            document_id: format!("{t}-{y}-{}", q.unwrap_or("FY")),
            ticker: Some(t.into()),
            year: Some(y),
            quarter: q.map(|q| q.parse().unwrap()),
            document_type: ty.into(),
            title: title.into(),
            published_at: format!("{y}-06-01").parse().ok(),
            ..Default::default()
        }
    }

    fn docs() -> Vec<Document> {
        vec![
            doc("AAPL", 2024, None, "10-K", "Apple Inc. 10-K FY2024"),
            doc("AAPL", 2023, Some("Q3"), "earnings_call", "AAPL earnings call"),
            doc("MSFT", 2022, Some("Q1"), "10-Q", "Microsoft Corp 10-Q"),
            doc("KO", 2021, Some("Q4"), "earnings_call", "KO earnings call"),
        ]
    }

    fn ids(f: Value) -> Vec<String> {
        let c = compile(&f, "SearchFilters", &MetadataSchema::default()).unwrap();
        docs().into_iter().filter(|d| c.matches(d)).map(|d| d.document_id).collect()
    }

    #[test]
    fn single_multi_like_and_range_queries() {
        assert_eq!(ids(json!([{"ticker": "aapl"}])), vec!["AAPL-2024-FY", "AAPL-2023-Q3"]);
        assert_eq!(ids(json!([{"ticker": ["KO", "MSFT"]}])), vec!["MSFT-2022-Q1", "KO-2021-Q4"]);
        assert_eq!(ids(json!([{"title": {"like": "apple"}}])), vec!["AAPL-2024-FY"]);
        assert_eq!(ids(json!([{"title": {"like": "%earnings%"}}])), vec!["AAPL-2023-Q3", "KO-2021-Q4"]);
        assert_eq!(ids(json!([{"year": {"gte": 2022, "lt": 2024}}])), vec!["AAPL-2023-Q3", "MSFT-2022-Q1"]);
        assert_eq!(
            ids(json!([{"year": {"neq": 2024}, "documentType": "earnings_call"}])),
            vec!["AAPL-2023-Q3", "KO-2021-Q4"]
        );
        assert_eq!(ids(json!([{"publishedAt": {"gte": "2023-01-01"}}])), vec!["AAPL-2024-FY", "AAPL-2023-Q3"]);
        assert_eq!(ids(json!([{"quarter": {"neq": "Q1"}}])).len(), 3, "a missing field satisfies neq only");
        assert_eq!(ids(json!([])).len(), 4, "no groups: no constraint");
    }

    #[test]
    fn groups_and_operators_nest() {
        // Groups are ANDed.
        assert_eq!(ids(json!([{"ticker": "AAPL"}, {"year": 2023}])), vec!["AAPL-2023-Q3"]);
        // OR inside a group.
        assert_eq!(ids(json!([{"_operator": "or", "ticker": "KO", "year": 2024}])), vec!["AAPL-2024-FY", "KO-2021-Q4"]);
        // Nested conditions inherit the operator unless _conditions_operator says otherwise.
        let f = json!([{
            "documentType": "earnings_call",
            "_conditions": [{"ticker": "AAPL"}, {"ticker": "KO"}],
            "_conditions_operator": "OR"
        }]);
        assert_eq!(ids(f), vec!["AAPL-2023-Q3", "KO-2021-Q4"]);
        let f = json!([{
            "_operator": "OR",
            "ticker": "MSFT",
            "_conditions": [{"ticker": "AAPL", "year": 2024}, {"year": 2021}]
        }]);
        assert_eq!(ids(f), vec!["AAPL-2024-FY", "MSFT-2022-Q1", "KO-2021-Q4"]);
        let f = json!([{"_conditions": [{"_conditions": [{"_conditions": [{"ticker": "KO"}]}]}]}]);
        assert_eq!(ids(f), vec!["KO-2021-Q4"]);
    }

    #[test]
    fn malformed_filters_point_at_the_offending_element() {
        let err = |f: Value| compile(&f, "SearchFilters", &MetadataSchema::default()).unwrap_err().field.unwrap();
        assert_eq!(err(json!({"ticker": "A"})), "SearchFilters");
        assert_eq!(err(json!([5])), "SearchFilters[0]");
        assert_eq!(err(json!([{"colour": "red"}])), "SearchFilters[0].colour");
        assert_eq!(err(json!([{"year": {"between": [1, 2]}}])), "SearchFilters[0].year.between");
        assert_eq!(err(json!([{"year": {}}])), "SearchFilters[0].year");
        assert_eq!(err(json!([{"ticker": []}])), "SearchFilters[0].ticker");
        assert_eq!(err(json!([{"ticker": [true]}])), "SearchFilters[0].ticker[0]");
        assert_eq!(err(json!([{"title": {"like": ""}}])), "SearchFilters[0].title.like");
        assert_eq!(err(json!([{"_operator": "XOR"}])), "SearchFilters[0]._operator");
        assert_eq!(
            err(json!([{"_conditions": [{"ticker": {"lte": null}}]}])),
            "SearchFilters[0]._conditions[0].ticker.lte"
        );
        assert_eq!(err(json!([{"_conditions_operator": "OR"}])), "SearchFilters[0]._conditions_operator");
        assert_eq!(err(json!([{"_extra": 1}])), "SearchFilters[0]._extra");
        let mut deep = json!({"ticker": "A"});
        for _ in 0..20 {
            deep = json!({"_conditions": [deep]});
        }
        assert!(err(json!([deep])).starts_with("SearchFilters[0]._conditions[0]"));
    }

    #[test]
    fn dates_years_and_quarters_are_checked_as_the_other_dialects_check_them() {
        let err = |f: Value| {
            let e = compile(&f, "SearchFilters", &MetadataSchema::default()).unwrap_err();
            (e.field.unwrap(), e.message)
        };
        assert_eq!(
            err(json!([{"publishedAt": {"gte": "2024-02-31"}}])),
            (
                "SearchFilters[0].publishedAt.gte".into(),
                "SearchFilters[0].publishedAt.gte: must be a date YYYY-MM-DD, got \"2024-02-31\"".into()
            )
        );
        assert_eq!(err(json!([{"publishedAt": "２０２４-01-01"}])).0, "SearchFilters[0].publishedAt");
        assert_eq!(err(json!([{"publishedAt": 20240101}])).0, "SearchFilters[0].publishedAt");
        assert_eq!(
            err(json!([{"year": {"gte": "abc"}}])).1,
            "SearchFilters[0].year.gte: must be a year (an integer), got \"abc\""
        );
        assert_eq!(err(json!([{"year": "２０２４"}])).0, "SearchFilters[0].year");
        assert_eq!(err(json!([{"year": [2024, 2023.5]}])).0, "SearchFilters[0].year[1]");
        assert_eq!(err(json!([{"quarter": "Q5"}])).0, "SearchFilters[0].quarter");
        let long = "9".repeat(300);
        assert!(err(json!([{"publishedAt": long}])).1.len() < 120, "echoed input is cut");
        // Valid values still select, normalised: "2023-1-01" is not a date, " 2023 " not a year.
        assert_eq!(ids(json!([{"year": "2023"}])), vec!["AAPL-2023-Q3"]);
        assert_eq!(ids(json!([{"quarter": "q3"}])), vec!["AAPL-2023-Q3"]);
        assert_eq!(ids(json!([{"quarter": 3}])), vec!["AAPL-2023-Q3"]);
        assert_eq!(ids(json!([{"publishedAt": {"gte": "2023-01-01T00:00:00Z"}}])).len(), 2);
        assert!(compile(&json!([{"publishedAt": "2023-1-01"}]), "SearchFilters", &MetadataSchema::default()).is_err());
        assert!(compile(&json!([{"year": " 2023 "}]), "SearchFilters", &MetadataSchema::default()).is_err());
    }

    fn team_docs() -> Vec<Document> {
        let doc = |id: &str, m: Value| Document {
            document_id: id.into(),
            metadata: sextant_core::corpus::Metadata::from_json(&m).unwrap(),
            ..Default::default()
        };
        vec![
            doc(
                "a",
                json!({"department": "Legal", "pages": 3, "draft": true, "reviewed": "2024-03-01", "groups": ["acl-risk", "acl-all"], "author": {"team": "risk"}}),
            ),
            doc(
                "b",
                json!({"department": "Sales", "pages": 12, "draft": false, "reviewed": "2023-11-30", "groups": ["acl-all"]}),
            ),
            doc("c", json!({"department": "legal ops", "pages": 7})),
            doc("d", json!({})),
        ]
    }

    fn team_ids(f: Value) -> Result<Vec<String>, ApiError> {
        let docs = team_docs();
        let schema = MetadataSchema::of(docs.iter().map(|d| &d.metadata));
        let c = compile(&f, "SearchFilters", &schema)?;
        Ok(docs.into_iter().filter(|d| c.matches(d)).map(|d| d.document_id).collect())
    }

    #[test]
    fn metadata_fields_take_all_four_query_kinds_and_nested_groups() {
        let ids = |f: Value| team_ids(f).unwrap();
        assert_eq!(ids(json!([{"department": "legal"}])), vec!["a"]);
        assert_eq!(ids(json!([{"metadata.department": ["sales", "LEGAL"]}])), vec!["a", "b"]);
        assert_eq!(ids(json!([{"department": {"like": "legal%"}}])), vec!["a", "c"]);
        assert_eq!(ids(json!([{"pages": {"gte": 5, "lt": 12}}])), vec!["c"]);
        assert_eq!(ids(json!([{"reviewed": {"gt": "2024-01-01"}}])), vec!["a"]);
        assert_eq!(ids(json!([{"draft": false}])), vec!["b"]);
        assert_eq!(ids(json!([{"author.team": "risk"}])), vec!["a"]);
        // Lists: equal is "holds", a multiQuery "holds any", like "holds one that matches".
        assert_eq!(ids(json!([{"groups": "acl-all"}])), vec!["a", "b"]);
        assert_eq!(ids(json!([{"groups": ["acl-risk", "acl-x"]}])), vec!["a"]);
        assert_eq!(ids(json!([{"groups": {"like": "%risk"}}])), vec!["a"]);
        assert_eq!(ids(json!([{"groups": {"neq": "acl-risk"}}])), vec!["b", "c", "d"]);
        assert_eq!(ids(json!([{"pages": {"neq": 3}}])), vec!["b", "c", "d"], "a missing field satisfies neq only");
        let nested = json!([{"_operator": "or", "draft": true,
            "_conditions": [{"department": "sales", "pages": {"gt": 10}}]}]);
        assert_eq!(ids(nested), vec!["a", "b"]);
    }

    #[test]
    fn metadata_filters_are_checked_against_the_fields_types() {
        let e = |f: Value| {
            let e = team_ids(f).unwrap_err();
            (e.field.unwrap(), e.message)
        };
        let (field, message) = e(json!([{"colour": "red"}]));
        assert_eq!(field, "SearchFilters[0].colour");
        assert!(message.contains("a metadata field of this index: author.team, department, draft"), "{message}");
        let (field, message) = e(json!([{"department": {"gt": "m"}}]));
        assert_eq!(field, "SearchFilters[0].department.gt");
        assert!(message.contains("a range needs a number or a date field, and department is a string"), "{message}");
        assert!(e(json!([{"groups": {"lte": "x"}}])).1.contains("groups is a list of strings"));
        assert_eq!(
            e(json!([{"pages": "three"}])).1,
            "SearchFilters[0].pages: pages is a number in this index, got \"three\""
        );
        assert_eq!(e(json!([{"draft": "yes"}])).0, "SearchFilters[0].draft");
        assert!(e(json!([{"reviewed": {"gte": "March"}}])).1.contains("reviewed is a date in this index"));
        assert_eq!(e(json!([{"ticker": true}])).0, "SearchFilters[0].ticker", "built-in fields take no booleans");
    }

    /// Property: a compiled filter agrees with a direct reading of the JSON, written
    /// independently here, on random filters and random documents (fields missing included).
    mod properties {
        use sextant_core::testutil::Rng;

        use super::*;

        const TITLES: &[&str] = &[
            "Apple Inc. 10-K FY2024 — Item 1A. Risk Factors",
            "Mastercard call Q3",
            "Exxon Mobil 10-Q",
            "日本 report %",
            "",
        ];

        fn pick<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
            xs[rng.below(xs.len())]
        }

        fn random_doc(rng: &mut Rng) -> Document {
            let opt = |rng: &mut Rng, xs: &[&str]| (rng.below(4) > 0).then(|| pick(rng, xs).to_string());
            Document {
                document_id: format!("d{}", rng.below(5)),
                ticker: opt(rng, &["AAPL", "MA", "XOM"]),
                year: (rng.below(4) > 0).then(|| 2019 + rng.below(7) as i32),
                quarter: opt(rng, &["Q1", "Q2", "Q3", "Q4"]).map(|q| q.parse().unwrap()),
                document_type: pick(rng, &["10-K", "10-Q", "earnings_call"]).into(),
                title: pick(rng, TITLES).into(),
                ..Default::default()
            }
        }

        /// A random value for `field` (years as numbers or numeric strings).
        fn value(rng: &mut Rng, field: &str) -> Value {
            match field {
                "year" if rng.below(2) == 0 => json!(2019 + rng.below(7)),
                "year" => json!((2019 + rng.below(7)).to_string()),
                "ticker" => json!(pick(rng, &["AAPL", "aapl", "MA", "XOM", "KO"])),
                "quarter" => json!(pick(rng, &["Q1", "q2", "Q3", "Q4"])),
                "documentType" => json!(pick(rng, &["10-K", "10-q", "earnings_call"])),
                _ => json!(pick(rng, &["apple", "Mastercard call Q3", "exxon mobil 10-q"])),
            }
        }

        fn random_group(rng: &mut Rng, depth: usize) -> Value {
            let mut g = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                let field = pick(rng, &["ticker", "year", "quarter", "documentType", "title"]);
                let test = match rng.below(4) {
                    0 => value(rng, field),
                    1 => Value::Array((0..1 + rng.below(3)).map(|_| value(rng, field)).collect()),
                    2 => {
                        let pattern = pick(rng, &["app%", "%risk%", "%q3", "exxon", "%", "m%c%3", "%10-_", "日本%"]);
                        json!({ "like": pattern })
                    }
                    _ => {
                        let mut r = serde_json::Map::new();
                        for _ in 0..1 + rng.below(2) {
                            r.insert(pick(rng, &["gt", "gte", "lt", "lte", "eq", "neq"]).into(), value(rng, field));
                        }
                        Value::Object(r)
                    }
                };
                g.insert(field.into(), test);
            }
            if rng.below(2) == 0 {
                g.insert("_operator".into(), json!(pick(rng, &["AND", "or", "Or"])));
            }
            if depth < 2 && rng.below(3) == 0 {
                g.insert(
                    "_conditions".into(),
                    Value::Array((0..rng.below(3)).map(|_| random_group(rng, depth + 1)).collect()),
                );
                if rng.below(2) == 0 {
                    g.insert("_conditions_operator".into(), json!(pick(rng, &["AND", "OR"])));
                }
            }
            Value::Object(g)
        }

        /// `%` is any run of characters; a pattern without `%` is a prefix (backtracking).
        fn wildcard(v: &[char], p: &[char]) -> bool {
            match p.split_first() {
                None => v.is_empty(),
                Some(('%', rest)) => (0..=v.len()).any(|i| wildcard(&v[i..], rest)),
                Some((c, rest)) => v.first() == Some(c) && wildcard(&v[1..], rest),
            }
        }

        fn naive_field(d: &Document, field: &str, test: &Value) -> bool {
            let doc_value: Option<String> = match field {
                "ticker" => d.ticker.clone(),
                "year" => d.year.map(|y| y.to_string()),
                "quarter" => d.quarter.map(|q| q.to_string()),
                "documentType" => Some(d.document_type.to_string()),
                _ => Some(d.title.clone()),
            };
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            // Years compare as numbers, everything else as lower-case text.
            let cmp = |dv: &str, fv: &Value| -> Option<std::cmp::Ordering> {
                if field == "year" {
                    dv.parse::<f64>().ok()?.partial_cmp(&text(fv).parse::<f64>().ok()?)
                } else {
                    Some(dv.to_lowercase().cmp(&text(fv).to_lowercase()))
                }
            };
            let Some(dv) = doc_value else {
                return matches!(test, Value::Object(o) if !o.contains_key("like") && o.keys().all(|k| k == "neq"));
            };
            match test {
                Value::Array(xs) => xs.iter().any(|x| cmp(&dv, x) == Some(std::cmp::Ordering::Equal)),
                Value::Object(o) if o.contains_key("like") => {
                    let p = text(&o["like"]).to_lowercase();
                    let p = if p.contains('%') { p } else { format!("{p}%") };
                    wildcard(&dv.to_lowercase().chars().collect::<Vec<_>>(), &p.chars().collect::<Vec<_>>())
                }
                Value::Object(o) => o.iter().all(|(op, b)| {
                    let c = cmp(&dv, b);
                    use std::cmp::Ordering::*;
                    match op.as_str() {
                        "gt" => c == Some(Greater),
                        "gte" => c == Some(Greater) || c == Some(Equal),
                        "lt" => c == Some(Less),
                        "lte" => c == Some(Less) || c == Some(Equal),
                        "eq" => c == Some(Equal),
                        _ => c != Some(Equal),
                    }
                }),
                single => cmp(&dv, single) == Some(std::cmp::Ordering::Equal),
            }
        }

        fn naive_group(d: &Document, g: &Value) -> bool {
            let o = g.as_object().unwrap();
            let and = |key: &str, default: bool| {
                o.get(key).map_or(default, |v| v.as_str().unwrap().eq_ignore_ascii_case("and"))
            };
            let joined_with_and = and("_operator", true);
            let mut results: Vec<bool> =
                o.iter().filter(|(k, _)| !k.starts_with('_')).map(|(k, v)| naive_field(d, k, v)).collect();
            if let Some(Value::Array(nested)) = o.get("_conditions") {
                let r: Vec<bool> = nested.iter().map(|x| naive_group(d, x)).collect();
                results.push(if and("_conditions_operator", joined_with_and) {
                    r.iter().all(|x| *x)
                } else {
                    r.is_empty() || r.iter().any(|x| *x)
                });
            }
            if joined_with_and {
                results.iter().all(|x| *x)
            } else {
                results.is_empty() || results.iter().any(|x| *x)
            }
        }

        #[test]
        fn compiled_filters_agree_with_a_naive_evaluator() {
            let mut rng = Rng(0x5eed_f11e);
            let (mut matched, mut total) = (0, 0);
            for case in 0..2_000 {
                let filters = Value::Array((0..1 + rng.below(2)).map(|_| random_group(&mut rng, 0)).collect());
                let compiled = compile(&filters, "SearchFilters", &MetadataSchema::default())
                    .unwrap_or_else(|e| panic!("case {case}: {filters} refused: {}", e.message));
                for _ in 0..8 {
                    let d = random_doc(&mut rng);
                    let expected = filters.as_array().unwrap().iter().all(|g| naive_group(&d, g));
                    assert_eq!(compiled.matches(&d), expected, "case {case}: {filters} on {d:?}");
                    matched += usize::from(expected);
                    total += 1;
                }
            }
            // Both outcomes are exercised, not just one.
            assert!(matched > total / 10 && matched < total * 9 / 10, "{matched} of {total} matched");
        }
    }
}
