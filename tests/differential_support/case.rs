//! One differential configuration: the connector properties it adds, the outbox table it needs, the SQL
//! it runs and what it must produce. `{t}` in SQL stands for the case's own table (`public.outbox_…`).

/// What both relays must do with the case's rows.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Produce this many records, then keep running until stopped.
    Records(usize),
    /// Produce this many records, then stop on their own with an error (e.g. an UPDATE under `fatal`).
    FailsAfter(usize),
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    /// Connector properties added to the common ones (converters, `transforms.outbox.*`, …). ASCII
    /// only: Java reads .properties files as ISO-8859-1 (use `\uXXXX` escapes).
    pub props: Vec<String>,
    /// Type of the standard `payload` column.
    pub payload_type: &'static str,
    /// Whether `aggregateid` may be NULL (a NULL key).
    pub nullable_key: bool,
    /// Extra column definitions, e.g. `part integer`.
    pub columns: Vec<&'static str>,
    /// SQL run before the publication and slots exist (DDL tweaks, rows a snapshot should see).
    pub before_slots: Vec<String>,
    /// SQL run after the slots exist, one `batch_execute` each (so one transaction each unless it
    /// says BEGIN/COMMIT itself).
    pub sql: Vec<String>,
    /// Topics created (with `partitions`) on both brokers before the relays start.
    pub topics: Vec<String>,
    pub partitions: i32,
    pub expect: Expect,
    /// Each relay creates its own slot at start (for snapshots: a relay snapshots the table as of its
    /// slot's creation), instead of the harness creating both before the case's SQL.
    pub relays_create_slots: bool,
    /// Compare record timestamps too: they are deterministic when `table.field.event.timestamp` sets
    /// them from a column.
    pub compare_timestamps: bool,
    /// Records written by a schema-registry converter: where their schema ids are, so that the
    /// comparison looks at the schemas the ids name (`registry.rs`), not at the ids.
    pub registry: Option<super::registry::Ids>,
    /// Properties only pgoutbox gets (later keys win): a Confluent converter config on pgoutbox's
    /// side against the Apicurio converter writing the same wire format in Connect.
    pub pgoutbox_props: Vec<String>,
}

impl Case {
    pub fn new(name: &'static str) -> Case {
        Case {
            name,
            props: Vec::new(),
            payload_type: "jsonb",
            nullable_key: false,
            columns: Vec::new(),
            before_slots: Vec::new(),
            sql: Vec::new(),
            topics: Vec::new(),
            partitions: 3,
            expect: Expect::Records(0),
            relays_create_slots: false,
            compare_timestamps: false,
            registry: None,
            pgoutbox_props: Vec::new(),
        }
    }

    pub fn props<S: AsRef<str>>(mut self, props: &[S]) -> Self {
        self.props.extend(props.iter().map(|s| s.as_ref().to_string()));
        self
    }

    /// Event Router options, without the `transforms.outbox.` prefix.
    pub fn router(mut self, options: &[&str]) -> Self {
        self.props.extend(options.iter().map(|s| format!("transforms.outbox.{s}")));
        self
    }

    pub fn payload_type(mut self, ty: &'static str) -> Self {
        self.payload_type = ty;
        self
    }

    pub fn nullable_key(mut self) -> Self {
        self.nullable_key = true;
        self
    }

    pub fn columns(mut self, columns: &[&'static str]) -> Self {
        self.columns.extend_from_slice(columns);
        self
    }

    pub fn before_slots(mut self, sql: impl IntoIterator<Item = String>) -> Self {
        self.before_slots.extend(sql);
        self
    }

    pub fn sql(mut self, sql: impl IntoIterator<Item = String>) -> Self {
        self.sql.extend(sql);
        self
    }

    pub fn topics(mut self, topics: &[&str]) -> Self {
        self.topics.extend(topics.iter().map(|s| s.to_string()));
        self
    }

    pub fn relays_create_slots(mut self) -> Self {
        self.relays_create_slots = true;
        self
    }

    pub fn compare_timestamps(mut self) -> Self {
        self.compare_timestamps = true;
        self
    }

    pub fn registry(mut self, ids: super::registry::Ids) -> Self {
        self.registry = Some(ids);
        self
    }

    pub fn pgoutbox_props<S: AsRef<str>>(mut self, props: &[S]) -> Self {
        self.pgoutbox_props.extend(props.iter().map(|s| s.as_ref().to_string()));
        self
    }

    pub fn records(mut self, n: usize) -> Self {
        self.expect = Expect::Records(n);
        self
    }

    pub fn fails_after(mut self, n: usize) -> Self {
        self.expect = Expect::FailsAfter(n);
        self
    }

    pub fn create_table_sql(&self, table: &str) -> String {
        let key_null = if self.nullable_key { "" } else { " NOT NULL" };
        let mut cols = vec![
            "id uuid PRIMARY KEY".to_string(),
            "aggregatetype varchar(255) NOT NULL".to_string(),
            format!("aggregateid varchar(255){key_null}"),
            "type varchar(255) NOT NULL".to_string(),
            format!("payload {}", self.payload_type),
        ];
        cols.extend(self.columns.iter().map(|c| c.to_string()));
        format!("CREATE TABLE {table} ({})", cols.join(", "))
    }
}

/// A SQL string literal (standard_conforming_strings: only quotes need doubling; control characters
/// other than NUL may appear raw).
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn opt_lit(s: Option<&str>) -> String {
    s.map_or_else(|| "NULL".to_string(), lit)
}

/// An INSERT of one event into the standard columns.
pub fn insert(aggregate_type: &str, aggregate_id: Option<&str>, payload: Option<&str>) -> String {
    format!(
        "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), {}, {}, 'Created', {})",
        lit(aggregate_type),
        opt_lit(aggregate_id),
        opt_lit(payload)
    )
}

/// Statements in one transaction.
pub fn tx(statements: &[String]) -> String {
    format!("BEGIN; {}; COMMIT", statements.join("; "))
}
