//! Cancelling a search whose caller has gone away, so that no work outlives its request.
//!
//! A search runs on a blocking thread that cannot be interrupted; instead the engine looks at
//! the request's [`CancelFlag`] between its stages (before retrieval, before fusion, before
//! the rerank, the costliest stage) and stops with [`Error::Cancelled`] once it is set. The
//! HTTP layer sets it from a guard ([`CancelOnDrop`]) dropped with the request's future when
//! the client disconnects.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result, Stage};

/// A shared "stop" flag; clones share it.
///
/// ```
/// use sextant_core::pipeline::CancelFlag;
/// use sextant_core::Stage;
///
/// let flag = CancelFlag::default();
/// let seen_by_the_worker = flag.clone();
/// assert!(seen_by_the_worker.check(Stage::Retrieval).is_ok());
/// flag.cancel();
/// assert!(seen_by_the_worker.check(Stage::Retrieval).is_err());
/// ```
#[derive(Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// Asks the work to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether stopping was asked.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Err(Error::Cancelled)` naming `stage` (the stage that would have run) once cancelled.
    pub fn check(&self, stage: Stage) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Cancelled(stage));
        }
        Ok(())
    }
}

impl fmt::Debug for CancelFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CancelFlag({})", self.is_cancelled())
    }
}

impl PartialEq for CancelFlag {
    /// The same flag (clones of one another).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Cancels its flag when dropped, unless [`CancelOnDrop::disarm`]ed: held by the future that
/// waits for the work, it cancels the work when that future is dropped unfinished.
///
/// ```
/// use sextant_core::pipeline::{CancelFlag, CancelOnDrop};
///
/// let flag = CancelFlag::default();
/// drop(CancelOnDrop::new(flag.clone()));
/// assert!(flag.is_cancelled());
///
/// let flag = CancelFlag::default();
/// CancelOnDrop::new(flag.clone()).disarm();
/// assert!(!flag.is_cancelled());
/// ```
pub struct CancelOnDrop(Option<CancelFlag>);

impl CancelOnDrop {
    /// A guard over `flag`.
    pub fn new(flag: CancelFlag) -> Self {
        CancelOnDrop(Some(flag))
    }

    /// The work finished: dropping the guard no longer cancels.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.cancel();
        }
    }
}
