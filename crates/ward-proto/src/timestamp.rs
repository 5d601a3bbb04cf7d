//! `google.protobuf.Timestamp` with Ward's JSON form.
//!
//! The well-known type's usual JSON encoders trim fractional seconds to what is
//! needed (`…:00Z`, `…:00.420Z`); the API promises RFC 3339 UTC with exactly three
//! fractional digits (`2026-03-27T13:55:00.423Z`), so this type owns its serde.
//! On the wire it is the standard message (seconds = 1, nanos = 2).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::Error as _;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// A timestamp from milliseconds since the Unix epoch (Ward stores milliseconds).
    pub fn from_millis(ms: i64) -> Self {
        Self {
            seconds: ms.div_euclid(1000),
            nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
        }
    }

    /// Milliseconds since the Unix epoch, truncating below a millisecond.
    /// Saturates instead of overflowing: a client-sent value is arbitrary.
    pub fn to_millis(&self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos) / 1_000_000)
    }

    /// Whether this is a real instant in years 0001–9999 with nanos in
    /// range: the span RFC 3339 (and `google.protobuf.Timestamp`) allows.
    pub fn is_valid(&self) -> bool {
        const MIN_SECONDS: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
        const MAX_SECONDS: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
        (MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds) && (0..1_000_000_000).contains(&self.nanos)
    }

    fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.seconds, self.nanos.clamp(0, 999_999_999) as u32)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let dt = self
            .to_datetime()
            .ok_or_else(|| serde::ser::Error::custom("timestamp out of range"))?;
        match rfc3339_millis(&dt) {
            Some(buf) => s.serialize_str(std::str::from_utf8(&buf).map_err(serde::ser::Error::custom)?),
            None => s.serialize_str(&dt.to_rfc3339_opts(SecondsFormat::Millis, true)),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for years 0–9999, written digit by digit:
/// what `to_rfc3339_opts(Millis, true)` gives, at a seventh of its cost (a
/// list of 50 writes 100 of these).
fn rfc3339_millis(dt: &DateTime<Utc>) -> Option<[u8; 24]> {
    use chrono::{Datelike as _, Timelike as _};
    let year = u32::try_from(dt.year()).ok().filter(|y| *y <= 9999)?;
    let millis = dt.timestamp_subsec_millis().min(999);
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, dt.month());
    put(8, 2, dt.day());
    put(11, 2, dt.hour());
    put(14, 2, dt.minute());
    put(17, 2, dt.second().min(59));
    put(20, 3, millis);
    Some(b)
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let dt = DateTime::parse_from_rfc3339(&s)
            .map_err(|e| D::Error::custom(format_args!("{e}; a time is RFC 3339, e.g. 2026-12-01T00:00:00Z")))?;
        Ok(Self {
            seconds: dt.timestamp(),
            nanos: dt.timestamp_subsec_nanos() as i32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written form is chrono's, over the whole range it covers.
    #[test]
    fn fast_form_equals_chronos() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let max = DateTime::parse_from_rfc3339("9999-12-31T23:59:59.999Z")
            .expect("max")
            .timestamp();
        let min = DateTime::parse_from_rfc3339("0000-01-01T00:00:00Z")
            .expect("min")
            .timestamp();
        let mut cases = vec![
            (0, 0),
            (min, 0),
            (max, 999_999_999),
            (-1, 999_999_999),
            (951_782_400, 1_000_000),
        ];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let secs = min + (x % (max - min + 1) as u64) as i64;
            cases.push((secs, (x >> 20) as u32 % 1_000_000_000));
        }
        for (secs, nanos) in cases {
            let dt = DateTime::from_timestamp(secs, nanos).expect("in range");
            let fast = rfc3339_millis(&dt).expect("years 0-9999");
            assert_eq!(
                std::str::from_utf8(&fast).expect("ascii"),
                dt.to_rfc3339_opts(SecondsFormat::Millis, true),
                "{secs}.{nanos}"
            );
        }
        let far = DateTime::from_timestamp(max + 1, 0).expect("in range");
        assert!(rfc3339_millis(&far).is_none());
    }

    #[test]
    fn json_has_exactly_three_fraction_digits() {
        let t = Timestamp::from_millis(1_774_619_700_000);
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-03-27T13:55:00.000Z\"");
        let t = Timestamp::from_millis(1_774_619_700_423);
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-03-27T13:55:00.423Z\"");
        let back: Timestamp = serde_json::from_str("\"2026-03-27T13:55:00.423Z\"").unwrap();
        assert_eq!(back.to_millis(), 1_774_619_700_423);
        assert!(back.is_valid());
    }

    #[test]
    fn out_of_range_never_panics() {
        let huge = Timestamp {
            seconds: 100_000_000_000_000_000,
            nanos: 0,
        };
        assert_eq!(huge.to_millis(), i64::MAX);
        assert!(!huge.is_valid());
        let t = Timestamp {
            seconds: i64::MIN,
            nanos: -1,
        };
        assert_eq!(t.to_millis(), i64::MIN);
        assert!(!t.is_valid());
        assert!(serde_json::to_string(&huge).is_err());
    }
}
