//! weir's segmented write-ahead log.
#![warn(missing_docs)]
