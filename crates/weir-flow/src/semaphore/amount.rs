//! What a permit is counted in: plain bytes (`u64`) or items and bytes together.

use std::fmt;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for super::DualAmount {}
}

/// A quantity of permits: `u64` for [`Semaphore`](super::Semaphore) (bytes, usually) and
/// [`DualAmount`] for [`DualSemaphore`](super::DualSemaphore).
///
/// The trait is sealed: the sans-IO [`SemaphoreCore`](super::SemaphoreCore) is generic
/// over it, but only these two forms exist. Arithmetic saturates; `fits` compares every
/// component, so a dual request fits only when both its item count and its bytes fit.
pub trait Amount:
    Copy + Eq + Default + fmt::Debug + fmt::Display + Send + Sync + Unpin + 'static + sealed::Sealed
{
    /// Whether every component of `self` is at most the same component of `limit`.
    fn fits(self, limit: Self) -> bool;
    /// Component-wise `self + other`, saturating.
    fn saturating_add(self, other: Self) -> Self;
    /// Component-wise `self - other`, saturating at zero.
    fn saturating_sub(self, other: Self) -> Self;
    /// The bytes this amount stands for, reported in [`FlowStats::bytes`](crate::FlowStats::bytes).
    fn bytes(self) -> u64;
    /// Whether every component is zero.
    fn is_zero(self) -> bool {
        self == Self::default()
    }
}

impl Amount for u64 {
    fn fits(self, limit: Self) -> bool {
        self <= limit
    }

    fn saturating_add(self, other: Self) -> Self {
        u64::saturating_add(self, other)
    }

    fn saturating_sub(self, other: Self) -> Self {
        u64::saturating_sub(self, other)
    }

    fn bytes(self) -> u64 {
        self
    }
}

/// An item count and a byte count taken together, atomically, by a
/// [`DualSemaphore`](super::DualSemaphore).
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{Amount, DualAmount};
///
/// let limit = DualAmount::new(10, 1_000);
/// assert!(DualAmount::new(10, 1_000).fits(limit));
/// assert!(!DualAmount::new(11, 10).fits(limit)); // too many items, though few bytes
/// assert_eq!(DualAmount::new(2, 300).to_string(), "2 items / 300 bytes");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DualAmount {
    /// The number of items (messages, records).
    pub items: u64,
    /// The number of bytes.
    pub bytes: u64,
}

impl DualAmount {
    /// `items` items and `bytes` bytes.
    pub const fn new(items: u64, bytes: u64) -> Self {
        DualAmount { items, bytes }
    }
}

impl Amount for DualAmount {
    fn fits(self, limit: Self) -> bool {
        self.items <= limit.items && self.bytes <= limit.bytes
    }

    fn saturating_add(self, other: Self) -> Self {
        DualAmount {
            items: self.items.saturating_add(other.items),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    fn saturating_sub(self, other: Self) -> Self {
        DualAmount {
            items: self.items.saturating_sub(other.items),
            bytes: self.bytes.saturating_sub(other.bytes),
        }
    }

    fn bytes(self) -> u64 {
        self.bytes
    }
}

impl fmt::Display for DualAmount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} items / {} bytes", self.items, self.bytes)
    }
}
