//! The domain values of a document's metadata, typed once where they enter (a corpus file,
//! a request, an index file) so that the engine never re-parses a string: [`Date`],
//! [`Quarter`] and [`DocumentType`]. Each is written as it always was (`2024-11-01`, `Q3`,
//! `10-K`), in JSON and in the index's files alike.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A calendar day of the proleptic Gregorian calendar, written `YYYY-MM-DD`.
///
/// Parsing checks the calendar (`2024-02-29` is a day, `2023-02-29` and `2024-02-31` are
/// not). A date-time (`2024-02-29T10:00:00Z`, `2024-02-29 10:00`) is read as its day.
///
/// ```
/// use sextant_core::corpus::Date;
///
/// let d: Date = "2024-02-29".parse().unwrap();
/// assert_eq!(d.days_since_epoch(), 19_782);
/// assert_eq!(d.to_string(), "2024-02-29");
/// assert!("2024-02-31".parse::<Date>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(time::Date);

/// The Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i64 = 2_440_588;

impl Date {
    /// The day `year`-`month`-`day`, if the calendar has it.
    pub fn from_ymd(year: i32, month: u8, day: u8) -> Option<Date> {
        let month = time::Month::try_from(month).ok()?;
        time::Date::from_calendar_date(year, month, day).ok().map(Date)
    }

    /// Days since 1970-01-01 (negative before): the day's Julian day number − 2,440,588.
    pub fn days_since_epoch(self) -> i64 {
        i64::from(self.0.to_julian_day()) - UNIX_EPOCH_JULIAN_DAY
    }

    /// The year.
    pub fn year(self) -> i32 {
        self.0.year()
    }

    /// The month, 1-12.
    pub fn month(self) -> u8 {
        self.0.month() as u8
    }

    /// The day of the month, 1-31.
    pub fn day(self) -> u8 {
        self.0.day()
    }

    /// Whether this is the last day of its month.
    pub fn is_month_end(self) -> bool {
        self.0.day() == self.0.month().length(self.0.year())
    }
}

impl FromStr for Date {
    type Err = String;

    /// `YYYY-MM-DD` with ASCII digits, optionally followed by a time (`T…` or ` …`).
    fn from_str(s: &str) -> Result<Date, String> {
        let s = s.trim();
        let day = s.get(..10).filter(|_| s.len() == 10 || matches!(s.as_bytes()[10], b'T' | b' '));
        let parsed = day.and_then(|d| {
            let b = d.as_bytes();
            let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
            if !(digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10)) {
                return None;
            }
            Date::from_ymd(d[..4].parse().ok()?, d[5..7].parse().ok()?, d[8..10].parse().ok()?)
        });
        parsed.ok_or_else(|| format!("{s:?} is not a calendar date (YYYY-MM-DD)"))
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year(), self.month(), self.day())
    }
}

/// A fiscal quarter, 1-4, written `Q1`..`Q4`.
///
/// ```
/// use sextant_core::corpus::Quarter;
///
/// let q: Quarter = "q3".parse().unwrap();
/// assert_eq!((q.number(), q.to_string()), (3, "Q3".to_string()));
/// assert!("Q5".parse::<Quarter>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quarter(u8);

impl Quarter {
    /// Quarter `n`, when `n` is 1-4.
    pub fn new(n: u8) -> Option<Quarter> {
        (1..=4).contains(&n).then_some(Quarter(n))
    }

    /// Its number, 1-4.
    pub fn number(self) -> u8 {
        self.0
    }
}

impl FromStr for Quarter {
    type Err = String;

    /// `Q1`..`Q4`, in either case.
    fn from_str(s: &str) -> Result<Quarter, String> {
        let t = s.trim();
        let n = match t.as_bytes() {
            [b'Q' | b'q', d @ b'1'..=b'4'] => Quarter::new(d - b'0'),
            _ => None,
        };
        n.ok_or_else(|| format!("must be one of Q1, Q2, Q3, Q4, got {s:?}"))
    }
}

impl fmt::Display for Quarter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Q{}", self.0)
    }
}

/// What kind of document a source is. The kinds the financial routes know are variants;
/// any other name (`8-K`, `article`, ...) is kept as written.
#[derive(Debug, Clone, Eq)]
pub enum DocumentType {
    /// An annual report on Form 10-K.
    Form10K,
    /// A quarterly report on Form 10-Q.
    Form10Q,
    /// An earnings call transcript.
    EarningsCall,
    /// Any other kind, by its name.
    Other(String),
}

impl DocumentType {
    /// The name it is written with: `10-K`, `10-Q`, `earnings_call`, or the other name.
    pub fn as_str(&self) -> &str {
        match self {
            DocumentType::Form10K => "10-K",
            DocumentType::Form10Q => "10-Q",
            DocumentType::EarningsCall => "earnings_call",
            DocumentType::Other(s) => s,
        }
    }

    /// The kind named `s` (case-insensitive for the known kinds).
    pub fn parse(s: &str) -> DocumentType {
        let t = s.trim();
        [DocumentType::Form10K, DocumentType::Form10Q, DocumentType::EarningsCall]
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(t))
            .unwrap_or_else(|| DocumentType::Other(t.to_string()))
    }

    /// Whether this is an SEC filing (10-K or 10-Q).
    pub fn is_filing(&self) -> bool {
        matches!(self, DocumentType::Form10K | DocumentType::Form10Q)
    }
}

impl Default for DocumentType {
    /// An unnamed kind (`Other("")`).
    fn default() -> Self {
        DocumentType::Other(String::new())
    }
}

impl PartialEq for DocumentType {
    /// Kinds are the same when their names are, ignoring ASCII case.
    fn eq(&self, other: &Self) -> bool {
        self.as_str().eq_ignore_ascii_case(other.as_str())
    }
}

impl std::hash::Hash for DocumentType {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().to_ascii_lowercase().hash(h);
    }
}

impl fmt::Display for DocumentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for DocumentType {
    fn from(s: &str) -> Self {
        DocumentType::parse(s)
    }
}

/// Serialises as its written form and deserialises by parsing it, through
/// `deserialize_str` (so it also reads from binary formats, which are not self-describing).
macro_rules! string_serde {
    ($t:ty, $parse:expr, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        ($parse)(v).map_err(E::custom)
                    }
                }
                d.deserialize_str(V)
            }
        }

        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "description": $what })
            }
        }
    };
}

string_serde!(Date, |v: &str| v.parse::<Date>(), "a calendar date, YYYY-MM-DD");
string_serde!(Quarter, |v: &str| v.parse::<Quarter>(), "a fiscal quarter, Q1 to Q4");
string_serde!(
    DocumentType,
    |v: &str| Ok::<_, String>(DocumentType::parse(v)),
    "a document type (10-K, 10-Q, earnings_call, ...)"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_follow_the_calendar() {
        assert_eq!("1970-01-01".parse::<Date>().unwrap().days_since_epoch(), 0);
        assert_eq!("2000-03-01".parse::<Date>().unwrap().days_since_epoch(), 11_017);
        assert_eq!("2024-02-29T10:00:00Z".parse::<Date>().unwrap().to_string(), "2024-02-29");
        for bad in [
            "2024-13-01",
            "2023-02-29",
            "2024-02-31",
            "2024-04-31",
            "soon",
            "2024-1-01",
            "２０２４-01-01",
            "2024-01-01x",
            "",
        ] {
            assert!(bad.parse::<Date>().is_err(), "{bad}");
        }
        assert!(Date::from_ymd(2024, 2, 29).unwrap().is_month_end());
        assert!(Date::from_ymd(2023, 2, 28).unwrap().is_month_end());
        assert!(!Date::from_ymd(2024, 2, 28).unwrap().is_month_end());
        assert!(Date::from_ymd(2024, 2, 31).is_none());
        assert!("2024-01-31".parse::<Date>().unwrap() < "2024-02-01".parse::<Date>().unwrap());
    }

    #[test]
    fn values_round_trip_through_json_and_bincode_as_their_written_form() {
        let d: Date = "2024-11-01".parse().unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"2024-11-01\"");
        assert_eq!(serde_json::from_str::<Date>("\"2024-11-01\"").unwrap(), d);
        // The same bytes as the string they replace: index files written before stay readable.
        assert_eq!(bincode::serialize(&Some(d)).unwrap(), bincode::serialize(&Some("2024-11-01".to_string())).unwrap());
        assert_eq!(
            bincode::deserialize::<Option<Quarter>>(&bincode::serialize(&Some("Q2")).unwrap()).unwrap(),
            Quarter::new(2)
        );
        let t: DocumentType = serde_json::from_str("\"10-k\"").unwrap();
        assert_eq!((t.clone(), t.as_str()), (DocumentType::Form10K, "10-K"));
        assert_eq!(DocumentType::parse("Article"), DocumentType::parse("article"));
        assert!(serde_json::from_str::<Quarter>("\"Q0\"").unwrap_err().to_string().contains("Q1, Q2, Q3, Q4"));
        for bad in ["Q01", "Q+1", "Q5", "1", "QQ1", ""] {
            assert!(bad.parse::<Quarter>().is_err(), "{bad}");
        }
    }
}
