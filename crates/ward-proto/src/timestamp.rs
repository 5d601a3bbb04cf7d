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
        s.serialize_str(&dt.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let dt = DateTime::parse_from_rfc3339(&s).map_err(D::Error::custom)?;
        Ok(Self {
            seconds: dt.timestamp(),
            nanos: dt.timestamp_subsec_nanos() as i32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
