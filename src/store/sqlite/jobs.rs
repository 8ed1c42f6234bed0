//! Claiming side-call jobs on SQLite: one writer at a time holds the file,
//! so a claim in an IMMEDIATE transaction is never raced, and its lease
//! keeps other processes off the job until it ends.

use crate::store::sql::{self, Statement};

/// [`sql::claim_jobs`] as it is.
pub(super) static CLAIM: Statement = Statement::named(sql::claim_jobs!(sql::claim_ranked!()));
