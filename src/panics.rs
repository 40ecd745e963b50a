//! The message of a caught panic. A leaf module: the job runner, the link-analysis job and the
//! BVGraph reader all report panics, and `error` (which imports `graph`) cannot be their
//! common home without an import cycle.

/// The message of a panic's payload (`panic!` with a literal or a formatted string).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
