//! Claiming side-call jobs on PostgreSQL: claims lock the rows they take
//! and skip rows another host is claiming (`FOR UPDATE SKIP LOCKED`), so
//! two workers never run one job, and neither waits for the other.

use crate::store::sql::{self, Statement};

/// [`sql::claim_jobs`] of rows locked first. The ranking reads without
/// locks; the rows it picks are then locked and checked again, and a row
/// another host is claiming is skipped, so two hosts never take one job.
pub(super) static CLAIM: Statement = Statement::named(sql::claim_jobs!(
    "SELECT id FROM jobs WHERE id IN (",
    sql::claim_ranked!(),
    ") AND ",
    sql::job_runnable!(),
    " FOR UPDATE SKIP LOCKED"
));
