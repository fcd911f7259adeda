//! The bound of one queue or buffer, as a component reports it for the memory
//! inventory (`weir validate`).

/// The bound of one queue or buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueBound {
    /// Where it is, as a config path: `sources.gen.batch`, `wal.channel`.
    pub name: String,
    /// Most items it holds; `None` when it is bounded in bytes only.
    pub items: Option<u64>,
    /// Most bytes it holds; 0 when it holds no payload of its own.
    pub bytes: u64,
    /// What it is and which keys set the bound.
    pub note: String,
}

impl std::fmt::Display for QueueBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items = self.items.map_or_else(|| "-".to_owned(), |n| n.to_string());
        write!(
            f,
            "{}: {items} items, {} — {}",
            self.name,
            super::format_bytes(self.bytes),
            self.note
        )
    }
}

/// Collects the bounds of one component, named under its config path
/// (`sources.NAME.…`, `sinks.NAME.…`).
#[derive(Debug)]
pub struct Bounds<'a> {
    path: String,
    out: &'a mut Vec<QueueBound>,
}

impl<'a> Bounds<'a> {
    /// Bounds of the component at `path`, appended to `out`.
    pub fn new(path: String, out: &'a mut Vec<QueueBound>) -> Self {
        Self { path, out }
    }

    /// Adds the buffer `what` of this component.
    pub fn add(&mut self, what: &str, items: Option<u64>, bytes: u64, note: String) {
        self.out.push(QueueBound {
            name: super::walk::join(&self.path, what),
            items,
            bytes,
            note,
        });
    }
}

/// `a × b` for bounds, saturating instead of overflowing.
pub fn times(a: impl Into<u64>, b: u64) -> u64 {
    a.into().saturating_mul(b)
}
