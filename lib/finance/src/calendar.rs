//! Fiscal calendars: which fiscal year and quarter a date falls in, per company.
//!
//! A filing's `fiscal_year` names the filing, not each fact in it (a 10-K repeats two
//! prior years), so a fact's own period comes from its dates. Each company's calendar is
//! learnt from its filings: the month and day its fiscal year ends, and how it labels the
//! year (most companies name a fiscal year by the calendar year it ends in; a few, such as
//! Home Depot, by the year it starts in).

use serde::{Deserialize, Serialize};
use sextant_core::corpus::Date;

/// Days of slack when matching a 52/53-week fiscal year end (Apple's ends on the last
/// Saturday of September: anywhere from September 24 to October 1).
const YEAR_END_SLACK_DAYS: i64 = 10;

/// How one company labels its fiscal years.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiscalCalendar {
    /// Month (1-12) the fiscal year ends in.
    pub end_month: u8,
    /// Day of month it ends on (approximate for 52/53-week years).
    pub end_day: u8,
    /// Fiscal-year label minus the calendar year of the year's end (0 or -1).
    pub label_offset: i32,
}

impl Default for FiscalCalendar {
    fn default() -> Self {
        FiscalCalendar { end_month: 12, end_day: 31, label_offset: 0 }
    }
}

/// A date split into its parts.
fn ymd(iso: &str) -> Option<(i32, u8, u8)> {
    let d: Date = iso.parse().ok()?;
    Some((d.year(), d.month(), d.day()))
}

/// Days since 1970-01-01 of an ISO date.
fn days(iso: &str) -> Option<i64> {
    iso.parse::<Date>().ok().map(Date::days_since_epoch)
}

fn iso(y: i32, m: u8, d: u8) -> String {
    // February 29 and 31st days clamp to the month's end: fine for ±10 days of slack.
    let last = match m {
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    format!("{y:04}-{m:02}-{:02}", d.min(last))
}

/// Days between two ISO dates (`b - a`).
pub fn days_between(a: &str, b: &str) -> Option<i64> {
    Some(days(b)? - days(a)?)
}

impl FiscalCalendar {
    /// The calendar of a 10-K: its fiscal year `label` ended on `period_end`.
    pub fn from_annual(label: i32, period_end: &str) -> Option<Self> {
        let (y, m, d) = ymd(period_end)?;
        // A year ending in the first days of January belongs to the December before.
        let (y, m, d) = if m == 1 && d <= 7 { (y - 1, 12, 31) } else { (y, m, d) };
        Some(FiscalCalendar { end_month: m, end_day: d, label_offset: label - y })
    }

    /// The calendar of a 10-Q: fiscal quarter `quarter` of year `label` ended on `period_end`.
    pub fn from_quarter(label: i32, quarter: u8, period_end: &str) -> Option<Self> {
        let (y, m, d) = ymd(period_end)?;
        let months_left = 3 * (4 - quarter.clamp(1, 4) as i32);
        let total = (m as i32 - 1) + months_left;
        let (end_y, end_m) = (y + total / 12, (total % 12 + 1) as u8);
        // A quarter closing on its month's last day: so does the year.
        let month_end = days(&iso(y, m, d)).zip(days(&iso(y, m, 31))).is_some_and(|(a, b)| a == b);
        Self::from_annual(label, &iso(end_y, end_m, if month_end { 31 } else { d }))
    }

    /// The ISO date the fiscal year labelled `label` ends on (nominally).
    pub fn year_end(&self, label: i32) -> String {
        iso(label - self.label_offset, self.end_month, self.end_day)
    }

    /// The fiscal year (label) a date falls in.
    pub fn fiscal_year_of(&self, date: &str) -> Option<i32> {
        let (y, _, _) = ymd(date)?;
        let day = days(date)?;
        for end_year in [y - 1, y, y + 1] {
            let end = days(&iso(end_year, self.end_month, self.end_day))?;
            if day <= end + YEAR_END_SLACK_DAYS {
                return Some(end_year + self.label_offset);
            }
        }
        None
    }

    /// The fiscal year and quarter (1-4) a period ending on `date` closes.
    pub fn quarter_of(&self, date: &str) -> Option<(i32, u8)> {
        let fy = self.fiscal_year_of(date)?;
        let days_left = days_between(date, &self.year_end(fy))?;
        let quarters_left = ((days_left as f64) / 91.3).round() as i64;
        Some((fy, (4 - quarters_left).clamp(1, 4) as u8))
    }

    /// Whether `date` is this calendar's fiscal year end (within the 52/53-week slack).
    pub fn is_year_end(&self, date: &str) -> bool {
        self.fiscal_year_of(date)
            .and_then(|fy| days_between(date, &self.year_end(fy)))
            .is_some_and(|d| d.abs() <= YEAR_END_SLACK_DAYS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apple_52_53_week_years() {
        let apple = FiscalCalendar::from_annual(2024, "2024-09-28").unwrap();
        assert_eq!(apple.label_offset, 0);
        assert_eq!(apple.fiscal_year_of("2023-09-30"), Some(2023));
        assert_eq!(apple.fiscal_year_of("2023-10-01"), Some(2023), "inside the slack of a 53-week year");
        assert_eq!(apple.fiscal_year_of("2023-12-30"), Some(2024));
        assert_eq!(apple.quarter_of("2023-12-30"), Some((2024, 1)));
        assert_eq!(apple.quarter_of("2024-03-30"), Some((2024, 2)));
        assert_eq!(apple.quarter_of("2024-06-29"), Some((2024, 3)));
        assert_eq!(apple.quarter_of("2024-09-28"), Some((2024, 4)));
        assert!(apple.is_year_end("2022-09-24"));
        assert!(!apple.is_year_end("2022-06-25"));
    }

    #[test]
    fn labels_by_the_year_a_fiscal_year_starts_in() {
        // Home Depot's fiscal 2024 ended on February 2, 2025; Nvidia's fiscal 2025 on January 26, 2025.
        let hd = FiscalCalendar::from_annual(2024, "2025-02-02").unwrap();
        assert_eq!(hd.label_offset, -1);
        assert_eq!(hd.fiscal_year_of("2024-11-03"), Some(2024));
        let nvda = FiscalCalendar::from_annual(2025, "2025-01-26").unwrap();
        assert_eq!(nvda.fiscal_year_of("2024-10-27"), Some(2025));
        assert_eq!(nvda.quarter_of("2024-07-28"), Some((2025, 2)));
    }

    #[test]
    fn calendar_from_a_quarterly_filing() {
        // Oracle's fiscal Q1 2025 ended August 31, 2024: its year ends in May.
        let orcl = FiscalCalendar::from_quarter(2025, 1, "2024-08-31").unwrap();
        assert_eq!((orcl.end_month, orcl.label_offset), (5, 0));
        assert_eq!(orcl.quarter_of("2024-11-30"), Some((2025, 2)));
        let xom = FiscalCalendar::from_quarter(2025, 2, "2025-06-30").unwrap();
        assert_eq!(xom, FiscalCalendar::default());
        assert_eq!(FiscalCalendar::from_annual(2024, "not a date"), None);
    }
}
