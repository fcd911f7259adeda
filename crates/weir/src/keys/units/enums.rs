//! [`FromValue`](super::FromValue) and [`ToValue`](super::ToValue) for enums written as
//! one of a few strings.

/// Implements [`FromValue`](super::FromValue) and [`ToValue`](super::ToValue) for a fieldless enum written as one of a
/// few strings, and `Serialize` and `Display` as that same string.
macro_rules! string_enum {
    ($ty:ty { $first:literal => $first_variant:ident $(, $text:literal => $variant:ident)* $(,)? }) => {
        impl $crate::keys::units::FromValue for $ty {
            const EXPECTED: &'static str = concat!("one of \"", $first, "\"" $(, ", \"", $text, "\"")*);
            const KIND: &'static str = concat!("one of \"", $first, "\"" $(, " | \"", $text, "\"")*);
            fn from_value(value: &toml::Value) -> Result<Self, String> {
                match value.as_str() {
                    Some($first) => Ok(Self::$first_variant),
                    $(Some($text) => Ok(Self::$variant),)*
                    _ => Err($crate::keys::units::choice_mismatch(
                        Self::EXPECTED,
                        value,
                        &[$first $(, $text)*],
                    )),
                }
            }
        }

        impl $crate::keys::units::ToValue for $ty {
            fn to_value(&self) -> toml::Value {
                toml::Value::String(self.as_str().to_owned())
            }
        }

        impl $ty {
            /// The name as written in the configuration.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$first_variant => $first,
                    $(Self::$variant => $text,)*
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use string_enum;

/// Implements [`FromValue`](super::FromValue) and [`ToValue`](super::ToValue) for an enum that another crate already
/// (de)serializes with serde (weir-wal's `OnFull`, `StartFrom`): the value is read and
/// written through the enum's own `Deserialize` and `Serialize`, so the names are never
/// copied and mapped by hand; the listed names only word the message and the "did you
/// mean" hint.
macro_rules! serde_enum {
    ($ty:ty { $first:literal $(, $text:literal)* $(,)? }) => {
        impl $crate::keys::units::FromValue for $ty {
            const EXPECTED: &'static str = concat!("one of \"", $first, "\"" $(, ", \"", $text, "\"")*);
            const KIND: &'static str = concat!("one of \"", $first, "\"" $(, " | \"", $text, "\"")*);
            fn from_value(value: &toml::Value) -> Result<Self, String> {
                <$ty as serde::Deserialize>::deserialize(value.clone()).map_err(|_| {
                    $crate::keys::units::choice_mismatch(Self::EXPECTED, value, &[$first $(, $text)*])
                })
            }
        }

        impl $crate::keys::units::ToValue for $ty {
            fn to_value(&self) -> toml::Value {
                toml::Value::try_from(self).expect("a unit variant serializes as a string")
            }
        }
    };
}

serde_enum!(weir_wal::OnFull { "block", "reject", "drop_oldest" });
serde_enum!(weir_wal::StartFrom { "earliest", "latest" });
