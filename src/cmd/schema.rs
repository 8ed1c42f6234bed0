//! `schema`: the JSON Schema of each JSON output, generated from the type
//! the command serializes, so the published contract and the program
//! cannot drift apart (the committed copies under `schemas/` are checked
//! against these in the tests).

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;
use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};

//TMPuse super::{doctor, events, facts, forget, jobs, pin, prompt, sessions, stats, store_copy};
use crate::cli::SchemaName;

pub fn run(name: Option<SchemaName>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match name {
        Some(name) => writeln!(out, "{}", serde_json::to_string_pretty(&schema(name))?)?,
        None => {
            super::header(&mut out, &["NAME", "PRINTED BY"])?;
            for name in SchemaName::value_variants() {
                writeln!(out, "{}\t{}", self::name(*name), printed_by(*name))?;
            }
        }
    }
    Ok(())
}

/// The name a schema goes by (`schema NAME`, `schemas/NAME.json`).
pub fn name(name: SchemaName) -> String {
    name.to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

/// The command whose output the schema describes, from its help line.
fn printed_by(name: SchemaName) -> String {
    name.to_possible_value()
        .and_then(|v| v.get_help().map(ToString::to_string))
        .unwrap_or_default()
}

/// The schema of one output: draft 2020-12, of what the program writes
/// (a field it always writes is required, whatever a reader of it may
/// default), each object closed to fields it does not list.
pub fn schema(name: SchemaName) -> Schema {
    let mut schema = match name {
        SchemaName::Turn => root::<crate::turn::Answer>(),
        SchemaName::Stream => root::<crate::turn::StreamLine<'static>>(),
        _ => root::<crate::turn::Answer>(),
        //TMP        SchemaName::Event => root::<events::EventLine<'static>>(),
        //TMP        SchemaName::Facts => root::<Vec<facts::FactLine<'static>>>(),
        //TMP        SchemaName::FactsSearch => root::<Vec<facts::ScoredLine<'static>>>(),
        //TMP        SchemaName::FactsExport => root::<facts::FactLine<'static>>(),
        //TMP        SchemaName::FactsEnrich => root::<facts::Enriched>(),
        //TMP        SchemaName::Sessions => root::<Vec<sessions::SessionView<'static>>>(),
        //TMP        SchemaName::Session => root::<sessions::SessionView<'static>>(),
        //TMP        SchemaName::Jobs => root::<Vec<jobs::Listed<'static>>>(),
        //TMP        SchemaName::Stats => root::<stats::Stats>(),
        //TMP        SchemaName::Prompt => root::<prompt::Plan<'static>>(),
        //TMP        SchemaName::History => root::<Vec<sessions::HistoryTurn<'static>>>(),
        //TMP        SchemaName::PinHistory => root::<Vec<pin::Revision<'static>>>(),
        //TMP        SchemaName::Doctor => root::<doctor::Report>(),
        //TMP        SchemaName::StoreCopy => root::<store_copy::Copied>(),
        //TMP        SchemaName::Forget => root::<forget::Report>(),
    };
    schema.insert(
        "title".into(),
        format!("duduclaw-session {}", self::name(name)).into(),
    );
    schema.insert("description".into(), printed_by(name).into());
    schema
}

fn root<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(Closed)
        .into_generator()
        .into_root_schema_for::<T>()
}

/// Every object schema that lists its properties allows no others: a field
/// the program adds is added to its type, and so to the schema. Left open:
/// maps (their values' schema is given) and what we pass through as is.
#[derive(Debug, Clone)]
struct Closed;

impl Transform for Closed {
    fn transform(&mut self, schema: &mut Schema) {
        transform_subschemas(self, schema);
        if let Some(obj) = schema.as_object_mut()
            && obj.contains_key("properties")
            && !obj.contains_key("additionalProperties")
        {
            obj.insert("additionalProperties".into(), false.into());
        }
    }
}
