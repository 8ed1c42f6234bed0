//! `schema`: the JSON Schema of each JSON output, generated from the type
//! the command serializes, so the published contract and the program
//! cannot drift apart (the committed copies under `schemas/` are checked
//! against these in the tests).

use std::io::Write;

use anyhow::Result;
use clap::{Args, ValueEnum};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::Value;

use super::{doctor, events, facts, forget, jobs, pin, prompt, sessions, stats, store};

const SCHEMA_AFTER: &str = "\
The schemas are generated from the types the program serializes, and committed under \
schemas/ in the source. A schema of lines (stream, event, facts-export) describes one line.";

#[derive(Debug, Args)]
#[command(after_long_help = SCHEMA_AFTER)]
pub struct SchemaArgs {
    /// The output whose schema to print [default: list every output and the command that prints it]
    #[arg(value_enum, value_name = "NAME")]
    pub name: Option<SchemaName>,
}

/// A JSON output of the program, by the name of its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaName {
    /// turn --json
    Turn,
    /// Each line of turn --stream-json
    Stream,
    /// Each line of events --json
    Event,
    /// facts list --json
    Facts,
    /// facts search --json
    FactsSearch,
    /// Each line of facts export
    FactsExport,
    /// facts enrich --json
    FactsEnrich,
    /// sessions list --json
    Sessions,
    /// sessions show --json
    Session,
    /// jobs list --json
    Jobs,
    /// stats --json
    Stats,
    /// prompt --json
    Prompt,
    /// history --json
    History,
    /// pin history --json
    PinHistory,
    /// doctor --json
    Doctor,
    /// store copy --json
    StoreCopy,
    /// forget --json
    Forget,
}

pub(crate) fn run(args: &SchemaArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match args.name {
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
        SchemaName::Event => root::<events::EventLine<'static>>(),
        SchemaName::Facts => root::<Vec<crate::store::Fact>>(),
        SchemaName::FactsSearch => root::<Vec<crate::store::ScoredFact>>(),
        SchemaName::FactsExport => root::<crate::store::Fact>(),
        SchemaName::FactsEnrich => root::<facts::Enriched>(),
        SchemaName::Sessions => root::<Vec<sessions::SessionView<'static>>>(),
        SchemaName::Session => root::<sessions::SessionView<'static>>(),
        SchemaName::Jobs => root::<Vec<jobs::JobView<'static>>>(),
        SchemaName::Stats => root::<stats::Stats>(),
        SchemaName::Prompt => root::<prompt::Plan<'static>>(),
        SchemaName::History => root::<Vec<sessions::HistoryTurn<'static>>>(),
        SchemaName::PinHistory => root::<Vec<pin::Revision<'static>>>(),
        SchemaName::Doctor => root::<doctor::DoctorReport>(),
        SchemaName::StoreCopy => root::<store::copy::CopyReport>(),
        SchemaName::Forget => root::<forget::ForgetReport>(),
    };
    schema.insert(
        "title".into(),
        format!("duduclaw-session {}", self::name(name)).into(),
    );
    schema.insert("description".into(), printed_by(name).into());
    schema
}

fn root<T: JsonSchema>() -> Schema {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = schema.to_value();
    close(&mut v, false);
    Schema::try_from(v).expect("a closed schema is still a schema")
}

/// Close every object schema that lists its properties to fields it does
/// not list: a field the program adds is added to its type, and so to the
/// schema. An object that also takes properties from subschemas (a
/// flattened enum: `kind` and `data` of an event) is closed with
/// `unevaluatedProperties`, which sees what those add, and its branches
/// are left open. Left open: maps (their values' schema is given) and what
/// we pass through as is (an API request body).
fn close(v: &mut Value, branch: bool) {
    let Value::Object(o) = v else {
        return;
    };
    let combined = ["oneOf", "anyOf", "allOf", "$ref"]
        .iter()
        .any(|k| o.contains_key(*k));
    let listed = o.contains_key("properties");
    if listed && combined {
        o.entry("unevaluatedProperties").or_insert(false.into());
    } else if listed && !branch {
        o.entry("additionalProperties").or_insert(false.into());
    }
    for (key, sub) in o.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" => {
                if let Value::Object(m) = sub {
                    m.values_mut().for_each(|s| close(s, false));
                }
            }
            "oneOf" | "anyOf" | "allOf" => {
                if let Value::Array(a) = sub {
                    a.iter_mut().for_each(|s| close(s, listed));
                }
            }
            "items" | "additionalProperties" => close(sub, false),
            _ => {}
        }
    }
}
