//! (in progress)
pub struct LockFile;
