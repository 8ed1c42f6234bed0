//! What the operations written once ask of an engine: run a [`Statement`]
//! with its arguments ([`Param`]), hand back rows read by column ([`Row`]),
//! append events, and hold a transaction ([`Engine`]). Each engine
//! implements these for its own driver; the store's traits
//! ([`Sessions`](super::Sessions), [`Jobs`](super::Jobs), …) do the rest.

use std::borrow::Cow;

use super::sql::Statement;
use super::{NewEvent, Result, TextEnum};

/// A value bound to a statement's parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Bool(bool),
}

impl From<i64> for Param<'_> {
    fn from(n: i64) -> Self {
        Param::Int(n)
    }
}

impl From<u32> for Param<'_> {
    fn from(n: u32) -> Self {
        Param::Int(i64::from(n))
    }
}

impl From<f64> for Param<'_> {
    fn from(x: f64) -> Self {
        Param::Real(x)
    }
}

impl From<bool> for Param<'_> {
    fn from(b: bool) -> Self {
        Param::Bool(b)
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(s: &'a str) -> Self {
        Param::Text(s)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(s: &'a String) -> Self {
        Param::Text(s)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(s: &'a Option<String>) -> Self {
        s.as_deref().into()
    }
}

impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Param::Null, Into::into)
    }
}

/// Text-valued enums are bound as their spelling.
macro_rules! text_params {
    ($($t:ty),+) => {$(
        impl From<$t> for Param<'_> {
            fn from(v: $t) -> Self {
                Param::Text(TextEnum::as_str(v))
            }
        }
    )+};
}

text_params!(
    super::Role,
    super::TurnStatus,
    super::Mode,
    super::CallPath,
    super::JobKind,
    super::JobStatus,
    super::CallKind,
    super::PinSource,
    super::CacheUse
);

/// A statement's arguments, in parameter order: `args![id, now()]`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        &[$($crate::store::db::Param::from($arg)),*]
    };
}
pub(crate) use args;

/// A named statement's arguments, `name = value`, for
/// [`Statement::bind`](super::sql::Statement::bind):
/// `named![id = 7, now = t]`.
macro_rules! named {
    ($($name:ident = $arg:expr),* $(,)?) => {
        &[$((stringify!($name), $crate::store::db::Param::from($arg))),*]
    };
}
pub(crate) use named;

/// A column's value as an engine hands it over.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bool(bool),
}

/// One row of a result, read by column index; see [`Row::get`].
pub trait Row {
    /// Column `i` as it is stored.
    fn value(&self, i: usize) -> Result<Value>;
}

impl dyn Row + '_ {
    /// Column `i` as a `T`.
    pub fn get<T: Column>(&self, i: usize) -> Result<T> {
        T::from_value(self.value(i)?).map_err(|value| {
            let name = std::any::type_name::<T>().rsplit("::").next().unwrap_or("");
            let shown: String = format!("{value:?}").chars().take(80).collect();
            anyhow::anyhow!("the session store holds {shown} in column {i}, where {name} belongs")
                .into()
        })
    }
}

/// A type a column reads into, on every engine; the value back when it is
/// not one (a NULL where a value belongs, text that is no known spelling).
pub trait Column: Sized {
    fn from_value(value: Value) -> std::result::Result<Self, Value>;
}

impl<T: Column> Column for Option<T> {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

impl Column for i64 {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Int(n) => Ok(n),
            v => Err(v),
        }
    }
}

/// Generations: stored as 64 bits, never near 32.
impl Column for u32 {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        i64::from_value(value).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    }
}

/// SQLite keeps a whole number in a REAL column as an integer.
impl Column for f64 {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Real(x) => Ok(x),
            #[allow(clippy::cast_precision_loss)]
            Value::Int(n) => Ok(n as f64),
            v => Err(v),
        }
    }
}

/// SQLite keeps a flag as 0 or 1.
impl Column for bool {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Bool(b) => Ok(b),
            Value::Int(n) => Ok(n != 0),
            v => Err(v),
        }
    }
}

impl Column for String {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Text(s) => Ok(s),
            v => Err(v),
        }
    }
}

impl<T: TextEnum> Column for T {
    fn from_value(value: Value) -> std::result::Result<Self, Value> {
        let s = String::from_value(value)?;
        T::parse(&s).ok_or(Value::Text(s))
    }
}

/// A connection or a transaction of an engine.
pub trait Db {
    /// Run `statement`; how many rows it changed.
    fn execute(&self, statement: &Statement, args: &[Param]) -> Result<u64>;

    /// Run `statement`, handing each row to `row` in order.
    fn query(
        &self,
        statement: &Statement,
        args: &[Param],
        row: &mut dyn FnMut(&dyn Row) -> Result<()>,
    ) -> Result<()>;

    /// Append events, as the last statement of the change they report
    /// (each engine numbers them its own way: see its `events` module).
    fn append_events(&self, events: &[NewEvent]) -> Result<()>;

    /// `text` as this engine stores it (PostgreSQL cannot hold a NUL).
    fn stored<'a>(&self, text: &'a str) -> Cow<'a, str>;
}

impl dyn Db + '_ {
    /// Every row, read by `map`.
    pub fn rows<T>(
        &self,
        statement: &Statement,
        args: &[Param],
        map: impl Fn(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.query(statement, args, &mut |r| {
            out.push(map(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row, if there is one, read by `map`. Every statement run
    /// this way returns one row at most (a key, an aggregate), so reading
    /// them all reads just that.
    pub fn row<T>(
        &self,
        statement: &Statement,
        args: &[Param],
        map: impl Fn(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.rows(statement, args, map)?.into_iter().next())
    }

    /// The first column of the first row, if there is a row.
    pub fn value_opt<T: Column>(&self, statement: &Statement, args: &[Param]) -> Result<Option<T>> {
        self.row(statement, args, |r| r.get(0))
    }

    /// The first column of the row the statement always returns (a count,
    /// an aggregate, an id it inserted).
    pub fn value<T: Column>(&self, statement: &Statement, args: &[Param]) -> Result<T> {
        self.value_opt(statement, args)?.ok_or_else(|| {
            anyhow::anyhow!("the session store returned no row: {}", statement.text()).into()
        })
    }
}

/// What an engine gives the operations written once: its connection and
/// its transactions.
pub trait Engine: Send {
    /// The store's connection, for what runs outside a transaction.
    fn db(&self) -> &dyn Db;

    /// Run `f` in one transaction, committed if it returns `Ok` and rolled
    /// back otherwise. See [`in_transaction`] for one that returns a value.
    fn transaction(&mut self, f: &mut dyn FnMut(&dyn Db) -> Result<()>) -> Result<()>;
}

/// Run `f` in one transaction of `engine` and return what it returns.
pub(crate) fn in_transaction<E: Engine + ?Sized, T>(
    engine: &mut E,
    f: impl FnOnce(&dyn Db) -> Result<T>,
) -> Result<T> {
    let (mut f, mut out) = (Some(f), None);
    engine.transaction(&mut |db| {
        if let Some(f) = f.take() {
            out = Some(f(db)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| anyhow::anyhow!("the store's transaction did not run").into())
}

/// A count as a parameter: a `usize` never near 2^63.
pub(crate) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{JobKind, Role};

    /// A row of values as an engine would hand them over.
    struct Values(Vec<Value>);

    impl Row for Values {
        fn value(&self, i: usize) -> Result<Value> {
            Ok(self.0[i].clone())
        }
    }

    #[test]
    fn columns_read_into_their_types_and_a_mismatch_is_said() {
        let row = Values(vec![
            Value::Int(7),
            Value::Null,
            Value::Text("user".into()),
            Value::Int(1),
            Value::Int(2),
            Value::Text("nonsense".into()),
            Value::Int(i64::from(u32::MAX) + 1),
        ]);
        let r: &dyn Row = &row;
        assert_eq!(r.get::<i64>(0).unwrap(), 7);
        assert_eq!(r.get::<Option<i64>>(1).unwrap(), None);
        assert_eq!(r.get::<Option<String>>(1).unwrap(), None);
        assert_eq!(r.get::<Role>(2).unwrap(), Role::User);
        assert_eq!(r.get::<Option<Role>>(2).unwrap(), Some(Role::User));
        // SQLite's flags and whole numbers in REAL columns.
        assert!(r.get::<bool>(3).unwrap());
        assert!((r.get::<f64>(4).unwrap() - 2.0).abs() < f64::EPSILON);
        assert_eq!(r.get::<u32>(6).unwrap(), u32::MAX);
        let null = r.get::<i64>(1).unwrap_err().to_string();
        assert!(
            null.contains("Null in column 1, where i64 belongs"),
            "{null}"
        );
        let unknown = format!("{:#}", r.get::<JobKind>(5).unwrap_err());
        assert!(unknown.contains("\"nonsense\""), "{unknown}");
        assert!(unknown.contains("JobKind"), "{unknown}");
        assert!(r.get::<String>(0).is_err());
    }

    #[test]
    fn arguments_bind_as_their_values() {
        let thread: Option<String> = None;
        let args: &[Param] = args![7_i64, "a", &thread, Some(2.5), true, JobKind::Pin, 3_u32];
        assert_eq!(
            args,
            [
                Param::Int(7),
                Param::Text("a"),
                Param::Null,
                Param::Real(2.5),
                Param::Bool(true),
                Param::Text("pin"),
                Param::Int(3),
            ]
        );
    }
}
