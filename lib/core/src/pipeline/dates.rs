//! Calendar arithmetic for recency boosts (no time-zone library needed).

/// Days since 1970-01-01 of an ISO date `YYYY-MM-DD` (anything after the 10th character
/// is ignored); `None` when it does not parse.
pub fn days_from_iso_date(s: &str) -> Option<i64> {
    let s = s.get(..10)?;
    let mut it = s.split('-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(days_from_iso_date("1970-01-01"), Some(0));
        assert_eq!(days_from_iso_date("2000-03-01"), Some(11_017));
        assert_eq!(days_from_iso_date("2024-02-29T10:00:00Z"), Some(19_782));
        assert_eq!(days_from_iso_date("2024-13-01"), None);
        assert_eq!(days_from_iso_date("soon"), None);
    }
}
