//! `store migrate`: bring a store an earlier release wrote to this build's
//! schema, for a store its readers cannot migrate themselves.

use anyhow::Result;

use crate::cmd::summary;
use crate::store::{self, Location, SCHEMA_VERSION};

pub(super) fn run(location: &Location) -> Result<()> {
    match store::migrate(location)? {
        None => summary(format!(
            "no session store at {location}: nothing to migrate"
        )),
        Some(SCHEMA_VERSION) => summary(format!(
            "{location} is at schema {SCHEMA_VERSION}: nothing to migrate"
        )),
        Some(0) => summary(format!("created schema {SCHEMA_VERSION} in {location}")),
        Some(found) => summary(format!(
            "migrated {location} from schema {found} to {SCHEMA_VERSION}"
        )),
    }
    Ok(())
}
